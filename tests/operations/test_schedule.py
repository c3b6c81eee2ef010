"""The nightly schedule, evaluated with Dagster's test helpers."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from pipelines import settings
from pipelines.definitions import build_defs
from pipelines.defs.schedules import nightly_schedule


def _evaluate(schedule, instance, when):
    with dg.build_schedule_context(instance=instance, scheduled_execution_time=when) as context:
        return schedule.evaluate_tick(context)


def test_default_cron_and_targets(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEETSPEND_NIGHTLY_CRON", raising=False)
    defs = build_defs(tmp_path / "wh" / "fleetspend.duckdb")
    schedule = defs.resolve_schedule_def("nightly")
    assert schedule.cron_schedule == "0 2 * * *" and schedule.execution_timezone == "UTC"
    job = defs.resolve_job_def("nightly")
    selected = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    # The day's data, every report downstream of it, and the reference data it is priced with.
    assert {"requests", "rejected_requests", "trace_files", "request_stages", "request_costs",
            "shape_spend", "fleet_summary", "report", "roofline", "prices"} <= selected
    # Calibration (hundreds of full replays per observed trace) is on demand, not nightly or per file.
    inbox = {k.to_user_string() for k in defs.resolve_job_def("ingest_new_traces").asset_layer.executable_asset_keys}
    assert "request_stages" in inbox
    assert not {"calibration", "calibration_errors"} & (selected | inbox)



def test_the_schedule_and_the_sensor_say_what_they_do_in_the_ui(tmp_path):
    """The UI's Automation page lists each with its description: both had none."""
    defs = build_defs(tmp_path / "wh" / "fleetspend.duckdb")
    assert "not the calibration" in defs.resolve_schedule_def("nightly").description
    assert "not the calibration" in defs.resolve_sensor_def("trace_inbox_sensor").description


def test_cron_comes_from_the_environment_and_bad_ones_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETSPEND_NIGHTLY_CRON", "30 5 * * 1-5")
    assert settings.nightly_cron() == "30 5 * * 1-5"
    assert build_defs(tmp_path / "w.duckdb").resolve_schedule_def("nightly").cron_schedule == "30 5 * * 1-5"
    with pytest.raises(ValueError, match=r"FLEETSPEND_NIGHTLY_CRON='every night': 2 fields, not 5; "
                                         r"expected a 5-field cron"):
        nightly_schedule("every night", tmp_path / "w.duckdb")


@pytest.mark.parametrize(("cron", "reason"), [
    # Five fields, but no such day: Dagster's own message says only "consisting of 5 fields".
    ("0 2 31 2 *", "day '31' never occurs in month '2', so it would never run"),
    ("0 2 30 2 *", "day '30' never occurs in month '2', so it would never run"),
    # Dagster accepts this one, and its daemon then finds no tick to run.
    ("0 2 31 4 *", "day '31' never occurs in month '4', so it would never run"),
    ("0 25 * * *", "its hour field '25' is not acceptable, out of range (0-23)"),
    ("0 2 * 13 *", "its month field '13' is not acceptable, out of range (1-12 or JAN-DEC)"),
    ("0 2 * * * *", "6 fields, not 5"),
    ("@reboot", "'@reboot' is not one of the aliases this schedule takes"),
    # Dagster takes these too, but the README documents four aliases: only those are accepted.
    ("@yearly", "'@yearly' is not one of the aliases this schedule takes"),
    ("@annually", "'@annually' is not one of the aliases this schedule takes"),
    ("@midnight", "'@midnight' is not one of the aliases this schedule takes"),
])
def test_a_bad_cron_says_what_is_wrong_with_it(tmp_path, cron, reason):
    with pytest.raises(ValueError) as exc:
        nightly_schedule(cron, tmp_path / "w.duckdb")
    assert str(exc.value).startswith(f"FLEETSPEND_NIGHTLY_CRON={cron!r}: {reason}; expected a 5-field cron")
    assert str(exc.value).endswith("@hourly, @daily, @weekly, @monthly")  # the aliases are named too


@pytest.mark.parametrize(("cron", "first_tick"), [
    ("@daily", dt.datetime(2026, 12, 1, 0, 0)),
    ("@hourly", dt.datetime(2026, 11, 30, 3, 0)),
    ("@weekly", dt.datetime(2026, 12, 6, 0, 0)),  # Sunday
    ("@monthly", dt.datetime(2026, 12, 1, 0, 0)),
    ("0 2 29 2 *", dt.datetime(2028, 2, 29, 2, 0)),  # a leap day occurs
])
def test_dagsters_cron_aliases_and_leap_days_are_accepted(tmp_path, cron, first_tick):
    """The README's aliases @hourly / @daily / @weekly / @monthly are taken, in UTC like any cron
    string."""
    schedule = nightly_schedule(cron, tmp_path / "w.duckdb")
    assert schedule.cron_schedule == cron and schedule.execution_timezone == "UTC"
    from dagster._utils.schedules import cron_string_iterator

    after = dt.datetime(2026, 11, 30, 2, 30, tzinfo=dt.timezone.utc).timestamp()
    tick = next(cron_string_iterator(after, schedule.cron_schedule, schedule.execution_timezone))
    assert tick == first_tick.replace(tzinfo=dt.timezone.utc)


def test_tick_requests_one_run_per_night(tmp_path):
    schedule = nightly_schedule("0 2 * * *", tmp_path / "wh" / "fleetspend.duckdb")
    night = dt.datetime(2026, 11, 30, 2, 0, tzinfo=dt.timezone.utc)
    with dg.DagsterInstance.ephemeral() as instance:
        result = _evaluate(schedule, instance, night)
    [request] = result.run_requests
    assert request.run_key == night.isoformat() and request.tags["fleetspend/trigger"] == "nightly"


def test_tick_with_bad_configuration_is_skipped_with_the_message(tmp_path):
    (tmp_path / "plain").write_text("")
    schedule = nightly_schedule("0 2 * * *", tmp_path / "plain" / "fleetspend.duckdb")
    with dg.DagsterInstance.ephemeral() as instance:
        result = _evaluate(schedule, instance, dt.datetime(2026, 11, 30, 2, tzinfo=dt.timezone.utc))
    assert not result.run_requests
    assert "FLEETSPEND_WAREHOUSE=" in result.skip_message and "is not a folder" in result.skip_message


def test_nightly_job_runs_and_publishes(tmp_path, monkeypatch):
    from tests.operations.conftest import head_of_sample

    head_of_sample(tmp_path / "traces", "AzureLLMInferenceTrace_conv.csv", 150)
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(tmp_path / "traces"))
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    with dg.DagsterInstance.ephemeral() as instance:
        result = build_defs(warehouse).resolve_job_def("nightly").execute_in_process(instance=instance)
        text = "\n".join(entry.user_message for entry in instance.all_logs(result.run_id))
    assert result.success and warehouse.is_file()
    # Long work shows progress in the run log: rows ingested, requests replayed, the publish.
    assert "150 rows read, 150 accepted, 0 rejected" in text
    assert "replayed 150 requests" in text
    assert f"published {warehouse}" in text


def test_inbox_job_runs_on_a_fresh_warehouse(tmp_path, monkeypatch):
    """The inbox sensor's job is the first run of a UI set up with the sensor on: it lacked the
    reference group, and its replay check failed on a fresh warehouse ('Table with name roofline
    does not exist') until a nightly run had built the catalog tables."""
    from tests.operations.conftest import head_of_sample

    head_of_sample(tmp_path / "traces", "AzureLLMInferenceTrace_conv.csv", 150)
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(tmp_path / "traces"))
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    with dg.DagsterInstance.ephemeral() as instance:
        job = build_defs(warehouse).resolve_job_def("ingest_new_traces")
        result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success and warehouse.is_file()


def test_tick_with_an_unknown_deployment_setting_is_skipped_naming_it(tmp_path, monkeypatch):
    """The schedule's runs replay on FLEETSPEND_DEPLOYMENT: a typo there skips the tick with the
    setting named, as the preflight names it for a cron line."""
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "seed-exampel")
    schedule = nightly_schedule("0 2 * * *", tmp_path / "wh" / "fleetspend.duckdb")
    with dg.DagsterInstance.ephemeral() as instance:
        result = _evaluate(schedule, instance, dt.datetime(2026, 11, 30, 2, tzinfo=dt.timezone.utc))
    assert not result.run_requests
    assert "FLEETSPEND_DEPLOYMENT='seed-exampel': no such deployment" in result.skip_message
