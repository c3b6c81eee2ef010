"""Checks a run's configuration before it does any work, so a typo fails in a second, not an hour in.

Everything a run will need and a person can get wrong: the warehouse folder must be writable, the
reference catalog must load and every deployment in it must resolve (model, GPU, price plan,
replicas), every deployment the run config names must exist, and every what-if scenario of
scenarios.csv must be well-formed (name, replicas, ...) and resolve on those deployments (GPU,
dtypes, parallelism). All problems are collected and reported together, one line each, naming
the setting or file and what was expected.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.reports.scenarios import ScenarioError, load_scenarios, scenario_deployment
from pipelines.roofline import CatalogError, load_catalog


class ConfigurationError(ValueError):
    """The run's configuration is wrong; str() is the message for the user, one problem a line."""


@dataclass(frozen=True)
class RunChoices:
    """The names a run's config chose, as (setting, name) pairs; the setting says where the
    name came from (e.g. 'replayed_fleet.deployment'), so the message can point at it."""

    deployments: list[tuple[str, str]] = field(default_factory=list)


def _writable_folder(warehouse: Path) -> str | None:
    """None if the warehouse file can be created or replaced in its folder, else why not."""
    folder = warehouse.parent
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        return f"FLEETSPEND_WAREHOUSE={warehouse}: {existing} is not a folder"
    if warehouse.exists() and not warehouse.is_file():
        return f"FLEETSPEND_WAREHOUSE={warehouse}: exists and is not a file"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".fleetspend-preflight-"):
            pass
    except OSError as exc:
        return (f"FLEETSPEND_WAREHOUSE={warehouse}: cannot write in {folder} "
                f"({exc.strerror}); choose a folder you can write to")
    return None


def _catalog_problems(reference_dir: Path, choices: RunChoices) -> Iterable[str]:
    try:
        catalog = load_catalog(reference_dir)
    except CatalogError as exc:
        yield f"FLEETSPEND_REFERENCE_DIR={reference_dir}: {exc}"
        return
    names = set(catalog.deployment_names)
    for name in catalog.deployment_names:
        try:
            catalog.deployment(name)
        except CatalogError as exc:
            yield f"{catalog.file('deployments')}, deployment {name!r}: {exc}"
    for setting, name in choices.deployments:
        if name not in names:
            yield (f"{setting}={name!r}: no such deployment; {catalog.file('deployments')} has "
                   f"{', '.join(sorted(names))}")
    scenarios_file = reference_dir / "scenarios.csv"
    try:
        scenarios = load_scenarios(scenarios_file)
    except ScenarioError as exc:
        yield str(exc)
        return
    for _, name in choices.deployments:
        try:
            baseline = catalog.deployment(name)
        except CatalogError:
            continue  # reported above
        for scenario in scenarios:
            try:
                scenario_deployment(catalog, baseline, scenario)
            except ScenarioError as exc:
                yield f"scenarios file {scenarios_file}, on deployment {name!r}: {exc}"


def preflight(warehouse: Path, reference_dir: Path, choices: RunChoices) -> None:
    """Raise ConfigurationError listing every problem, or return quietly."""
    problems = [p for p in (_writable_folder(warehouse),) if p]
    problems += list(_catalog_problems(reference_dir, choices))
    if problems:
        raise ConfigurationError("configuration problem(s), nothing was run:\n- " + "\n- ".join(problems))
