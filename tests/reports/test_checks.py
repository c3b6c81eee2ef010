"""The report asset checks pass on consistent tables and fail on the faults they guard against
(a scenario with missing or extra rows: tests/sql/test_check_views.py)."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.reports.checks import every_request_has_a_shape, every_scenario_replays_every_request
from pipelines.warehouse import write_table


@pytest.fixture()
def warehouse(tmp_path):
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        write_table(conn, "request_costs", pl.DataFrame({"scenario": ["baseline"] * 3}))
        write_table(conn, "shape_spend", pl.DataFrame({"shape": ["a", "b"], "requests": [2, 1]}))
        write_table(conn, "request_stages", pl.DataFrame({
            "trace": ["t"] * 2, "scenario": ["baseline"] * 2, "request_id": ["1", "2"]}))
        write_table(conn, "scenario_stages", pl.DataFrame({
            "trace": ["t"] * 4, "scenario": ["x", "x", "y", "y"], "request_id": ["1", "2", "1", "2"]}))
    return path


def _passed(check, path) -> bool:
    return check(duckdb=DuckDBResource(database=str(path))).passed


def test_checks_pass_on_consistent_tables(warehouse):
    assert _passed(every_request_has_a_shape, warehouse)
    assert _passed(every_scenario_replays_every_request, warehouse)


def test_a_gap_in_the_buckets_fails(warehouse):
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("DELETE FROM shape_spend WHERE shape = 'b'")
    assert not _passed(every_request_has_a_shape, warehouse)


def test_a_failure_says_why_in_one_line(warehouse):
    """A failed blocking check stops the run, which publishes nothing: its description (printed in
    the run log) is what says which counts disagree."""
    resource = DuckDBResource(database=str(warehouse))
    assert every_request_has_a_shape(duckdb=resource).description is None
    assert every_scenario_replays_every_request(duckdb=resource).description is None
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("DELETE FROM shape_spend WHERE shape = 'b'")
        conn.execute("UPDATE scenario_stages SET request_id = '3' WHERE scenario = 'y' AND request_id = '2'")
    assert every_request_has_a_shape(duckdb=resource).description == (
        "shape_spend counts 2 requests of the baseline's 3: the shape_buckets.csv edges leave a gap"
        " or overlap")
    assert every_scenario_replays_every_request(duckdb=resource).description == (
        "y: 1 baseline request(s) missing, 1 extra")
