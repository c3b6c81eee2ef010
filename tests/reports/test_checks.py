"""The report asset checks pass on consistent tables and fail on the faults they guard against
(a scenario with missing or extra rows: tests/sql/test_check_views.py)."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.reports.checks import (
    every_request_has_a_shape,
    every_scenario_replays_every_request,
    scenario_gpu_seconds_conserved,
)
from pipelines.reports.scenarios import FLEET_SCHEMA, Scenario, replay_scenarios
from pipelines.roofline import load_catalog
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


def _scenario_fleets(path, idle_gpu_s: list[float], skipped: list) -> None:
    """Scenario x on trace t: 2 requests of 3 GPU-s each, the last finishing at 5 s, on a fleet of
    2 replicas x 2 GPUs (20 GPU-s) busy 6 GPU-s: conserved with 14 idle GPU-s. Scenario y skipped
    (its busy seconds and step null, as replay_scenarios writes them), or replayed on paper."""
    replayed = [s is None for s in skipped]
    with duckdb.connect(str(path)) as conn:
        write_table(conn, "scenario_stages", pl.DataFrame({
            "trace": ["t"] * 2, "scenario": ["x"] * 2, "request_id": ["1", "2"],
            "gpu_s": [3.0, 3.0], "finished_s": [2.0, 5.0]}))
        write_table(conn, "scenario_fleets", pl.DataFrame({
            "trace": ["t", "t"], "scenario": ["x", "y"], "replicas": [2, 2],
            "gpus_per_replica": [2, None], "idle_gpu_s": idle_gpu_s,
            "busy_gpu_s": [6.0 if r else None for r in replayed],
            "decode_step_s_batch1_ctx1k": [0.02 if r else None for r in replayed], "skipped": skipped},
            schema_overrides={"skipped": pl.String, "idle_gpu_s": pl.Float64, "busy_gpu_s": pl.Float64,
                              "decode_step_s_batch1_ctx1k": pl.Float64}))


def test_a_what_if_fleets_gpu_seconds_are_conserved_or_the_check_names_it(tmp_path):
    """The baseline's conservation check never looked at the what-if replays, whose idle
    GPU-seconds make their fleet dollars: a scenario fleet is balanced the same way."""
    path = tmp_path / "s.duckdb"
    _scenario_fleets(path, [14.0, None], [None, "tp 3 does not split the model"])
    resource = DuckDBResource(database=str(path))
    assert scenario_gpu_seconds_conserved(duckdb=resource).description is None
    _scenario_fleets(path, [10.0, None], [None, "tp 3 does not split the model"])
    result = scenario_gpu_seconds_conserved(duckdb=resource)
    assert not result.passed
    assert result.description == ("t (x): attributed + idle = 16.0 GPU-s, but the fleet had 20.0"
                                  " GPU-s (relative error -0.2, tolerance 1e-09)")


def test_a_what_if_fleet_without_stages_fails_and_all_skipped_passes(tmp_path):
    path = tmp_path / "s.duckdb"
    _scenario_fleets(path, [14.0, 1.0], [None, None])  # y replayed on paper, no stages
    result = scenario_gpu_seconds_conserved(duckdb=DuckDBResource(database=str(path)))
    assert not result.passed and result.description.startswith("t (y): its GPU-seconds cannot be balanced")
    with duckdb.connect(str(path)) as conn:
        conn.execute("DELETE FROM scenario_stages")
        conn.execute("UPDATE scenario_fleets SET skipped = 'no KV room'")
    assert scenario_gpu_seconds_conserved(duckdb=DuckDBResource(database=str(path))).passed


def _sparse_fleet(path, span_s: float, busy_gpu_s: float, attributed_gpu_s: float) -> None:
    """Scenario x on trace t: 2 requests sharing `attributed_gpu_s`, the last finishing at
    `span_s`, on 2 x 2 GPUs busy `busy_gpu_s` and idle the rest, with a 20 ms batch-1 decode step."""
    with duckdb.connect(str(path)) as conn:
        write_table(conn, "scenario_stages", pl.DataFrame({
            "trace": ["t"] * 2, "scenario": ["x"] * 2, "request_id": ["1", "2"],
            "gpu_s": [attributed_gpu_s / 2] * 2, "finished_s": [2.0, span_s]}))
        write_table(conn, "scenario_fleets", pl.DataFrame({
            "trace": ["t"], "scenario": ["x"], "replicas": [2], "gpus_per_replica": [2],
            "idle_gpu_s": [4 * span_s - busy_gpu_s], "busy_gpu_s": [busy_gpu_s],
            "decode_step_s_batch1_ctx1k": [0.02], "skipped": [None]},
            schema_overrides={"skipped": pl.String}))


def test_a_what_if_fleets_attribution_error_on_a_mostly_idle_day_fails(tmp_path):
    """A what-if fleet of 2 x 2 GPUs for a day (345,600 GPU-s), busy 6 of them: attributed
    seconds a hundred-thousandth over its busy ones are 2e-10 of its capacity, which passed; the
    fleet's busy seconds name them, beyond the day's clock resolution (span x 2^-52 per batch-1
    decode step, as replica_gpu_balance's)."""
    path = tmp_path / "day.duckdb"
    _sparse_fleet(path, 86_400.0, 6.0, 6.00006)
    result = scenario_gpu_seconds_conserved(duckdb=DuckDBResource(database=str(path)))
    assert not result.passed
    assert result.metadata["worst_relative_error"].value < 1e-9
    assert result.description == ("t (x): attributed = 6.00006 GPU-s, but the fleet was busy 6 GPU-s"
                                  " (relative error 1e-05, tolerance 2.96e-09)")
    with duckdb.connect(str(path)) as conn:
        conn.execute("UPDATE scenario_stages SET gpu_s = 3")
    assert scenario_gpu_seconds_conserved(duckdb=DuckDBResource(database=str(path))).passed


def test_a_what_if_fleet_off_by_a_ten_millionth_of_its_busy_month_fails(tmp_path):
    """A month of 2 x 2 GPUs busy a minute: attributed seconds 1e-7 over the busy ones passed
    while the what-if balance assumed a 0.1 ms shortest step (a bound of 5.8e-6 over a month); the
    fleet's own batch-1 decode step, 20 ms, bounds its clock to 2.9e-8, as the baseline's."""
    path = tmp_path / "month.duckdb"
    month_s = 30 * 86_400.0
    _sparse_fleet(path, month_s, 60.0, 60.0 * (1 + 1e-7))
    result = scenario_gpu_seconds_conserved(duckdb=DuckDBResource(database=str(path)))
    assert not result.passed
    assert result.metadata["worst_relative_error"].value < 1e-9
    assert result.description.startswith("t (x): attributed = 60.000006 GPU-s, but the fleet was busy 60 GPU-s")
    assert result.description.endswith("tolerance 3.08e-08)")
    _sparse_fleet(path, month_s, 60.0, 60.0 * (1 + 1e-8))   # within the month's clock resolution
    assert scenario_gpu_seconds_conserved(duckdb=DuckDBResource(database=str(path))).passed


def test_a_sound_what_if_replay_over_a_year_passes_though_its_clock_rounds_off_more_than_a_billionth(tmp_path):
    """The what-if twin of the baseline's year-long test (tests/replay/test_replay_checks.py):
    three one-token requests over a year, replayed on two scenarios, attribute ~1e-7 other
    GPU-seconds than their fleet was busy, the clock's rounding of a step near 3e7 s; the
    scenario deployment's own decode step bounds it (span x 2^-52 / the step, ~1e-6)."""
    catalog = load_catalog()
    requests = pl.DataFrame({"trace": ["y"] * 3, "request_id": ["a", "b", "c"],
                             "arrival_s": [1.0, 1.6e7, 3.15e7], "prompt_tokens": [20, 30, 40],
                             "output_tokens": [1, 1, 1]})
    runs = list(replay_scenarios(requests, catalog, {"y": catalog.deployment("seed-example")},
                                 [Scenario("r2", "d", replicas=2, source="s"),
                                  Scenario("fp8", "d", weights="fp8", source="s")]))
    path = tmp_path / "year.duckdb"
    with duckdb.connect(str(path)) as conn:
        write_table(conn, "scenario_stages", pl.concat(b for run in runs for b in run.stage_batches))
        write_table(conn, "scenario_fleets", pl.DataFrame([run.fleet for run in runs], schema=FLEET_SCHEMA))
    result = scenario_gpu_seconds_conserved(duckdb=DuckDBResource(database=str(path)))
    assert result.passed, result.description
    assert result.metadata["worst_busy_relative_error"].value > 1e-8
