"""The asset checks' SQL lives in sql/ as views: each one finds exactly the faults it names, and
the checks read them."""

from __future__ import annotations

import duckdb
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines.defs.metadata import PREVIEW_COLUMNS, table_metadata
from pipelines.defs.replay.checks import no_negative_stage
from pipelines.defs.reports.checks import every_scenario_replays_every_request
from pipelines.warehouse import run_sql, write_table


def test_scenario_coverage_counts_missing_and_extra_rows_per_scenario(tmp_path):
    path = str(tmp_path / "w.duckdb")
    with duckdb.connect(path) as conn:
        write_table(conn, "request_stages", pl.DataFrame({
            "trace": ["t", "t"], "scenario": ["baseline"] * 2, "request_id": ["1", "2"]}))
        write_table(conn, "scenario_stages", pl.DataFrame({
            "trace": ["t", "t", "t", "t"], "scenario": ["x", "x", "x", "y"],
            "request_id": ["1", "2", "3", "1"]}))
        run_sql(conn, "scenario_coverage")
        rows = conn.sql("FROM scenario_coverage ORDER BY scenario").fetchall()
    assert rows == [("x", 0, 1), ("y", 1, 0)]
    result = every_scenario_replays_every_request(duckdb=DuckDBResource(database=path))
    assert not result.passed
    assert {k: v.value for k, v in result.metadata.items()} == {"missing_rows": 1, "extra_rows": 1}


def test_negative_stages_lists_the_impossible_rows(tmp_path):
    path = str(tmp_path / "w.duckdb")
    stages = pl.DataFrame({"trace": ["t"] * 3, "scenario": ["baseline"] * 3,
                           "request_id": ["ok", "neg", "no_e2e"], "queue_s": [0.0, -1e-9, 0.0],
                           "prefill_s": [0.1] * 3, "decode_s": [1.0] * 3, "network_s": [0.0] * 3,
                           "prefill_gpu_s": [0.4] * 3, "decode_gpu_s": [4.0] * 3,
                           "e2e_s": [1.1, 1.1, None]})
    with duckdb.connect(path) as conn:
        write_table(conn, "request_stages", stages)
        run_sql(conn, "negative_stages")
        bad = conn.sql("SELECT request_id FROM negative_stages ORDER BY 1").fetchall()
    assert bad == [("neg",), ("no_e2e",)]
    result = no_negative_stage(duckdb=DuckDBResource(database=path))
    assert not result.passed and result.metadata["bad_rows"].value == 2


def test_a_wide_tables_preview_says_it_shows_part_of_its_columns():
    """The metadata preview keeps the first 12 columns; what_if has 27, and its preview hid the
    p95 and fleet columns without a word."""
    with duckdb.connect() as conn:
        conn.execute("CREATE TABLE wide AS SELECT " + ", ".join(f"{i} AS c{i}" for i in range(20)))
        conn.execute("CREATE TABLE narrow AS SELECT 1 AS a, 2 AS b")
        wide = table_metadata(conn, "wide")["preview"].value
        narrow = table_metadata(conn, "narrow")["preview"].value
    assert f"The first {PREVIEW_COLUMNS} of 20 columns; the table `wide` has them all." in wide
    assert "c11" in wide and "c12" not in wide and "columns;" not in narrow
