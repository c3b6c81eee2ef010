"""A fleet of several deployments: each log replayed on the deployment its sidecar names, the
others on the run's; the what-if levers applied to each trace's own deployment, and the report
and summary naming which trace ran on which, at which price."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import duckdb
import polars as pl
import pytest

from pipelines import summary
from pipelines.definitions import build_defs
from tests.operations.conftest import ROOT, head_of_sample

CODE, CONV = "AzureLLMInferenceTrace_code", "AzureLLMInferenceTrace_conv"


def test_each_log_replays_on_the_deployment_its_sidecar_names(tmp_path, monkeypatch, capsys):
    traces = tmp_path / "traces"
    head_of_sample(traces, f"{CONV}.csv", 300)
    head_of_sample(traces, f"{CODE}.csv", 200)
    (traces / f"{CODE}.csv.fleetspend.json").write_text(json.dumps({"deployment": "seed-example"}))
    # seed-example with another step limit than the demo fleet's: the `all` row has no one limit
    shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    deployments = tmp_path / "reference" / "deployments.csv"
    deployments.write_text(deployments.read_text().replace(
        "seed-example,llama-2-7b,a100-80gb-sxm,current,1,bf16,bf16,1,256,",
        "seed-example,llama-2-7b,a100-80gb-sxm,current,1,bf16,bf16,1,128,"))
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(tmp_path / "reference"))
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(traces))
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT", raising=False)
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    with dg.DagsterInstance.ephemeral() as instance:
        result = build_defs(warehouse).resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance)
        replay_event = instance.get_latest_materialization_event(dg.AssetKey("request_stages"))
    assert result.success
    failed = [e.event_specific_data for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION" and not e.event_specific_data.passed]
    # conversations and code longer than Llama-2-7B's 4,096 tokens are set aside, and only code's
    assert [c.check_name for c in failed] == ["every_request_served"]
    metadata = replay_event.asset_materialization.metadata
    assert metadata["trace_deployments"].value == {CONV: "azure-2023-70b-h100", CODE: "seed-example"}

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        def rows(sql: str) -> list[tuple]:
            return conn.sql(sql).fetchall()
        assert rows("SELECT DISTINCT trace, deployment FROM request_stages ORDER BY trace") == [
            (CODE, "seed-example"), (CONV, "azure-2023-70b-h100")]
        assert rows("SELECT DISTINCT trace, deployment FROM unserved_requests") == [(CODE, "seed-example")]
        assert all("llama-2-7b's context of 4,096" in reason
                   for (reason,) in rows("SELECT reason FROM unserved_requests"))
        # each trace's fleet is its own deployment's: 4 GPUs per H100 replica x 3, one A100
        gpus = dict(rows("SELECT trace, sum(idle_gpu_s + busy_gpu_s) / max(bin_start_s + bin_s)"
                         " FROM fleet_timeline GROUP BY trace"))
        assert round(gpus[CONV]) == 12 and round(gpus[CODE]) == 1
        # dollars at each deployment's own price
        assert rows("SELECT DISTINCT trace, usd_per_gpu_hour FROM request_costs ORDER BY trace") == [
            (CODE, 2.70), (CONV, 6.155)]
        assert rows("SELECT trace, max_seqs FROM fleet_summary ORDER BY trace") == [
            (CODE, 128), (CONV, 256), ("all", None)]
        fleets = conn.sql("SELECT trace, scenario, baseline_deployment, deployment, change, skipped"
                          " FROM scenario_fleets ORDER BY scenario, trace").pl()
        what_if = conn.sql("SELECT scenario, deployment, change, skipped, requests FROM what_if"
                           " WHERE shape = 'all' ORDER BY scenario").pl()
        [(replayed,)] = rows("SELECT count(*) FROM request_stages")
        # sql/examples/deployment_bill.sql: a block per deployment, adding up to the fleet's bill
        bill = conn.sql((ROOT / "sql" / "examples" / "deployment_bill.sql").read_text()).pl()
        [(spend,)] = rows("SELECT spend_usd FROM fleet_summary WHERE trace = 'all'")
        deployments = conn.sql("FROM deployment_summary").pl()
        fleet = conn.sql("FROM fleet_summary WHERE trace = 'all'").pl().row(0, named=True)

    # deployment_summary: a row per deployment, its trace's, adding up to fleet_summary's `all`
    assert deployments.select("deployment", "traces", "trace_names", "usd_per_gpu_hour").rows() == [
        ("azure-2023-70b-h100", 1, [CONV], 6.155), ("seed-example", 1, [CODE], 2.70)]
    for column in ("requests", "output_tokens", "gpu_hours", "spend_usd", "attributed_usd", "idle_usd"):
        assert deployments[column].sum() == pytest.approx(fleet[column]), column
    assert (deployments["idle_share"] * deployments["gpu_hours"]).sum() == pytest.approx(
        fleet["idle_share"] * fleet["gpu_hours"])

    totals = bill.filter(pl.col("trace") == "all")
    assert totals["deployment"].to_list() == ["azure-2023-70b-h100", "seed-example"]
    assert bill.filter(pl.col("trace") != "all").select("deployment", "trace").rows() == [
        ("azure-2023-70b-h100", CONV), ("seed-example", CODE)]
    assert totals["usd"].sum() == pytest.approx(spend, abs=0.01)

    replicas = fleets.filter(pl.col("scenario") == "replicas-4")
    assert replicas.rows() == [
        (CODE, "replicas-4", "seed-example", "seed-example+replicas-4",
         "replicas 1 → 4; 1 → 4 GPUs per trace", None),
        (CONV, "replicas-4", "azure-2023-70b-h100", "azure-2023-70b-h100+replicas-4",
         "replicas 3 → 4; 12 → 16 GPUs per trace", None)]
    row = what_if.filter(pl.col("scenario") == "replicas-4").row(0, named=True)
    assert row["deployment"] == "azure-2023-70b-h100+replicas-4, seed-example+replicas-4"
    assert row["change"] == ("azure-2023-70b-h100: replicas 3 → 4; 12 → 16 GPUs per trace;"
                             " seed-example: replicas 1 → 4; 1 → 4 GPUs per trace")
    # every request of both traces is in the scenario's figures
    assert row["requests"] == replayed
    # prices.csv has no Lambda A100: the scenario applies to the H100 fleet only, and is skipped
    # on both traces, its figures not a part of the fleet against the whole
    lam = what_if.filter(pl.col("scenario") == "lambda-on-demand").row(0, named=True)
    assert lam["requests"] is None and lam["skipped"].startswith(
        "scenarios file") and "does not apply to deployment 'seed-example'" in lam["skipped"]
    assert lam["skipped"].endswith("skipped on every trace, so that the scenario's figures are"
                                   " the whole fleet's")
    assert fleets.filter(pl.col("scenario") == "lambda-on-demand")["skipped"].is_not_null().all()

    report = (tmp_path / "reports" / "report.md").read_text()
    assert ("Deployments replayed, each trace on its own (the one its log's sidecar names, else the"
            " run's; the `roofline` table holds their coefficients): `azure-2023-70b-h100` (trace"
            f" {CONV}) at $6.155 per GPU-hour, coreweave on-demand; `seed-example` (trace {CODE}) at"
            " $2.70 per GPU-hour, coreweave on-demand (`deployment_prices`).") in report
    assert "mean batch" in report and "(max_seqs differs by deployment)" in report
    # a line per deployment, first in the Fleet section, then the traces' and the `all` line
    fleet_section = report.split("\n## Fleet\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split(": ", 1)[0] for line in fleet_section] == [
        f"- **deployment `azure-2023-70b-h100`** (trace {CONV})",
        f"- **deployment `seed-example`** (trace {CODE})", f"- **{CODE}**", f"- **{CONV}**", "- **all**"]
    code = deployments.filter(pl.col("deployment") == "seed-example").row(0, named=True)
    assert (code["requests"], round(code["gpu_hours"], 4), round(code["spend_usd"], 3),
            round(code["idle_usd"], 3)) == (170, 0.0576, 0.156, 0.133)
    assert fleet_section[1] == (
        f"- **deployment `seed-example`** (trace {CODE}): 170 requests; 0.0576 GPU-hours = $0.156"
        " (idle 85.2% = $0.133); $43.15 per 1M output tokens (busy + idle)")
    # the summary prints them as the report does, right under the deployments sentence
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    capsys.readouterr()
    assert summary.main() == 0
    printed = capsys.readouterr().out.split("== Fleet summary ==\n", 1)[1].splitlines()
    assert printed[0].startswith("Deployments replayed, each trace on its own")
    assert printed[1:6] == fleet_section
    # a scenario skipped for one deployment of the fleet: not "this deployment", of which there are two
    assert ("Not replayed, as each cannot apply to a deployment the traces were replayed on"
            " (`what_if.skipped`):" in report)

