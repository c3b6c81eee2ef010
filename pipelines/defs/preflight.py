"""Check a run's configuration before any step: the preflight, wired to Dagster run config.

It runs at the start of every run (the warehouse resource calls `check_run` before any step)
and as a command that prints only the message, for cron and `make demo`:

    python -m pipelines.defs.preflight [-c run_config.yaml]    # exit 0, or 2 with the problems
    python -m pipelines.defs.preflight --config-json '{"ops": ...}'   # as dagster's --config-json

Dagster checks a run config's shape before a run starts; the command does not go through Dagster,
so `run_choices` checks the shape of what it reads itself (mappings where mappings belong, a name
where a name belongs) and reports each mismatch as a problem line, never a traceback.
"""

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import yaml

from pipelines import settings
from pipelines.defs.replay.assets import replay_options
from pipelines.preflight import (
    ConfigurationError,
    RunChoices,
    every_log_names_its_own,
    preflight,
    sidecar_deployments,
    writable_folder,
)
from pipelines.publish import overdue_run
from pipelines.roofline.calibration import REQUEST_METRICS

REPLAY_OP = "replayed_fleet"
CALIBRATION_OP = "calibrated"
CONFIGURABLE_OPS = (CALIBRATION_OP, REPLAY_OP)


def _mapping(value, where: str, problems: list[str]) -> dict:
    """`value` if it is a mapping (None counts as empty), else {} and a problem naming `where`."""
    if value is None or isinstance(value, dict):
        return value or {}
    problems.append(f"run config {where}: {value!r} is a {type(value).__name__}, expected a mapping")
    return {}


def calibration_choices(cfg: dict, problems: list[str]) -> list[tuple[str, str]]:
    """The deployments named in the calibration config's `deployments` map (trace -> deployment)
    and `candidates` map (trace -> list of deployments); also checks `traces`, `fit_metrics` and
    `fit_metrics_by_trace` (pipelines/defs/calibration/assets.py, CalibrationConfig, which runs
    the same checks when it is materialized without the preflight)."""
    where = f"ops.{CALIBRATION_OP}.config"
    chosen = []
    deployments = _mapping(cfg.get("deployments"), f"{where}.deployments", problems)
    for trace, name in deployments.items():
        if isinstance(name, str):
            chosen.append((f"{CALIBRATION_OP}.deployments[{trace!r}]", name))
        else:
            problems.append(f"run config {where}.deployments[{trace!r}]: {name!r}, expected a "
                            f"deployment name")
    for trace, names in _mapping(cfg.get("candidates"), f"{where}.candidates", problems).items():
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            problems.append(f"run config {where}.candidates[{trace!r}]: {names!r}, expected a "
                            f"list of one or more deployment names")
            continue
        if trace in deployments:
            problems.append(f"run config {where}: trace {trace!r} has both a deployment and "
                            f"candidates; expected one or the other")
        # a name twice is calibrated twice (each a whole fit of the log) and listed twice
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problems.append(f"run config {where}.candidates[{trace!r}]: {', '.join(twice)} named"
                            f" more than once; expected each candidate once")
        chosen += [(f"{CALIBRATION_OP}.candidates[{trace!r}]", name) for name in names]
    traces = cfg.get("traces")
    if traces is not None and (not isinstance(traces, list)
                               or not all(isinstance(t, str) for t in traces)):
        problems.append(f"run config {where}.traces: {traces!r}, expected a list of trace names")
    if cfg.get("fit_metrics") is not None:   # none: the default metrics each log observes
        _check_fit_metrics(cfg["fit_metrics"], f"{where}.fit_metrics", problems)
    by_trace = _mapping(cfg.get("fit_metrics_by_trace"), f"{where}.fit_metrics_by_trace", problems)
    for trace, metrics in by_trace.items():
        _check_fit_metrics(metrics, f"{where}.fit_metrics_by_trace[{trace!r}]", problems)
    return chosen


def _check_fit_metrics(metrics, where: str, problems: list[str]) -> None:
    """A problem naming `where` unless `metrics` is a non-empty list of REQUEST_METRICS names."""
    if (not isinstance(metrics, list) or not metrics
            or not all(isinstance(m, str) and m in REQUEST_METRICS for m in metrics)):
        problems.append(f"run config {where}: {metrics!r}, expected a list of one or more of "
                        f"{list(REQUEST_METRICS)}")


def _unknown_fields(op: str, cfg: dict, problems: list[str]) -> None:
    """A field the step's config class does not have (`deplyment`): Dagster refuses the whole run
    config with a stack trace after the preflight said it was ok, so it is a problem here, named
    with the fields the step takes. The classes are imported here: the calibration assets
    import this module."""
    from pipelines.defs.calibration.assets import CalibrationConfig
    from pipelines.defs.replay.assets import ReplayConfig

    fields = {REPLAY_OP: ReplayConfig, CALIBRATION_OP: CalibrationConfig}[op].model_fields
    for name in cfg:
        if name not in fields:
            problems.append(f"run config ops.{op}.config.{name}: no such field; expected one of"
                            f" {', '.join(sorted(fields))}")


def run_choices(run_config) -> RunChoices:
    """The deployment names a run config chooses (any asset config field named `deployment`, and
    the calibration's per-trace `deployments`); the replay's, or when it names none (or null)
    FLEETSPEND_DEPLOYMENT or the default (settings.deployment_choice, as the assets decide it),
    is the one the what-if scenarios are checked against. An op that takes no config (a typo
    of one that does) is a problem: Dagster would run without the config the user meant."""
    problems: list[str] = []
    ops = _mapping(_mapping(run_config, "(the whole file)", problems).get("ops"), "ops", problems)
    chosen = []
    for op, body in ops.items():
        if op not in CONFIGURABLE_OPS:
            problems.append(f"run config ops.{op}: no step of that name takes a config; expected"
                            f" one of {', '.join(CONFIGURABLE_OPS)}")
            continue
        cfg = _mapping(_mapping(body, f"ops.{op}", problems).get("config"), f"ops.{op}.config", problems)
        _unknown_fields(op, cfg, problems)
        replay_options(cfg, f"ops.{op}.config", problems)
        if cfg.get("deployment") is not None:  # null, as Dagster takes it, is no choice
            if isinstance(cfg["deployment"], str):
                chosen.append((f"{op}.deployment", cfg["deployment"]))
            else:
                problems.append(f"run config ops.{op}.config.deployment: {cfg['deployment']!r}, "
                                f"expected a deployment name")
        if op == CALIBRATION_OP:
            chosen += calibration_choices(cfg, problems)
    configured = next((name for where, name in chosen if where == f"{REPLAY_OP}.deployment"), None)
    name, source = settings.deployment_choice(configured, f"{REPLAY_OP}.deployment")
    replay = (source, name)
    return RunChoices(deployments=chosen if replay in chosen else [*chosen, replay], replay=replay,
                      problems=problems)


def _setting_problems(warehouse: Path) -> list[str]:
    """Settings the code location itself reads from the environment (and a FLEETSPEND_WAREHOUSE
    written as a folder, which its resolved path no longer shows): a bad FLEETSPEND_NIGHTLY_CRON
    stops every dagster command from loading the definitions, and a DAGSTER_HOME that cannot be
    made every command that opens the instance, so the command names them first; and a run
    holding `warehouse` for longer than FLEETSPEND_LOCK_WAIT_S, which a new run would wait for
    only to give up."""
    from pipelines.defs.schedules import nightly_schedule  # schedules imports this module

    problems = []
    # A folder meant (`/srv/warehouse/`) where none is yet: the path resolves without its slash,
    # and the run would publish a database file of the folder's name. An existing folder is
    # warehouse_problem's to name.
    raw = os.environ.get("FLEETSPEND_WAREHOUSE", "").strip()
    if raw.endswith(("/", os.sep)) and not warehouse.is_dir():
        problems.append(f"FLEETSPEND_WAREHOUSE={raw}: ends in '/', a folder; expected the"
                        f" warehouse's DuckDB file, e.g. {warehouse / 'fleetspend.duckdb'}")
    try:
        nightly_schedule(settings.nightly_cron(), settings.warehouse_path())
    except ValueError as exc:
        problems.append(str(exc))
    try:
        lock_wait_s = settings.lock_wait_s()
    except ValueError as exc:
        problems.append(str(exc))
    else:
        if problem := overdue_run(warehouse, lock_wait_s):
            problems.append(problem)
    # Every dagster command after the preflight (cron's `dagster job execute`) stops with a
    # traceback when DAGSTER_HOME is not an existing folder; made here like the warehouse's.
    # Dagster also refuses a relative one ("must be an absolute path"), whichever folder it names.
    home = os.environ.get("DAGSTER_HOME", "").strip()
    if home and not Path(home).expanduser().is_absolute():
        problems.append(f"DAGSTER_HOME={home}: a relative path; expected an absolute one, as Dagster"
                        f" requires (e.g. DAGSTER_HOME=$PWD/{home})")
    elif home:
        folder = Path(home).expanduser()
        fresh = not folder.exists()
        if problem := writable_folder(f"DAGSTER_HOME={home}", folder):
            problems.append(problem)
        elif fresh:
            (folder / "dagster.yaml").write_text(DAGSTER_YAML)
    return problems


# The instance settings of a DAGSTER_HOME the preflight makes, as the Makefile writes them for
# `make demo` and `make ui`: no usage telemetry (nor its banner and Dagster's missing-dagster.yaml
# warning in every cron log). Only a home it made: an existing one may be someone's.
DAGSTER_YAML = "telemetry:\n  enabled: false\n"


def check_run(warehouse: Path, run_config) -> list[str]:
    """Raise ConfigurationError naming every problem of this run's configuration; else return
    the notes (optional catalog columns the physics reads that the files lack, what-if scenarios
    the replay will skip on a deployment the traces replay on, a log's sidecar's included, and
    why, and sidecars naming a deployment the catalog cannot build)."""
    choices = run_choices(run_config)
    choices = replace(choices, problems=[*_setting_problems(warehouse), *choices.problems])
    return preflight(warehouse, settings.reference_dir(), choices,
                     reports_dir=settings.reports_dir(), trace_dir=settings.trace_dir())


def replayed_on(run_config) -> str:
    """Which deployment the traces replay on and what chose it: a FLEETSPEND_DEPLOYMENT
    misspelt in a cron line replays every night on the demo fleet, which nothing before the
    report's last lines named. Where every log's sidecar names its own, the run's replays none,
    and the line does not say the traces replay on it."""
    source, name = run_choices(run_config).replay
    if source.endswith("(default)"):
        source = (f"the default: neither run config {REPLAY_OP}.deployment nor"
                  f" FLEETSPEND_DEPLOYMENT names one")
    own = sidecar_deployments(settings.trace_dir())
    if not own:
        return f"the traces replay on deployment {name} ({source})"
    listed = ", ".join(f"{log.name} on {deployment}" for log, deployment in own)
    if every_log_names_its_own(settings.trace_dir(), own):
        return (f"each trace replays on the deployment its log's sidecar names: {listed} (none on"
                f" the run's, {name}, from {source})")
    return (f"the traces replay on deployment {name} ({source}), but for {len(own)} whose log's"
            f" sidecar names its own: {listed}")


def traces_from() -> str:
    """Which folder the logs are ingested from and what chose it: a FLEETSPEND_TRACE_DIR
    misspelt in a cron line ingests the demo's sample traces every night, priced as the fleet."""
    source = ("FLEETSPEND_TRACE_DIR" if os.environ.get("FLEETSPEND_TRACE_DIR", "").strip()
              else "the default, the demo's sample traces: FLEETSPEND_TRACE_DIR is not set")
    return f"traces from {settings.trace_dir()} ({source})"


def _run_config(file: Path | None, json_text: str | None):
    """The run config as dagster takes it: -c a YAML file, --config-json text by json.loads (not
    by the YAML parser: YAML 1.1 reads a JSON exponent, 3e2, as text and refuses a tab between
    tokens, so JSON the run takes would be refused here); empty text is no config, as there."""
    if file is not None:
        return yaml.safe_load(file.read_text())
    return json.loads(json_text) if json_text else {}


def _one_line(exc: Exception) -> str:
    """A reading error in one line for a cron log: PyYAML's own message spans five, quoting the
    text around the error with a caret under it; its line, column and problem say as much."""
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and mark is not None and exc.problem:
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return " ".join(str(exc).split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    given = parser.add_mutually_exclusive_group()
    given.add_argument("-c", "--config", type=Path, help="run config YAML, as for dagster -c")
    given.add_argument("--config-json", help="run config JSON text, as for dagster --config-json (the"
                                             " README's calibration commands give theirs so)")
    args = parser.parse_args(argv)
    try:
        run_config = _run_config(args.config, args.config_json)
    except UnicodeDecodeError as exc:   # only a -c file is decoded here
        print(f"run config {args.config}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at"
              f" offset {exc.start}); expected a YAML file in UTF-8, as dagster -c reads it",
              file=sys.stderr)
        return 2
    except (OSError, yaml.YAMLError, json.JSONDecodeError) as exc:
        where = f"run config {args.config}: not a readable YAML file" if args.config else \
            "run config --config-json: not readable JSON"
        print(f"{where} ({_one_line(exc)})", file=sys.stderr)
        return 2
    try:
        notes = check_run(settings.warehouse_path(), run_config)
    except ConfigurationError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"configuration ok: warehouse {settings.warehouse_path()}, {traces_from()}, "
          f"reference data {settings.reference_dir()}; {replayed_on(run_config)}")
    for note in [*settings.unknown_settings(), *notes]:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
