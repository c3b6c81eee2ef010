"""Bad configuration: one clear message per problem at the start of the run, before any step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from pipelines import settings
from pipelines.definitions import build_defs
from pipelines.publish import private_dir
from tests.operations.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"

DEPLOYMENT = "azure-2023-70b-h100"


def _reference(tmp_path, **changes) -> str:
    """A copy of data/reference with the default deployment's row changed."""
    folder = tmp_path / "reference"
    shutil.copytree(ROOT / "data" / "reference", folder)
    file = folder / "deployments.csv"
    rows = pl.read_csv(file, infer_schema_length=None)
    rows = rows.with_columns(**{column: pl.when(pl.col("deployment") == DEPLOYMENT)
                                .then(pl.lit(value)).otherwise(pl.col(column).cast(pl.String))
                                for column, value in changes.items()})
    rows.write_csv(file)
    return str(folder)


def _run(warehouse, run_config=None):
    defs = build_defs(warehouse)
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, run_config=run_config or {}, raise_on_error=False)
    started = [e for e in result.all_events if e.event_type_value == "STEP_START"]
    failure = next(e for e in result.all_events if e.event_type_value == "RESOURCE_INIT_FAILURE")
    return result, started, failure.event_specific_data.error.message


@pytest.mark.parametrize("change, expected", [
    ({"gpu": "h100-sxmm"}, "unknown gpu 'h100-sxmm'"),
    ({"model": "llama-9-70b"}, "unknown model 'llama-9-70b'"),
    ({"replicas": "-3"}, "row 'azure-2023-70b-h100': replicas=-3: expected a whole number >= 1"),
    ({"price_plan": "free-forever"}, "plan 'free-forever'"),
])
def test_bad_catalog_fails_before_any_step(tmp_path, monkeypatch, change, expected):
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", _reference(tmp_path, **change))
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    result, started, message = _run(warehouse)
    assert not result.success and started == []
    assert f"'{DEPLOYMENT}'" in message and expected in message
    assert "deployments.csv" in message
    assert not private_dir(warehouse).exists() and not warehouse.exists()


def test_unknown_deployment_in_run_config_is_named_with_the_choices(tmp_path):
    name = "h100'; DROP TABLE requests; --"
    config = {"ops": {"replayed_fleet": {"config": {"deployment": name}}}}
    result, started, message = _run(tmp_path / "wh" / "fleetspend.duckdb", config)
    assert started == []
    assert f"replayed_fleet.deployment={name!r}: no such deployment" in message
    assert "deployments.csv has aibrix-deepseek-coder-a10, azure-2023-70b-h100, " in message
    assert "seed-example" in message


@pytest.mark.parametrize("where", ["under_a_file", "read_only_file_system"])
def test_unwritable_warehouse_folder(tmp_path, where):
    if where == "under_a_file":
        (tmp_path / "plain").write_text("")
        warehouse = tmp_path / "plain" / "wh" / "fleetspend.duckdb"
    else:
        warehouse = Path("/proc/fleetspend/fleetspend.duckdb")  # mkdir refused even for root
    result, started, message = _run(warehouse)
    assert started == [] and f"FLEETSPEND_WAREHOUSE={warehouse}" in message


def test_several_problems_are_listed_together(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", _reference(tmp_path, gpu="tpu-v9"))
    (tmp_path / "plain").write_text("")
    _, _, message = _run(tmp_path / "plain" / "fleetspend.duckdb")
    lines = message.splitlines()
    assert lines[0].endswith("Failure: configuration problem(s), nothing was run:")
    assert len(lines) == 3 and "FLEETSPEND_WAREHOUSE" in lines[1] and "tpu-v9" in lines[2]


def test_command_prints_the_message_without_a_traceback(tmp_path):
    (tmp_path / "plain").write_text("")
    config = tmp_path / "run.yaml"
    config.write_text("ops:\n  replayed_fleet:\n    config:\n      deployment: nope\n")
    env = {"FLEETSPEND_WAREHOUSE": str(tmp_path / "plain" / "w.duckdb"), "PATH": "/usr/bin:/bin"}
    bad = subprocess.run([sys.executable, "-m", "pipelines.defs.preflight", "-c", str(config)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "replayed_fleet.deployment='nope': no such deployment" in bad.stderr
    assert "cannot write in" in bad.stderr or "is not a folder" in bad.stderr

    env["FLEETSPEND_WAREHOUSE"] = str(tmp_path / "ok" / "w.duckdb")
    good = subprocess.run([sys.executable, "-m", "pipelines.defs.preflight"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert good.returncode == 0 and "configuration ok" in good.stdout


def test_deployment_that_fails_to_build_otherwise_is_one_line(tmp_path, monkeypatch, capsys):
    """A bug, or a combination the catalog checks miss, is named with its deployment and the
    exception's type rather than a traceback."""
    from pipelines.roofline import catalog

    checked = catalog._check_tensor_parallel

    def broken(model_row, tp):
        if model_row["model"] == "llama-3.1-70b":
            raise ZeroDivisionError("division by zero")
        checked(model_row, tp)

    monkeypatch.setattr(catalog, "_check_tensor_parallel", broken)
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and out == "" and "Traceback" not in err
    lines = [line for line in err.splitlines() if DEPLOYMENT in line]
    assert len(lines) == 1 and "deployments.csv" in lines[0]
    assert f"deployment '{DEPLOYMENT}': building it failed with ZeroDivisionError" in lines[0]


def _scenarios(tmp_path, monkeypatch, row: str) -> None:
    folder = _reference(tmp_path)
    with open(f"{folder}/scenarios.csv", "a") as handle:
        handle.write(row + "\n")
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", folder)


@pytest.mark.parametrize("row, expected", [
    ('h300,"a GPU that does not exist",h300-sxm,,,,,,,,x', "scenario 'h300': unknown gpu 'h300-sxm'"),
    ('fewer,"negative replicas",,,,,-2,,,,x', "replicas=-2, expected a whole number >= 1"),
    ('"bad; name","a hostile name",,,,,,,,,x', "scenario name 'bad; name': expected lower-case"),
    ('spot,"a plan no GPU has",,,,,,,,,x,runpod,spott',
     "line 12, scenario 'spot': price_provider='runpod', price_plan='spott':"),
])
def test_bad_scenarios_fail_before_any_step(tmp_path, monkeypatch, row, expected):
    _scenarios(tmp_path, monkeypatch, row)
    result, started, message = _run(tmp_path / "wh" / "fleetspend.duckdb")
    assert started == [] and "scenarios.csv" in message and expected in message


def test_shape_buckets_with_a_gap_fail_before_any_step(tmp_path, monkeypatch, capsys):
    """The reports' SQL would drop the requests of a gap between two buckets; the preflight names
    the file and the two buckets instead, alongside any other problem."""
    folder = _reference(tmp_path, gpu="h100-sxmm")
    buckets = Path(folder) / "shape_buckets.csv"
    buckets.write_text(buckets.read_text().replace("prompt,512,2048,", "prompt,600,2048,"))
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", folder)
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and out == "" and "Traceback" not in err
    assert ("shape_buckets.csv, prompt buckets: 'short prompt' ends at 512 but 'medium prompt'"
            " starts at 600") in err
    assert "unknown gpu 'h100-sxmm'" in err


def test_every_shape_bucket_problem_is_a_line(tmp_path, monkeypatch, capsys):
    """An output bucket without a source hid the prompt buckets' gap (and a gap in one
    dimension another in the other) until it was fixed: each is a line of the one run now."""
    folder = _reference(tmp_path)
    buckets = Path(folder) / "shape_buckets.csv"
    rows = pl.read_csv(buckets, infer_schema=False)
    rows.with_columns(
        lower=pl.when((pl.col("dimension") == "prompt") & (pl.col("lower") == "512"))
        .then(pl.lit("600")).otherwise("lower"),
        source=pl.when(pl.col("dimension") == "output").then(None).otherwise("source"),
    ).write_csv(buckets)
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", folder)
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    outputs = rows.filter(pl.col("dimension") == "output").height
    problems = err.splitlines()[1:]
    assert code == 2 and len(problems) == outputs + 1, err
    assert all(f"- FLEETSPEND_REFERENCE_DIR={folder}: shape bucket file {buckets}, output bucket"
               in line and "source is empty" in line for line in problems[:outputs])
    assert problems[-1].endswith("prompt buckets: 'short prompt' ends at 512 but 'medium prompt'"
                                 " starts at 600: expected each upper edge to be the next lower"
                                 " edge")



def test_every_catalog_and_scenario_problem_is_listed_in_one_run(tmp_path, monkeypatch, capsys):
    """Mistakes in several files (an empty gpus.csv source, a model listed twice, an empty
    scenario source, an unknown scenario GPU) were named one per run: the first, and the scenarios
    not at all once the catalog failed. Each is a line now; the deployments, which need the
    whole catalog right, say they were not built."""
    folder = Path(_reference(tmp_path))
    gpus = pl.read_csv(folder / "gpus.csv", infer_schema=False)
    gpus.with_columns(source=pl.when(pl.col("gpu") == "l4").then(None)
                      .otherwise(pl.col("source"))).write_csv(folder / "gpus.csv")
    models = pl.read_csv(folder / "models.csv", infer_schema=False)
    pl.concat([models, models.filter(pl.col("model") == "llama-2-13b")]).write_csv(folder / "models.csv")
    with open(folder / "scenarios.csv", "a") as handle:
        handle.write('unsourced,"no source",,,,,2,,,,\n')
        handle.write('h300,"a GPU that does not exist",h300-sxm,,,,,,,,x\n')
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(folder))
    code, _, err = _command(tmp_path, monkeypatch, capsys,
                            '{"ops": {"replayed_fleet": {"config": {"deployment": "nope"}}}}')
    problems = err.splitlines()[1:]
    assert code == 2 and len(problems) == 6, err
    assert f"{folder / 'gpus.csv'}, row 'l4': source is empty" in problems[0]
    assert f"{folder / 'models.csv'}, row 'llama-2-13b': 2 rows share this model" in problems[1]
    assert "deployments were not built" in problems[2] and "problems above" in problems[2]
    assert problems[3].startswith("- replayed_fleet.deployment='nope': no such deployment")
    lines = (folder / "scenarios.csv").read_text().count("\n")
    assert f"scenarios.csv, line {lines - 1}: source is empty" in problems[4]
    assert "scenario 'h300': unknown gpu 'h300-sxm'" in problems[5]


def test_a_catalog_file_that_does_not_read_says_what_was_not_checked(tmp_path, monkeypatch, capsys):
    """A catalog file the CSV reader refuses stops the checks that need it, and the message says
    so; the other files' checks and the scenarios' run all the same."""
    folder = Path(_reference(tmp_path))
    (folder / "gpus.csv").unlink()
    prices = pl.read_csv(folder / "prices.csv", infer_schema=False)
    first = pl.int_range(pl.len()) == 0
    prices.with_columns(is_default=pl.when(first).then(pl.lit("yes")).otherwise("is_default"),
                        usd_per_gpu_hour=pl.when(pl.int_range(pl.len()) == 1).then(pl.lit("-1"))
                        .otherwise("usd_per_gpu_hour")).write_csv(folder / "prices.csv")
    with open(folder / "scenarios.csv", "a") as handle:
        handle.write('twice,"x",,,,,two,,,,x\n')
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(folder))
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    problems = err.splitlines()[1:]
    assert code == 2 and len(problems) == 5, err
    assert f"catalog file {folder / 'gpus.csv'} is missing" in problems[0]
    assert "usd_per_gpu_hour=-1.0: expected a number > 0" in problems[1]
    assert "is_default='yes': expected true or false" in problems[2]   # and not "0 defaults"
    assert "the deployments, the run config's deployment names and the scenarios' GPUs were not" \
           " checked: they need every catalog file read" in problems[3]
    assert "replicas='two', expected a whole number >= 1" in problems[4]


def _command(tmp_path, monkeypatch, capsys, config_text: str | None) -> tuple[int, str, str]:
    """python -m pipelines.defs.preflight [-c config], in process: exit code, stdout, stderr."""
    from pipelines.defs.preflight import main

    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(tmp_path / "wh" / "w.duckdb"))
    args = []
    if config_text is not None:
        (tmp_path / "run.yaml").write_text(config_text)
        args = ["-c", str(tmp_path / "run.yaml")]
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_provider_without_its_plan_is_one_problem(tmp_path, monkeypatch, capsys, recwarn):
    """A scenario naming a price provider and no plan was two lines: "expected both", and a
    second claiming prices.csv "lists no price for any gpu from lambda None" (with a Polars
    warning on comparing to None): one line says it, as for a plan without its provider."""
    _scenarios(tmp_path, monkeypatch, 'half,"a provider alone",,,,,,,,,x,lambda,')
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    problems = err.splitlines()[1:]
    assert code == 2 and len(problems) == 1, err
    assert "price_provider='lambda', price_plan=None: expected both" in problems[0]
    assert not [w for w in recwarn if "None" in str(w.message)]


def test_replay_on_another_deployment_skips_scenarios_that_cannot_apply(tmp_path, monkeypatch, capsys):
    """A scenario that cannot apply to the deployment replayed (tp 3 does not split seed-example's
    32 heads) is noted as skipped, not a configuration problem; the shipped fp8 scenarios apply
    to that A100 (weight-only fp8) and are not noted."""
    _scenarios(tmp_path, monkeypatch, 'tp3,"tensor-parallel 3",,3,,,,,,,x')
    code, out, err = _command(tmp_path, monkeypatch, capsys,
                              '{"ops": {"replayed_fleet": {"config": {"deployment": "seed-example"}}}}')
    assert code == 0 and err == "" and "configuration ok" in out
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    # the shipped lambda-on-demand prices an H100 at Lambda; prices.csv has no Lambda A100
    assert len(notes) == 2 and "tp=3 cannot split llama-2-7b" in notes[1]
    assert "scenario 'tp3' does not apply to deployment 'seed-example'" in notes[1]
    assert "replayed_fleet.deployment" in notes[1]
    assert ("scenario 'lambda-on-demand' does not apply to deployment 'seed-example':"
            " price_provider='lambda', price_plan='on-demand'") in notes[0]
    assert "its plans for a100-80gb-sxm: coreweave on-demand, runpod on-demand" in notes[0]


def test_a_calibration_deployment_is_not_checked_against_the_scenarios(tmp_path, monkeypatch, capsys):
    config = '{"ops": {"calibrated": {"config": {"deployment": "seed-example"}}}}'
    code, out, err = _command(tmp_path, monkeypatch, capsys, config)
    assert code == 0 and err == "" and "note:" not in out
    bad = '{"ops": {"calibrated": {"config": {"deployment": "nope"}}}}'
    code, _, err = _command(tmp_path, monkeypatch, capsys, bad)
    assert code == 2 and "calibrated.deployment='nope': no such deployment" in err


@pytest.mark.parametrize("op", ["replayed_fleet", "calibrated"])
def test_a_null_deployment_names_none(tmp_path, monkeypatch, capsys, op):
    """Dagster takes `deployment: null` (the field is optional): the run then uses
    FLEETSPEND_DEPLOYMENT or the default, which is what the preflight checks, not "None"."""
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT", raising=False)
    config = f"ops:\n  {op}:\n    config:\n      deployment: null\n"
    code, out, err = _command(tmp_path, monkeypatch, capsys, config)
    assert code == 0 and err == "" and "configuration ok" in out
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "seed-exampel")
    code, _, err = _command(tmp_path, monkeypatch, capsys, config)
    assert code == 2 and "None" not in err
    # the closest name first, as the catalog says it where the replay meets the typo
    assert ("- FLEETSPEND_DEPLOYMENT='seed-exampel': no such deployment; did you mean"
            " 'seed-example'? ") in err


@pytest.mark.parametrize("text, expected", [
    ("- ops\n- replayed_fleet\n", "run config (the whole file): ['ops', 'replayed_fleet'] is a list, expected a mapping"),
    ("ops:\n  - replayed_fleet\n", "run config ops: ['replayed_fleet'] is a list, expected a mapping"),
    ("ops:\n  replayed_fleet: [1]\n", "run config ops.replayed_fleet: [1] is a list, expected a mapping"),
    ("ops:\n  replayed_fleet:\n    config: x\n", "run config ops.replayed_fleet.config: 'x' is a str"),
    ("ops:\n  replayed_fleet:\n    config:\n      deployment: [x]\n",
     "run config ops.replayed_fleet.config.deployment: ['x'], expected a deployment name"),
    ("ops:\n  calibrated:\n    config:\n      deployments: [x]\n",
     "run config ops.calibrated.config.deployments: ['x'] is a list, expected a mapping"),
    ("ops:\n  calibrated:\n    config:\n      deployments: {t: 3}\n",
     "run config ops.calibrated.config.deployments['t']: 3, expected a deployment name"),
    ("ops:\n  calibrated:\n    config:\n      deployments: {t: nope}\n",
     "calibrated.deployments['t']='nope': no such deployment"),
    ("ops:\n  calibrated:\n    config:\n      candidates: {t: [seed-example, nope]}\n",
     "calibrated.candidates['t']='nope': no such deployment"),
    ("ops:\n  calibrated:\n    config:\n      candidates: {t: [seed-example, seed-example]}\n",
     "run config ops.calibrated.config.candidates['t']: seed-example named more than once;"
     " expected each candidate once"),
    ("ops:\n  calibrated:\n    config:\n      candidates: {t: seed-example}\n",
     "run config ops.calibrated.config.candidates['t']: 'seed-example', expected a list of one or more deployment names"),
    ("ops:\n  calibrated:\n    config:\n      candidates: {t: []}\n",
     "run config ops.calibrated.config.candidates['t']: [], expected a list of one or more deployment names"),
    ("ops:\n  calibrated:\n    config:\n      deployments: {t: seed-example}\n      candidates: {t: [seed-example]}\n",
     "run config ops.calibrated.config: trace 't' has both a deployment and candidates"),
    ("ops:\n  calibrated:\n    config:\n      fit_metrics: [ttft, itl]\n",
     "run config ops.calibrated.config.fit_metrics: ['ttft', 'itl'], expected a list of one or more of"),
    ("ops:\n  calibrated:\n    config:\n      fit_metrics: ttft\n",
     "run config ops.calibrated.config.fit_metrics: 'ttft', expected a list"),
    ("ops:\n  calibrated:\n    config:\n      fit_metrics_by_trace: {burstgpt: [ttft, itl]}\n",
     "run config ops.calibrated.config.fit_metrics_by_trace['burstgpt']: ['ttft', 'itl'],"
     " expected a list of one or more of ['ttft', 'e2e', 'tpot']"),
    ("ops:\n  calibrated:\n    config:\n      fit_metrics_by_trace: {burstgpt: []}\n",
     "run config ops.calibrated.config.fit_metrics_by_trace['burstgpt']: [], expected a list of one or more of"),
    ("ops:\n  calibrated:\n    config:\n      traces: burstgpt\n",
     "run config ops.calibrated.config.traces: 'burstgpt', expected a list of trace names"),
    ("ops:\n  calibrated:\n    config:\n      fit_metrics_by_trace: [ttft]\n",
     "run config ops.calibrated.config.fit_metrics_by_trace: ['ttft'] is a list, expected a mapping"),
    ("ops:\n  replayd_fleet:\n    config:\n      deployment: seed-example\n",
     "run config ops.replayd_fleet: no step of that name takes a config; expected one of"
     " calibrated, replayed_fleet"),
    ("ops:\n  replayed_fleet:\n    config:\n      deplyment: seed-example\n",
     "run config ops.replayed_fleet.config.deplyment: no such field; expected one of deployment,"
     " router, timeline_bin_s"),
    ("ops:\n  calibrated:\n    config:\n      fit_metric: [ttft]\n",
     "run config ops.calibrated.config.fit_metric: no such field; expected one of candidates,"),
    ("ops:\n  replayed_fleet:\n    config:\n      router: fastest\n",
     "run config ops.replayed_fleet.config.router: 'fastest', expected one of round_robin,"),
    ("ops:\n  calibrated:\n    config:\n      router: nope\n",
     "run config ops.calibrated.config.router: 'nope', expected one of"),
    ("ops:\n  replayed_fleet:\n    config:\n      timeline_bin_s: 0\n",
     "run config ops.replayed_fleet.config.timeline_bin_s: 0, expected a positive number of seconds"),
])
def test_malformed_run_config_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys, text, expected):
    code, out, err = _command(tmp_path, monkeypatch, capsys, text)
    assert code == 2 and out == ""
    assert err.startswith("configuration problem(s), nothing was run:\n- ") and expected in err


def test_reports_folder_must_be_writable_and_trace_folder_must_exist(tmp_path, monkeypatch, capsys):
    (tmp_path / "plain").write_text("")
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "plain" / "reports"))
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(tmp_path / "no-traces"))
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    lines = err.splitlines()
    assert code == 2 and len(lines) == 3
    assert f"FLEETSPEND_REPORTS_DIR={tmp_path / 'plain' / 'reports'}: " in lines[1]
    assert lines[1] == (f"- FLEETSPEND_REPORTS_DIR={tmp_path / 'plain' / 'reports'}: {tmp_path / 'plain'}"
                        f" is not a folder; expected a folder to write in, or a path where one can"
                        f" be made")
    assert lines[2] == (f"- FLEETSPEND_TRACE_DIR={tmp_path / 'no-traces'}: no such folder; expected "
                        f"the folder of request logs to ingest")


def test_a_missing_reference_folder_is_one_line(tmp_path, monkeypatch, capsys):
    """A mistyped FLEETSPEND_REFERENCE_DIR is named once as a missing folder (it was a line per
    catalog file it lacks, as if the folder were there)."""
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(tmp_path / "refrence"))
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and err.splitlines()[1:] == [
        f"- FLEETSPEND_REFERENCE_DIR={tmp_path / 'refrence'}: no such folder; expected the catalog"
        f" folder (gpus.csv, models.csv, deployments.csv, ...: data/reference)"]


def test_a_warehouse_path_holding_another_kind_of_file_is_named(tmp_path, monkeypatch, capsys):
    """FLEETSPEND_WAREHOUSE pointed at a file that is not a DuckDB database (a trace, by a slip
    of the path): the preflight said ok, and every step then failed on the run's private copy
    of it ('not a valid DuckDB database file'), never naming the setting."""
    not_a_warehouse = tmp_path / "wh" / "w.duckdb"
    not_a_warehouse.parent.mkdir()
    not_a_warehouse.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and err.splitlines()[1:] == [
        f"- FLEETSPEND_WAREHOUSE={not_a_warehouse}: exists and is not a DuckDB database file;"
        f" expected the warehouse a run publishes there, or a path where no file is yet"]
    not_a_warehouse.write_bytes(b"")   # DuckDB refuses an empty file too
    assert _command(tmp_path, monkeypatch, capsys, None)[0] == 2
    not_a_warehouse.unlink()
    assert _command(tmp_path, monkeypatch, capsys, None)[0] == 0
    private_dir(not_a_warehouse).mkdir()   # a run has published: runs start from their own copy
    (private_dir(not_a_warehouse) / "current.duckdb").write_bytes(b"")
    not_a_warehouse.write_text("damaged")   # and the next publish replaces it whole
    assert _command(tmp_path, monkeypatch, capsys, None)[0] == 0


def test_a_warehouse_setting_that_names_a_folder_is_named(tmp_path, monkeypatch, capsys):
    """FLEETSPEND_WAREHOUSE=/srv/warehouse/, a folder meant, where none is yet: the preflight
    said ok and the run published a database file named `warehouse` where the folder belongs.
    (An existing folder is named as one already.)"""
    from pipelines.defs.preflight import main

    folder = tmp_path / "warehouse"
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", f"{folder}/")
    assert main([]) == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        f"- FLEETSPEND_WAREHOUSE={folder}/: ends in '/', a folder; expected the warehouse's DuckDB"
        f" file, e.g. {folder / 'fleetspend.duckdb'}"]
    assert not folder.exists()
    folder.mkdir()
    assert main([]) == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        f"- FLEETSPEND_WAREHOUSE={folder}: exists and is not a file (a folder?); expected the"
        f" warehouse's DuckDB file, e.g. {folder / 'fleetspend.duckdb'}"]


def test_a_trace_folder_without_trace_files_is_named(tmp_path, monkeypatch, capsys):
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "README.md").write_text("logs go here\n")
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(tmp_path / "inbox"))
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and f"FLEETSPEND_TRACE_DIR={tmp_path / 'inbox'}: no trace files in it" in err


def test_a_trace_folder_set_to_one_log_says_it_is_a_file(tmp_path, monkeypatch, capsys):
    """FLEETSPEND_TRACE_DIR set to the log itself read 'no such folder' of a file that exists."""
    log = tmp_path / "day1.csv"
    log.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,5\n")
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(log))
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and (f"FLEETSPEND_TRACE_DIR={log}: is a file; expected the folder of request logs"
                          f" to ingest, e.g. {tmp_path}, where each log is one trace") in err


def test_a_trace_folder_whose_logs_are_in_subfolders_names_them(tmp_path, monkeypatch, capsys):
    """Logs filed by day under the folder are never read (the ingest does not descend): the
    message said only 'no trace files in it', of a folder full of logs."""
    (tmp_path / "inbox" / "2026-11-30").mkdir(parents=True)
    (tmp_path / "inbox" / "2026-11-30" / "day.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n")
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(tmp_path / "inbox"))
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and (f"FLEETSPEND_TRACE_DIR={tmp_path / 'inbox'}: no trace files in it; expected"
                          f" request logs named *.csv, *.jsonl, *.json, *.parquet, optionally .gz/.zst,"
                          f" in the folder itself; not read: 2026-11-30/") in err


def test_a_bad_nightly_cron_is_named_before_dagster_loads_it(tmp_path, monkeypatch, capsys):
    """Every dagster command loads the schedule, so a bad FLEETSPEND_NIGHTLY_CRON would stop
    them all with a traceback; the preflight says it in one line."""
    monkeypatch.setenv("FLEETSPEND_NIGHTLY_CRON", "every night")
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and "Traceback" not in err
    assert "- FLEETSPEND_NIGHTLY_CRON='every night': 2 fields, not 5; expected a 5-field cron string" in err


def test_a_cron_of_a_day_that_never_occurs_is_named_as_such(tmp_path, monkeypatch, capsys):
    """Five fields that never match a date: the message says that, not "expected 5 fields"."""
    monkeypatch.setenv("FLEETSPEND_NIGHTLY_CRON", "0 2 31 2 *")
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and "Traceback" not in err
    assert "- FLEETSPEND_NIGHTLY_CRON='0 2 31 2 *': day '31' never occurs in month '2'" in err


@pytest.mark.parametrize("value", ["3h", "-1", "nan", "inf"])
def test_a_bad_lock_wait_is_named(tmp_path, monkeypatch, capsys, value):
    """FLEETSPEND_LOCK_WAIT_S is read when a run's first step starts waiting for another run:
    a bad value is a problem line before the run, not a ValueError in that step."""
    monkeypatch.setenv("FLEETSPEND_LOCK_WAIT_S", value)
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and "Traceback" not in err
    assert f"- FLEETSPEND_LOCK_WAIT_S={value!r}: expected a number of seconds >= 0" in err


def test_a_run_holding_the_warehouse_past_the_lock_wait_is_named(tmp_path, monkeypatch, capsys):
    """A hung run holds the writer lock: cron's next run started, waited FLEETSPEND_LOCK_WAIT_S
    and failed with Dagster's stack trace. The preflight says it in one line before anything
    waits (and the schedule and the sensor skip their tick with it); a run holding the lock for
    less than that is a run to wait for, not a problem."""
    warehouse = tmp_path / "wh" / "w.duckdb"
    hung = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from pipelines.publish import Workspace; "
         "Workspace(Path(sys.argv[1]), 'hung').begin(); print('holding', flush=True); "
         "time.sleep(600)", str(warehouse)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert hung.stdout.readline() == "holding\n"
        monkeypatch.setenv("FLEETSPEND_LOCK_WAIT_S", "3600")
        code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
        assert code == 0 and "configuration ok" in out
        four_hours_ago = time.time() - 4 * 3600
        os.utime(private_dir(warehouse) / "lock", (four_hours_ago, four_hours_ago))
        code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    finally:
        hung.kill()
        hung.wait(timeout=30)
    assert code == 2 and "Traceback" not in err
    assert (f"- warehouse {warehouse}: the run in process {hung.pid} has held its writer lock for "
            f"4 h, longer than FLEETSPEND_LOCK_WAIT_S=3600; a run now would wait for it and "
            f"give up. If it is hung, stop it (kill {hung.pid}) and run again: the lock is freed "
            f"when it exits") in err
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and "configuration ok" in out   # the hung run gone


def test_a_dagster_cron_alias_passes_the_preflight(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLEETSPEND_NIGHTLY_CRON", "@daily")
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and "configuration ok" in out and not err


def test_a_fresh_dagster_home_is_made_so_the_cron_line_runs(tmp_path, monkeypatch, capsys):
    """README's cron line exports DAGSTER_HOME=$PWD/.dagster_home, which only `make demo`/`make ui`
    create: the preflight said "configuration ok" and `dagster job execute` then stopped with a
    traceback ("$DAGSTER_HOME ... is not a directory or does not exist"). The preflight makes
    the folder, as it does the warehouse's, or names it when it cannot."""
    home = tmp_path / "fresh" / ".dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and "configuration ok" in out and not err
    assert home.is_dir()
    with dg.DagsterInstance.get() as instance:   # what `dagster job execute` opens next
        assert instance.is_persistent
    (tmp_path / "plain").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "plain" / "home"))
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and "Traceback" not in err
    assert f"- DAGSTER_HOME={tmp_path / 'plain' / 'home'}: {tmp_path / 'plain'} is not a folder" in err


def test_a_dagster_home_the_preflight_makes_has_no_usage_telemetry(tmp_path, monkeypatch, capsys):
    """The home the cron line's preflight made had no dagster.yaml, so a clone run only from
    cron sent Dagster usage telemetry and logged its banner and a missing-configuration warning
    at every run, where `make demo` and `make ui` switch telemetry off. A home that exists,
    maybe someone's, is left as it is."""
    home = tmp_path / "fresh" / ".dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and "configuration ok" in out
    with dg.DagsterInstance.get() as instance:   # what `dagster job execute` opens next
        assert not instance.telemetry_enabled
    mine = tmp_path / "mine"
    mine.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(mine))
    code, _, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and not (mine / "dagster.yaml").exists()


def test_a_relative_dagster_home_is_named_before_dagster_refuses_it(tmp_path, monkeypatch, capsys):
    """DAGSTER_HOME=.dagster_home: the preflight made the folder and said "configuration ok",
    and `dagster job execute` then stopped with "$DAGSTER_HOME ... must be an absolute path"."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", ".dagster_home")
    with pytest.raises(dg.DagsterInvariantViolationError, match="absolute path"):
        dg.DagsterInstance.get()   # what `dagster job execute` opens next
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and "Traceback" not in err
    assert "- DAGSTER_HOME=.dagster_home: a relative path; expected an absolute one" in err


def test_a_catalog_without_the_optional_physics_columns_is_noted(tmp_path, monkeypatch, capsys):
    """A catalog copied from an older release lacks models.csv tied_embeddings and gpus.csv
    kv_cache_dtypes and allreduce_family: it loads, but Llama-3.2-1B is modelled untied (its
    decode step 15% faster than the shipped catalog's) and an fp4 KV cache on an H100 passes,
    and nothing said so. The preflight notes each missing column with what its absence means."""
    folder = Path(_reference(tmp_path))
    pl.read_csv(folder / "models.csv").drop("tied_embeddings").write_csv(folder / "models.csv")
    pl.read_csv(folder / "gpus.csv").drop("kv_cache_dtypes", "allreduce_family").write_csv(
        folder / "gpus.csv")
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(folder))
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and err == ""
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: {folder / 'gpus.csv'} has no kv_cache_dtypes column: any KV-cache dtype is taken"
        f" on any GPU (an fp4 KV cache on an H100 too); data/reference/README.md says what it holds",
        f"note: {folder / 'gpus.csv'} has no allreduce_family column: every GPU takes its own"
        f" family's all-reduce (a PCIe card of an NVLink family, as the A10, gets NVSwitch's);"
        f" data/reference/README.md says what it holds",
        f"note: {folder / 'models.csv'} has no tied_embeddings column: every model is taken as"
        f" untied (one whose config.json sets tie_word_embeddings, as Llama-3.2-1B, is modelled"
        f" with an embedding table it does not have); data/reference/README.md says what it holds"]
    monkeypatch.delenv("FLEETSPEND_REFERENCE_DIR")   # the shipped catalog: none
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and "note:" not in out


@pytest.mark.parametrize("op", ["replayed_fleet", "calibrated"])
def test_the_launchpad_describes_every_run_config_field(tmp_path, op):
    """The UI's launchpad shows each field's description from the job's config schema; the
    fields' meanings were code comments, so it showed `candidates`, `fit_metrics_by_trace`, ...
    with nothing beside them."""
    job = build_defs(tmp_path / "wh.duckdb").resolve_implicit_global_asset_job_def()
    ops = job.run_config_schema.config_type.fields["ops"].config_type.fields
    fields = ops[op].config_type.fields["config"].config_type.fields
    assert fields and all(field.description for field in fields.values()), [
        name for name, field in fields.items() if not field.description]
    assert "least_outstanding, least_kv" in fields["router"].description


def test_a_model_row_without_a_vocab_size_is_noted(tmp_path, monkeypatch, capsys):
    """A model row added without its vocab_size ("a whole number when given") is modelled with
    its embedding table and LM head as transformer-block weights (Qwen2.5-7B's bf16 prefill on
    an H20 16% slower), and the preflight said 'configuration ok' and nothing more; a catalog
    without the column said nothing either. Each is a note saying what it means."""
    folder = Path(_reference(tmp_path))
    models = pl.read_csv(folder / "models.csv")
    models.with_columns(pl.when(pl.col("model") == "llama-3.1-8b").then(None)
                        .otherwise(pl.col("vocab_size")).alias("vocab_size")
                        ).write_csv(folder / "models.csv")
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(folder))
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and err == ""
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {folder / 'models.csv'}, row 'llama-3.1-8b': vocab_size is empty:"
                     f" its embedding table and LM head are taken as transformer-block weights:"
                     f" held and read at the weight dtype, the embedding table read and"
                     f" multiplied at every step (docs/physics.md section 2)"]
    models.drop("vocab_size").write_csv(folder / "models.csv")
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert code == 0 and notes == [f"note: {folder / 'models.csv'} has no vocab_size column: for"
                                   f" every model its embedding table and LM head are taken as"
                                   f" transformer-block weights: held and read at the weight"
                                   f" dtype, the embedding table read and multiplied at every"
                                   f" step (docs/physics.md section 2); data/reference/README.md"
                                   f" says what it holds"]


def test_configuration_ok_names_the_deployment_replayed_and_what_chose_it(tmp_path, monkeypatch,
                                                                         capsys):
    """'configuration ok' named the warehouse and the catalog but not the fleet: a cron line
    whose FLEETSPEND_DEPLOYMENT was misspelt (FLEETSPEND_DEPLOYMNET=my-fleet) replayed every night
    on the demo fleet, and neither the preflight nor the summary said so."""
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT", raising=False)
    monkeypatch.setenv("FLEETSPEND_DEPLOYMNET", "seed-example")
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and ("; the traces replay on deployment azure-2023-70b-h100 (the default:"
                          " neither run config replayed_fleet.deployment nor FLEETSPEND_DEPLOYMENT"
                          " names one)") in out.splitlines()[0]
    assert ("note: FLEETSPEND_DEPLOYMNET is set, but fleetspend reads no such setting; did you"
            " mean FLEETSPEND_DEPLOYMENT?") in out.splitlines()
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "seed-example")
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert out.splitlines()[0].endswith(
        "; the traces replay on deployment seed-example (FLEETSPEND_DEPLOYMENT)")
    code, out, _ = _command(tmp_path, monkeypatch, capsys,
                            "ops:\n  replayed_fleet:\n    config:\n      deployment: azure-2023-70b-h100\n")
    assert out.splitlines()[0].endswith(
        "; the traces replay on deployment azure-2023-70b-h100 (replayed_fleet.deployment)")


def test_configuration_ok_names_each_log_whose_sidecar_names_its_deployment(tmp_path, monkeypatch,
                                                                            capsys):
    """A fleet of several deployments: the line named only the run's deployment, which the
    logs whose sidecars name their own do not replay on."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("chat.csv", "code.csv", "broken.csv"):
        (traces / name).write_text("ts,in,out\n0.5,100,10\n")
    (traces / "code.csv.fleetspend.json").write_text('{"format": "csv", "deployment": "seed-example"}')
    (traces / "broken.csv.fleetspend.json").write_text("{not json")   # the ingest names it
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(traces))
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT", raising=False)
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and out.splitlines()[0].endswith(
        " names one), but for 1 whose log's sidecar names its own: code.csv on seed-example")
    # every log names its own: the run's deployment replays none, and the line said they all did
    for name in ("chat.csv", "broken.csv"):
        (traces / f"{name}.fleetspend.json").write_text('{"format": "csv", "deployment": "seed-example"}')
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and out.splitlines()[0].endswith(
        "; each trace replays on the deployment its log's sidecar names: broken.csv on seed-example,"
        " chat.csv on seed-example, code.csv on seed-example (none on the run's, azure-2023-70b-h100,"
        " from the default: neither run config replayed_fleet.deployment nor FLEETSPEND_DEPLOYMENT"
        " names one)")


def test_scenarios_and_sidecars_are_checked_on_each_deployment_a_log_names(tmp_path, monkeypatch,
                                                                          capsys):
    """A fleet of several deployments: the notes checked the scenarios on the run's deployment
    alone, so 'b200' (no Blackwell efficiency for the 2023 stack) and 'lambda-on-demand' (no
    Lambda A100), which the replay skips on every trace, went unsaid; and a misspelt deployment
    in a sidecar read "configuration ok" with no word that the ingest fails its log."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("code.csv", "copy.csv", "plain.csv"):   # plain.csv: on the run's deployment
        shutil.copy(FIXTURES / "public" / "vidur_splitwise_code.excerpt.csv", traces / name)
    (traces / "code.csv.fleetspend.json").write_text('{"deployment": "splitwise-70b-a100-tp2"}')
    (traces / "copy.csv.fleetspend.json").write_text('{"deployment": "splitwise-70b-a100-tp9"}')
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(traces))
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT", raising=False)
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert code == 0
    assert any(f"note: {traces / 'copy.csv.fleetspend.json'}: key 'deployment' names a deployment"
               " the replay cannot use: unknown deployment 'splitwise-70b-a100-tp9'" in n
               and n.endswith("; the ingest fails copy.csv alone, but once ingested naming it (the"
                              " row since removed or renamed) it stops the replay") for n in notes), notes
    skipped = {n.split("scenario '")[1].split("'")[0] for n in notes
               if "(the sidecar of code.csv); the what-if replay skips it on every trace" in n}
    assert skipped == {"b200", "lambda-on-demand"}, notes
    # every log names its own deployment: the run's (the demo fleet's H100) replays none
    (traces / "plain.csv").unlink()
    (traces / "copy.csv.fleetspend.json").write_text('{"deployment": "splitwise-70b-a100-tp2"}')
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and "azure-2023-70b-h100'" not in out and "skips it on every" not in out
    assert "(the sidecar of code.csv, copy.csv); the what-if replay skips it\n" in out


def test_a_sidecar_naming_a_row_that_does_not_build_is_a_problem_not_a_note(tmp_path, monkeypatch,
                                                                            capsys):
    """The README said a sidecar's deployment that is listed but does not build fails its log
    alone at ingest, with a note from the preflight: every row of deployments.csv is built
    before any run, so such a row stops the preflight (exit 2, naming the row) and every run."""
    folder = tmp_path / "reference"
    shutil.copytree(ROOT / "data" / "reference", folder)
    rows = pl.read_csv(folder / "deployments.csv", infer_schema_length=None)
    bad = rows.filter(pl.col("deployment") == "seed-example").with_columns(
        deployment=pl.lit("seed-tp3"), tp=pl.lit(3, dtype=rows.schema["tp"]))
    pl.concat([rows, bad]).write_csv(folder / "deployments.csv")
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(FIXTURES / "public" / "vidur_splitwise_code.excerpt.csv", traces / "code.csv")
    (traces / "code.csv.fleetspend.json").write_text('{"deployment": "seed-tp3"}')
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(folder))
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(traces))
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT", raising=False)
    code, out, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2, (out, err)
    assert "deployments.csv, deployment 'seed-tp3': tp=3 cannot split llama-2-7b" in err
    assert "fleetspend.json" not in out + err


def test_a_deployments_row_with_no_name_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    """A deployments.csv row whose name cell is left empty (a paste one column off) was listed as
    `row 'None'`, and with FLEETSPEND_DEPLOYMENT naming no deployment the preflight died with
    TypeError sorting the names (None among them) instead of listing them."""
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", _reference(tmp_path, deployment=None))
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "my-fleet")
    code, _, err = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 2 and "Traceback" not in err and "None" not in err
    assert "deployments.csv, row (no deployment): deployment is empty: expected a value" in err
    assert "- FLEETSPEND_DEPLOYMENT='my-fleet': no such deployment;" in err
    assert "deployments.csv has aibrix-deepseek-coder-a10, burstgpt-vllm-1b-4090, seed-example," in err


def test_the_preflight_takes_the_run_config_as_json_as_dagster_does(tmp_path, monkeypatch, capsys):
    """The README's calibration commands give their run config with dagster's --config-json; a
    value of the wrong type there (`"fit_metrics": "ttft"`) makes `dagster asset materialize`
    print a DagsterInvalidConfigError traceback, and the preflight took only -c FILE, so the same
    JSON could not be checked first."""
    from pipelines.defs.preflight import main

    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(tmp_path / "wh" / "w.duckdb"))
    bad = '{"ops": {"calibrated": {"config": {"fit_metrics": "ttft"}}}}'
    assert main(["--config-json", bad]) == 2
    assert "run config ops.calibrated.config.fit_metrics: 'ttft', expected a list of" in capsys.readouterr().err
    assert main(["--config-json", '{"ops": {"calibrated": {"config": {"fit_metrics": ["ttft"]}}}}']) == 0
    assert "configuration ok" in capsys.readouterr().out
    assert main(["--config-json", '{"ops": {']) == 2
    err = capsys.readouterr().err
    assert err.startswith("run config --config-json: not readable JSON (") and "Traceback" not in err


def test_configuration_ok_names_the_trace_folder_and_what_chose_it(tmp_path, monkeypatch, capsys):
    """A cron line whose FLEETSPEND_TRACE_DIR is misspelt ingests the demo's sample traces every
    night and prices them as the operator's fleet; 'configuration ok' named the warehouse, the
    catalog and the deployment, but not the folder the logs are read from."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "day1.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,5,5\n")
    monkeypatch.delenv("FLEETSPEND_TRACE_DIR", raising=False)
    monkeypatch.setenv("FLEETSPEND_TRACES_DIR", str(logs))
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and (f", traces from {settings.ROOT / 'data' / 'samples'} (the default, the demo's"
                          f" sample traces: FLEETSPEND_TRACE_DIR is not set), ") in out.splitlines()[0]
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(logs))
    code, out, _ = _command(tmp_path, monkeypatch, capsys, None)
    assert code == 0 and f", traces from {logs} (FLEETSPEND_TRACE_DIR), " in out.splitlines()[0]


def test_the_preflight_reads_config_json_as_json_as_dagster_does(tmp_path, monkeypatch, capsys):
    """dagster's --config-json is json.loads'd; the preflight read it as YAML 1.1, which takes a
    JSON exponent (3e2) for text and refuses a tab between tokens: JSON that the run takes was
    refused ("timeline_bin_s: '3e2', expected a positive number", or a five-line YAML scanner
    error), so the README's `preflight && materialize` never materialized."""
    from pipelines.defs.preflight import main

    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(tmp_path / "wh" / "w.duckdb"))
    for text in ('{"ops": {"replayed_fleet": {"config": {"timeline_bin_s": 3e2}}}}',
                 '{"ops":\t{"replayed_fleet": {"config": {"timeline_bin_s": 300}}}}'):
        assert main(["--config-json", text]) == 0, capsys.readouterr().err
        assert "configuration ok" in capsys.readouterr().out
    assert main(["--config-json", "ops: {}"]) == 2   # YAML, not JSON: dagster refuses it
    err = capsys.readouterr().err
    assert err.startswith("run config --config-json: not readable JSON (") and len(err.splitlines()) == 1


@pytest.mark.parametrize("content, expected", [
    # Windows PowerShell's `>` writes UTF-16 with a byte-order mark; dagster reads -c as UTF-8
    ("ops: {}\n".encode("utf-16"), "not UTF-8 text (byte 0xff at offset 0); expected a YAML file"
                                   " in UTF-8, as dagster -c reads it"),
    (b"ops: [1\n", "not a readable YAML file (line 2, column 1: expected ',' or ']', but got"
                   " '<stream end>')"),
])
def test_a_run_config_file_that_does_not_read_is_one_line(tmp_path, monkeypatch, capsys, content,
                                                          expected):
    """-c FILE as cron gives it: a file in UTF-16 stopped the preflight with a UnicodeDecodeError
    traceback, and a YAML syntax error printed PyYAML's five-line message in the cron log."""
    from pipelines.defs.preflight import main

    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(tmp_path / "wh" / "w.duckdb"))
    config = tmp_path / "run.yaml"
    config.write_bytes(content)
    assert main(["-c", str(config)]) == 2
    assert capsys.readouterr().err == f"run config {config}: {expected}\n"


def test_a_fleetspend_variable_nothing_reads_is_named_with_the_setting_it_is_likely_a_slip_of():
    """A cron line's FLEETSPEND_TRACES_DIR=/logs was silently ignored: the run ingested the demo's
    samples, and the preflight said where traces came from but not that a variable was set for
    nothing."""
    environ = {"FLEETSPEND_TRACES_DIR": "/logs", "FLEETSPEND_COLOUR": "blue", "HOME": "/root",
               "FLEETSPEND_WAREHOUSE": "/w.duckdb", "FLEETSPEND_PUBLIC_TRACES": "/t"}
    assert settings.unknown_settings(environ) == [
        "FLEETSPEND_COLOUR is set, but fleetspend reads no such setting; the settings are"
        " FLEETSPEND_WAREHOUSE, FLEETSPEND_TRACE_DIR, FLEETSPEND_REPORTS_DIR,"
        " FLEETSPEND_REFERENCE_DIR, FLEETSPEND_NIGHTLY_CRON, FLEETSPEND_LOCK_WAIT_S,"
        " FLEETSPEND_DEPLOYMENT",
        "FLEETSPEND_TRACES_DIR is set, but fleetspend reads no such setting; did you mean"
        " FLEETSPEND_TRACE_DIR?"]
    assert settings.unknown_settings({"FLEETSPEND_TRACE_DIR": "/logs"}) == []
