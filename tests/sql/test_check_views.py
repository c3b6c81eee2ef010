"""The asset checks' SQL lives in sql/ as views: each one finds exactly the faults it names, and
the checks read them."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.metadata import PREVIEW_CELL_CHARS, PREVIEW_COLUMNS, table_metadata
from pipelines.defs.replay.checks import no_negative_stage
from pipelines.defs.reports.checks import every_scenario_replays_every_request
from pipelines.warehouse import run_sql, write_table

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


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


STAGE_COLUMNS = ("queue_s", "prefill_s", "decode_s", "network_s", "prefill_gpu_s", "decode_gpu_s")


def test_negative_stages_lists_the_impossible_rows(tmp_path):
    """One row negative in each stage and GPU-time column the check names (a row negative in
    queue_s alone could not show a column left out of the view), and one without e2e time."""
    path = str(tmp_path / "w.duckdb")
    ids = ["ok", *STAGE_COLUMNS, "no_e2e"]
    good = {"queue_s": 0.0, "prefill_s": 0.1, "decode_s": 1.0, "network_s": 0.0,
            "prefill_gpu_s": 0.4, "decode_gpu_s": 4.0}
    stages = pl.DataFrame({"trace": ["t"] * len(ids), "scenario": ["baseline"] * len(ids),
                           "request_id": ids,
                           **{c: [-1e-9 if i == c else v for i in ids] for c, v in good.items()},
                           "e2e_s": [None if i == "no_e2e" else 1.1 for i in ids]})
    with duckdb.connect(path) as conn:
        write_table(conn, "request_stages", stages)
        run_sql(conn, "negative_stages")
        bad = conn.sql("SELECT request_id FROM negative_stages ORDER BY 1").fetchall()
    assert bad == sorted((i,) for i in ids if i != "ok")
    result = no_negative_stage(duckdb=DuckDBResource(database=path))
    assert not result.passed and result.metadata["bad_rows"].value == len(ids) - 1


def test_a_wide_tables_preview_says_it_shows_part_of_its_columns():
    """The metadata preview keeps the first 12 columns; what_if has 25, and its preview hid the
    p95 and fleet columns without a word."""
    with duckdb.connect() as conn:
        conn.execute("CREATE TABLE wide AS SELECT " + ", ".join(f"{i} AS c{i}" for i in range(20)))
        conn.execute("CREATE TABLE narrow AS SELECT 1 AS a, 2 AS b")
        wide = table_metadata(conn, "wide")["preview"].value
        narrow = table_metadata(conn, "narrow")["preview"].value
    assert f"The first {PREVIEW_COLUMNS} of 20 columns; the table `wide` has them all." in wide
    assert "c11" in wide and "c12" not in wide and "columns;" not in narrow


def test_a_previews_long_text_is_cut_and_says_so():
    """A rejected AIBrix record's raw text (its whole prompt and answer) filled the UI's
    rejected_requests preview with kilobytes a cell."""
    with duckdb.connect() as conn:
        conn.execute("CREATE TABLE rejected AS SELECT 1 AS line, repeat('x', 5000) AS raw, 'why' AS reason")
        preview = table_metadata(conn, "rejected")["preview"].value
    assert f"| 1 | {'x' * PREVIEW_CELL_CHARS}… | why |" in preview
    assert f"Text over {PREVIEW_CELL_CHARS} characters is cut (…); the table `rejected` has it whole." \
        in preview and len(preview) < 500


# The views of one row per deployment, file, trace, scenario or replica, which an analyst reads
# whole ("FROM gpu_conservation"), with the columns they come sorted by: unsorted, DuckDB's
# parallel hash joins hand them over in another order from one query to the next.
SORTED_VIEWS = {"deployment_prices": ("deployment",), "ingest_balance": ("file",),
                "gpu_conservation": ("trace", "scenario"),
                "scenario_gpu_conservation": ("trace", "scenario"),
                "replica_gpu_balance": ("trace", "scenario", "replica"), "replay_coverage": ("trace",),
                "scenario_coverage": ("scenario",)}


@pytest.mark.parametrize("view", sorted(SORTED_VIEWS))
def test_a_view_of_a_few_rows_comes_sorted_by_its_key(view, demo_conn):
    rows = demo_conn.sql(f"SELECT {', '.join(SORTED_VIEWS[view])} FROM {view}").fetchall()
    assert len(rows) > 1 and rows == sorted(rows)
    views = README.split("\nViews used by the steps", 1)[1].split("\n\n", 1)[0]
    assert f"`{view}`" in views and "come sorted by their keys" in views
