"""Where things live, and what a run does when no run config says otherwise. Every setting is an
environment variable; the default paths stay inside the checkout, in folders git ignores."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQL_DIR = ROOT / "sql"


def _path(variable: str, default: Path) -> Path:
    value = os.environ.get(variable, "").strip()
    return Path(value).expanduser().resolve() if value else default


def warehouse_path() -> Path:
    """The DuckDB warehouse file: FLEETSPEND_WAREHOUSE, default data/warehouse/fleetspend.duckdb."""
    return _path("FLEETSPEND_WAREHOUSE", ROOT / "data" / "warehouse" / "fleetspend.duckdb")


def trace_dir() -> Path:
    """The folder of trace files to ingest: FLEETSPEND_TRACE_DIR, default data/samples."""
    return _path("FLEETSPEND_TRACE_DIR", ROOT / "data" / "samples")


def reports_dir() -> Path:
    """Where report.md and the charts go: FLEETSPEND_REPORTS_DIR, default data/reports."""
    return _path("FLEETSPEND_REPORTS_DIR", ROOT / "data" / "reports")


def reference_dir() -> Path:
    """The catalog folder: FLEETSPEND_REFERENCE_DIR, default data/reference."""
    return _path("FLEETSPEND_REFERENCE_DIR", ROOT / "data" / "reference")


def nightly_cron() -> str:
    """When the nightly schedule runs: FLEETSPEND_NIGHTLY_CRON (a 5-field cron string or one of
    the aliases @hourly, @daily, @weekly, @monthly, UTC; pipelines/defs/schedules.py checks it),
    default 02:00 every day."""
    return os.environ.get("FLEETSPEND_NIGHTLY_CRON", "").strip() or "0 2 * * *"


DEFAULT_DEPLOYMENT = "azure-2023-70b-h100"


def deployment_choice(configured: str | None, config: str) -> tuple[str, str]:
    """The catalog deployment (deployments.csv) a run replays on, and where that name came from,
    so a message about a bad name points at the place to fix it: `configured` (the run config,
    described by `config`) when given, else FLEETSPEND_DEPLOYMENT, else the demo fleet ("`config`
    (default)"). A setting, not only run config, because the nightly schedule, the inbox sensor
    and a cron line each start runs of their own: the fleet a user chose must hold for all."""
    if configured is not None:
        return configured, config
    setting = os.environ.get("FLEETSPEND_DEPLOYMENT", "").strip()
    if setting:
        return setting, "FLEETSPEND_DEPLOYMENT"
    return DEFAULT_DEPLOYMENT, f"{config} (default)"
