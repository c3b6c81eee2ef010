"""Nothing user-given reaches SQL as text: names with quotes and semicolons are either refused as
identifiers or carried as values (Arrow columns, bound parameters), never spliced into SQL."""

from __future__ import annotations

import shutil

import dagster as dg
import duckdb
import polars as pl
import pytest

from pipelines.definitions import build_defs
from pipelines.warehouse import read_table, row_count, run_sql, scalar, write_table
from tests.operations.conftest import ROOT, head_of_sample

HOSTILE = "x'; DROP TABLE requests; --"


@pytest.mark.parametrize("call", [
    lambda conn: write_table(conn, HOSTILE, pl.DataFrame({"a": [1]})),
    lambda conn: read_table(conn, HOSTILE),
    lambda conn: row_count(conn, 'requests"; DROP TABLE requests; --'),
    lambda conn: run_sql(conn, "../requests; DROP"),
])
def test_table_and_step_names_are_checked_identifiers(call):
    with duckdb.connect() as conn:
        write_table(conn, "requests", pl.DataFrame({"a": [1, 2]}))
        with pytest.raises(ValueError, match="expected lower-case letters, digits and underscores"):
            call(conn)
        assert row_count(conn, "requests") == 2


def test_values_are_bound_parameters():
    with duckdb.connect() as conn:
        assert scalar(conn, "SELECT ?::VARCHAR", [HOSTILE]) == HOSTILE


def test_hostile_file_and_deployment_names_are_data(tmp_path, monkeypatch):
    """A trace file and a catalog deployment named like SQL injections go through the whole
    graph and come out as plain values."""
    traces = tmp_path / "traces"
    sample = head_of_sample(tmp_path / "sample", "AzureLLMInferenceTrace_code.csv", 100)
    traces.mkdir()
    shutil.copy(sample, traces / "it's; DROP TABLE requests; --.csv")
    reference = tmp_path / "reference"
    shutil.copytree(ROOT / "data" / "reference", reference)
    deployments = pl.read_csv(reference / "deployments.csv", infer_schema_length=None)
    hostile = deployments.filter(pl.col("deployment") == "azure-2023-70b-h100").with_columns(
        deployment=pl.lit(HOSTILE))
    pl.concat([deployments, hostile]).write_csv(reference / "deployments.csv")
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(traces))
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(reference))
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"

    with dg.DagsterInstance.ephemeral() as instance:
        result = build_defs(warehouse).resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, run_config={"ops": {"replayed_fleet": {"config": {"deployment": HOSTILE}}}})
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert scalar(conn, "SELECT count(*) FROM requests") == 100
        assert scalar(conn, "SELECT DISTINCT deployment FROM request_costs") == HOSTILE
        traces_seen = scalar(conn, "SELECT list(DISTINCT trace) FROM request_stages")
        assert traces_seen == ["it's; DROP TABLE requests; --"]
        assert scalar(conn, "SELECT sum(requests) FROM shape_spend") == 100


def test_hostile_column_mapping_is_data(tmp_path):
    """A generic CSV whose mapped column is named like an injection: read by Polars, stored with
    bound parameters and Arrow; the warehouse's tables are all still there."""
    from pipelines.ingest_store import ensure_tables, replace_file
    from pipelines.formats import read_trace

    column = "in'; drop table requests; --"
    trace = tmp_path / "it's; DROP TABLE trace_files.csv"
    trace.write_text(f"ts,{column},out\n0.0,100,10\n0.5,200,20\n1.0,oops,5\n")
    result = read_trace(trace, format="csv", time_unit="s",
                        columns={"arrival": "ts", "prompt_tokens": column, "output_tokens": "out"})
    assert result.rows.height == 2 and result.rejected.height == 1
    assert result.rejected["raw"][0] == "1.0,oops,5"
    with duckdb.connect() as conn:
        ensure_tables(conn)
        replace_file(conn, result, None)
        assert scalar(conn, "SELECT count(*) FROM requests") == 2
        assert scalar(conn, "SELECT count(*) FROM rejected_requests") == 1
        assert scalar(conn, "SELECT file FROM trace_files") == str(trace)
