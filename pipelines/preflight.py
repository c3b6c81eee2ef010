"""Checks a run's configuration before it does any work, so a typo fails in a second, not an hour in.

Everything a run will need and a person can get wrong: the warehouse and reports folders must be
writable and the trace folder must exist, the reference catalog and its shape buckets must load,
every deployment in it must resolve (model, GPU, price plan, replicas), every deployment the run
config names must exist, and every what-if scenario of scenarios.csv must be well-formed (name, replicas, ...) and
name GPUs and dtypes the catalog knows. A scenario whose change cannot apply to the replay's
deployment (fp8 on a GPU without fp8), or to a deployment a log's sidecar names, is not a problem:
the what-if replay skips it and records why, and the preflight returns that as a note; so is a
sidecar's deployment deployments.csv does not list, which fails that log alone at ingest (a
listed row that does not build is a problem like any other row's: every row is built). All
problems are collected and reported together, one line each, naming the setting or file (and its row and column) and what was expected: each
check runs whatever the others found, except those that need what failed (the checks across
catalog files need the files read; building the deployments needs catalog files without
problems, and the scenarios' applicability those deployments), and a line says what was not
checked.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.formats.sidecar import deployment_named, raw_options
from pipelines.formats.source import TRACE_NAMES, folder_mark, trace_files, unread_files
from pipelines.ingest_folder import unusable_deployment
from pipelines.publish import current_copy
from pipelines.reports.scenarios import (
    ScenarioError,
    ScenarioNotApplicable,
    check_scenario_names,
    read_scenarios,
    scenario_deployment,
)
from pipelines.roofline import Catalog, CatalogError
from pipelines.roofline.catalog import check_catalog, did_you_mean, load_shape_buckets


class ConfigurationError(ValueError):
    """The run's configuration is wrong; str() is the message for the user, one problem a line."""


@dataclass(frozen=True)
class RunChoices:
    """The names a run's config chose, as (setting, name) pairs; the setting says where the
    name came from (e.g. 'replayed_fleet.deployment'), so the message can point at it.
    `replay` is the deployment the baseline and what-if replays run on but for the logs whose
    sidecars name their own (the scenarios are checked against it and those); `problems` are
    what reading the run config already found wrong."""

    deployments: list[tuple[str, str]] = field(default_factory=list)
    replay: tuple[str, str] | None = None
    problems: list[str] = field(default_factory=list)


def writable_folder(setting: str, folder: Path) -> str | None:
    """None if files can be created in `folder` (made if missing), else why not."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        return (f"{setting}: {existing} is not a folder; expected a folder to write in, or a path"
                f" where one can be made")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".fleetspend-preflight-"):
            pass
    except OSError as exc:
        return (f"{setting}: cannot write in {folder} "
                f"({exc.strerror}); choose a folder you can write to")
    return None


DUCKDB_MAGIC = b"DUCK"   # at byte 8 of every DuckDB database file, after the header checksum


def is_duckdb_file(path: Path) -> bool:
    """True for a DuckDB database file or a missing one. A first run adopts the file at the
    warehouse path as the warehouse; any other file there (a trace, a SQLite file, an empty file
    `touch` made) failed every step with DuckDB's 'not a valid DuckDB database file', naming the
    run's private copy instead of the setting. (Once a run has published, runs start from their
    own copy and replace a damaged published file whole.)"""
    if not path.is_file():
        return True
    try:
        with path.open("rb") as handle:
            return handle.read(12)[8:] == DUCKDB_MAGIC
    except OSError:   # unreadable: not this check's to say; the run names the error
        return True


def warehouse_problem(warehouse: Path) -> str | None:
    """What makes the warehouse path hold something other than a warehouse (a folder, a log
    named by mistake), or None; the preflight and the summary both say it in these words."""
    setting = f"FLEETSPEND_WAREHOUSE={warehouse}"
    if warehouse.exists() and not warehouse.is_file():
        return (f"{setting}: exists and is not a file (a folder?); expected the warehouse's DuckDB"
                f" file, e.g. {warehouse / 'fleetspend.duckdb'}")
    if not current_copy(warehouse).exists() and not is_duckdb_file(warehouse):
        return (f"{setting}: exists and is not a DuckDB database file; expected the warehouse a run"
                f" publishes there, or a path where no file is yet")
    return None


def _folder_problems(warehouse: Path, reports_dir: Path | None, trace_dir: Path | None) -> Iterable[str]:
    """The warehouse file can be created or replaced, the reports can be written, the traces exist."""
    if problem := warehouse_problem(warehouse):
        yield problem
    elif problem := writable_folder(f"FLEETSPEND_WAREHOUSE={warehouse}", warehouse.parent):
        yield problem
    if reports_dir is not None and (problem := writable_folder(
            f"FLEETSPEND_REPORTS_DIR={reports_dir}", reports_dir)):
        yield problem
    if trace_dir is not None and trace_dir.is_file():   # one log named, not its folder
        yield (f"FLEETSPEND_TRACE_DIR={trace_dir}: is a file; expected the folder of request logs"
               f" to ingest, e.g. {trace_dir.parent}, where each log is one trace")
    elif trace_dir is not None and not trace_dir.is_dir():
        yield (f"FLEETSPEND_TRACE_DIR={trace_dir}: no such folder; expected the folder of request "
               f"logs to ingest")
    elif trace_dir is not None and not trace_files(trace_dir):
        unread = ", ".join(p.name + folder_mark(p) for p in unread_files(trace_dir))
        yield (f"FLEETSPEND_TRACE_DIR={trace_dir}: no trace files in it; expected request logs"
               f" named {TRACE_NAMES}, in the folder itself" + (f"; not read: {unread}" if unread else ""))


def sidecar_deployments(folder: Path | None) -> list[tuple[Path, str]]:
    """(log, deployment) of each log of `folder` whose sidecar names the deployment that
    served it (pipelines/formats/sidecar.py); a sidecar that cannot be read is the ingest's to
    name, with its log."""
    named = []
    for log in trace_files(folder) if folder is not None and folder.is_dir() else ():
        try:
            deployment = deployment_named(raw_options(log))
        except (OSError, ValueError):
            continue
        if deployment is not None:
            named.append((log, deployment))
    return named


def every_log_names_its_own(folder: Path | None, own: list[tuple[Path, str]]) -> bool:
    """Whether every log of `folder` has a sidecar naming its deployment (`own`:
    sidecar_deployments(folder)): the run's deployment then replays no trace, so neither the
    what-if notes nor the configuration-ok line may speak of it as replayed."""
    return bool(own) and len(own) == len(trace_files(folder))


def _replayed_deployments(catalog: Catalog, choices: RunChoices, trace_dir: Path | None,
                          notes: list[str]) -> dict[str, str]:
    """Every deployment the folder's traces replay on -> where its name came from: the run's
    (unless every log's sidecar names its own) and each one a sidecar names. A sidecar's that
    the catalog cannot build is a note, not a problem: a new log's typo fails that log alone at
    ingest and must not stop the other logs' run; the note says too that a log ingested naming
    it (a deployments.csv row removed since) stops the replay, which the preflight cannot tell
    from here without the warehouse."""
    own = sidecar_deployments(trace_dir)
    fleet: dict[str, str] = {}
    if choices.replay is not None and not every_log_names_its_own(trace_dir, own):
        setting, name = choices.replay
        fleet[name] = setting
    logs: dict[str, list[str]] = {}
    for log, name in own:
        if problem := unusable_deployment(log, name, lambda: catalog):
            notes.append(f"{problem}; the ingest fails {log.name} alone, but once ingested naming"
                         f" it (the row since removed or renamed) it stops the replay")
            continue
        logs.setdefault(name, []).append(log.name)
    for name, names in logs.items():
        fleet.setdefault(name, f"the sidecar of {', '.join(names)}")
    return fleet


def _catalog_problems(reference_dir: Path, choices: RunChoices, notes: list[str],
                      trace_dir: Path | None) -> Iterable[str]:
    if not reference_dir.is_dir():   # one line for the setting, not one per missing catalog file
        yield (f"FLEETSPEND_REFERENCE_DIR={reference_dir}: no such folder; expected the catalog"
               f" folder (gpus.csv, models.csv, deployments.csv, ...: data/reference)")
        return
    try:
        load_shape_buckets(reference_dir)
    except CatalogError as exc:   # one problem a line
        yield from (f"FLEETSPEND_REFERENCE_DIR={reference_dir}: {line}"
                    for line in str(exc).splitlines())
    catalog, problems = check_catalog(reference_dir)
    yield from (f"FLEETSPEND_REFERENCE_DIR={reference_dir}: {problem}" for problem in problems)
    if catalog is None:
        yield (f"FLEETSPEND_REFERENCE_DIR={reference_dir}: the deployments, the run config's"
               f" deployment names and the scenarios' GPUs were not checked: they need every"
               f" catalog file read")
    elif problems:
        yield (f"{catalog.file('deployments')}: the deployments were not built (their model, GPU,"
               f" price plan and sizes checked together) because of the catalog problems above")
    else:
        yield from _deployment_problems(catalog, notes)
    if catalog is not None:
        names = {name for name in catalog.deployment_names if name is not None}   # an empty cell is a problem above
        for setting, name in choices.deployments:
            if name not in names:
                yield (f"{setting}={name!r}: no such deployment; {did_you_mean(name, names)}"
                       f"{catalog.file('deployments')} has {', '.join(sorted(names))}")
    yield from _scenario_problems(reference_dir / "scenarios.csv", catalog, choices, notes,
                                  catalog_ok=not problems, trace_dir=trace_dir)


def _deployment_problems(catalog: Catalog, notes: list[str]) -> Iterable[str]:
    """Every deployment of a catalog whose files passed their checks must build; the notes get
    the optional physics columns the files lack or leave empty."""
    notes += catalog.absent_columns() + catalog.empty_values()
    for name in catalog.deployment_names:
        try:
            catalog.deployment(name)
        except CatalogError as exc:
            yield str(exc)   # names the file and the row
        except Exception as exc:  # a bug, or a combination the catalog checks miss: one line
            yield (f"{catalog.file('deployments')}, deployment {name!r}: building it failed with"
                   f" {type(exc).__name__}: {exc} (the catalog checks missed this; please report"
                   f" it)")


def _scenario_problems(scenarios_file: Path, catalog: Catalog | None, choices: RunChoices,
                       notes: list[str], catalog_ok: bool,
                       trace_dir: Path | None) -> Iterable[str]:
    """Every problem of the scenarios file, whatever the catalog's (its rows are checked on
    their own), and of the GPU and dtype names they give where the catalog's files read; where
    the catalog and the scenarios are right, the scenarios that cannot apply to a deployment the
    traces replay on (the run's, or one a log's sidecar names) are notes: on a fleet of several
    the replay skips such a scenario on every trace."""
    scenarios, problems = read_scenarios(scenarios_file)
    yield from problems
    named_wrong = False
    for scenario in scenarios if catalog is not None else ():
        try:
            check_scenario_names(catalog, scenario)
        except ScenarioError as exc:
            named_wrong = True
            yield str(exc)   # names the file and the line
    if not catalog_ok or problems or named_wrong:
        return
    fleet = _replayed_deployments(catalog, choices, trace_dir, notes)
    where = " on every trace" if len(fleet) > 1 else ""
    for name, setting in fleet.items():
        if name not in catalog.deployment_names:
            continue   # reported above
        try:
            baseline = catalog.deployment(name)
        except Exception:
            continue  # reported above
        for scenario in scenarios:  # names are known now: what fails here does not fit `baseline`
            try:
                scenario_deployment(catalog, baseline, scenario)
            except ScenarioNotApplicable as exc:
                notes.append(f"{exc} ({setting}); the what-if replay skips it{where}")


def preflight(warehouse: Path, reference_dir: Path, choices: RunChoices, *,
              reports_dir: Path | None = None, trace_dir: Path | None = None) -> list[str]:
    """Raise ConfigurationError listing every problem, or return the notes: optional catalog
    columns the physics reads that the files lack (Catalog.absent_columns) or a row leaves
    empty (Catalog.empty_values), what-if scenarios the replay will skip because they cannot
    apply to a deployment the traces replay on, and sidecars that name a deployment the catalog
    cannot build."""
    notes: list[str] = []
    problems = [*choices.problems, *_folder_problems(warehouse, reports_dir, trace_dir)]
    problems += list(_catalog_problems(reference_dir, choices, notes, trace_dir))
    if problems:
        raise ConfigurationError("configuration problem(s), nothing was run:\n- " + "\n- ".join(problems))
    return notes
