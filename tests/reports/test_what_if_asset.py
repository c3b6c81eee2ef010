"""The whole graph on another deployment: what-if scenarios that cannot apply to it are skipped
and marked, the rest replay with the baseline's router, and the run succeeds."""

from __future__ import annotations

import shutil

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from pipelines.definitions import build_defs
from pipelines.defs.reports.what_if import scenario_replays
from tests.operations.conftest import ROOT, head_of_sample


def test_demo_graph_materializes_on_seed_example(tmp_path, monkeypatch):
    head_of_sample(tmp_path / "traces", "AzureLLMInferenceTrace_conv.csv", 300)
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(tmp_path / "traces"))
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
    # the shipped scenarios apply to seed-example (its A100 serves fp8 weight-only) but
    # lambda-on-demand (prices.csv has no Lambda A100); tp 3 does not split Llama-2-7B's 32 heads
    shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    with open(tmp_path / "reference" / "scenarios.csv", "a") as scenarios:
        scenarios.write('tp3,"tensor-parallel 3",,3,,,,,,,x\n')
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(tmp_path / "reference"))
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    config = {"ops": {"replayed_fleet": {"config": {"deployment": "seed-example",
                                                    "router": "round_robin"}}}}
    with dg.DagsterInstance.ephemeral() as instance:
        result = build_defs(warehouse).resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, run_config=config)
        fleets_event = instance.get_latest_materialization_event(dg.AssetKey("scenario_fleets"))
    assert result.success
    checks = [e.event_specific_data for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    # 12 of the 300 conversations are longer than Llama-2-7B's 4,096-token context: set aside,
    # which the warning check says; every other check passes
    assert checks and all(c.passed for c in checks if c.check_name != "every_request_served")
    [warning] = [c for c in checks if c.check_name == "every_request_served"]
    assert not warning.passed and warning.description.startswith("12 request(s) set aside")
    metadata = fleets_event.asset_materialization.metadata
    assert metadata["router"].value == "round_robin"
    assert set(metadata["skipped_scenarios"].value) == {"lambda-on-demand", "tp3"}

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        marked = conn.sql("SELECT scenario, shape, requests, skipped FROM what_if"
                          " WHERE skipped IS NOT NULL ORDER BY scenario").pl()
        replayed = conn.sql("SELECT DISTINCT scenario FROM scenario_stages ORDER BY 1").pl()
        counts = conn.sql("SELECT scenario, count(*) AS n FROM scenario_stages GROUP BY 1").pl()
    assert marked["scenario"].to_list() == ["lambda-on-demand", "tp3"]
    assert marked["shape"].to_list() == ["all"] * 2 and marked["requests"].is_null().all()
    assert "lists no price for a100-80gb-sxm from lambda on-demand" in marked["skipped"][0]
    assert "tp=3 cannot split llama-2-7b" in marked["skipped"][1]
    assert "tp3" not in replayed["scenario"].to_list() and replayed.height == 9
    assert (counts["n"] == 300 - 12).all()
    report = (tmp_path / "reports" / "report.md").read_text()
    assert "cannot apply to a deployment the traces were replayed on" in report and "`tp3`: scenario 'tp3'" in report


def test_the_what_if_alone_on_a_warehouse_without_the_replay_says_what_to_run_first(tmp_path):
    """Materialized alone (the UI allows it) on a warehouse an older release built, without
    unserved_requests, the what-if replays stopped with DuckDB's catalog error and its stack."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE fleet_timeline (scenario VARCHAR, router VARCHAR)")
        conn.execute("CREATE TABLE requests (trace VARCHAR, request_id VARCHAR)")
    result = dg.materialize([scenario_replays], raise_on_error=False,
                            resources={"duckdb": DuckDBResource(database=str(path))})
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert "unserved_requests does not exist" in message
    assert "materialize request_stages (the replay, with fleet_timeline and unserved_requests) first" in message
