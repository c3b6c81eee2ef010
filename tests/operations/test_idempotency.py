"""Materializing twice gives identical tables; a rerun after fixing a bad input replaces the
rejects instead of adding to them.

"Identical" is exact, floating-point columns included: the warehouse runs DuckDB on one thread
(WAREHOUSE_CONFIG in pipelines/warehouse.py), so every sum of doubles adds in the same order on every run."""

from __future__ import annotations

import dagster as dg
from polars.testing import assert_frame_equal

from pipelines.definitions import build_defs
from pipelines.warehouse import read_table
from tests.operations.conftest import head_of_sample

import duckdb


def _materialize(warehouse) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        result = build_defs(warehouse).resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance)
    assert result.success


def _tables(warehouse) -> dict:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        names = [n for (n,) in conn.execute(
            "SELECT table_name FROM information_schema.tables ORDER BY table_name").fetchall()]
        return {name: read_table(conn, name) for name in names}


def test_twice_gives_identical_tables_and_fixed_input_replaces_rejects(tmp_path, monkeypatch):
    traces = tmp_path / "traces"
    trace = head_of_sample(traces, "AzureLLMInferenceTrace_code.csv", 200)
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(traces))
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"

    _materialize(warehouse)
    first = _tables(warehouse)
    _materialize(warehouse)
    second = _tables(warehouse)
    assert first.keys() == second.keys() and {"requests", "request_costs", "shape_spend"} <= first.keys()
    for name in first:
        assert_frame_equal(first[name], second[name], check_exact=True)

    good = trace.read_text().splitlines(keepends=True)
    bad_line = good[5].replace(",", ",not-a-number,", 1).rsplit(",", 1)[0] + "\n"
    trace.write_text("".join(good[:5] + [bad_line] + good[6:]))
    _materialize(warehouse)
    broken = _tables(warehouse)
    assert broken["rejected_requests"].height == 1 and broken["requests"].height == 199

    trace.write_text("".join(good))
    _materialize(warehouse)
    fixed = _tables(warehouse)
    assert fixed["rejected_requests"].height == 0
    # the file was ingested again (its rejects are gone): only the time it was may be new; a
    # wall-clock time, so not necessarily later by the clock's resolution
    first_at, fixed_at = first["trace_files"]["ingested_at"][0], fixed["trace_files"]["ingested_at"][0]
    assert first_at is not None and fixed_at is not None and fixed_at >= first_at
    for tables in (first, fixed):
        tables["trace_files"] = tables["trace_files"].drop("ingested_at")
    for name in first:
        assert_frame_equal(first[name], fixed[name], check_exact=True)
