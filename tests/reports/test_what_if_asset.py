"""The whole graph on another deployment: what-if scenarios that cannot apply to it are skipped
and marked, the rest replay with the baseline's router, and the run succeeds."""

from __future__ import annotations

import dagster as dg
import duckdb

from pipelines.definitions import build_defs
from tests.operations.conftest import head_of_sample


def test_demo_graph_materializes_on_seed_example(tmp_path, monkeypatch):
    head_of_sample(tmp_path / "traces", "AzureLLMInferenceTrace_conv.csv", 300)
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(tmp_path / "traces"))
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
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
    assert checks and all(c.passed for c in checks)
    metadata = fleets_event.asset_materialization.metadata
    assert metadata["router"].value == "round_robin"
    assert set(metadata["skipped_scenarios"].value) == {"fp8", "tp2-fp8"}

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        marked = conn.sql("SELECT scenario, shape, requests, skipped FROM what_if"
                          " WHERE skipped IS NOT NULL ORDER BY scenario").pl()
        replayed = conn.sql("SELECT DISTINCT scenario FROM scenario_stages ORDER BY 1").pl()
        counts = conn.sql("SELECT scenario, count(*) AS n FROM scenario_stages GROUP BY 1").pl()
    assert marked["scenario"].to_list() == ["fp8", "tp2-fp8"]
    assert marked["shape"].to_list() == ["all", "all"] and marked["requests"].is_null().all()
    assert all("no fp8 tensor throughput" in reason for reason in marked["skipped"])
    assert "fp8" not in replayed["scenario"].to_list() and replayed.height == 7
    assert (counts["n"] == 300).all()
    report = (tmp_path / "reports" / "report.md").read_text()
    assert "cannot apply to this deployment" in report and "`tp2-fp8`: scenario 'tp2-fp8'" in report
