"""Where things live, and what a run does when no run config says otherwise. Every setting is an
environment variable; the default paths stay inside the checkout, in folders git ignores."""

from __future__ import annotations

import difflib
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


LOCK_WAIT_SETTING = "FLEETSPEND_LOCK_WAIT_S"
DEFAULT_LOCK_WAIT_S = 3 * 3600.0


def lock_wait_s() -> float:
    """How long a run waits for another run to publish before it fails: FLEETSPEND_LOCK_WAIT_S,
    seconds, default 3 hours (pipelines/publish.py). A bound, because a hung run holds the
    warehouse's writer lock forever and every later run would wait behind it; 0 fails at once."""
    value = os.environ.get(LOCK_WAIT_SETTING, "").strip()
    if not value:
        return DEFAULT_LOCK_WAIT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{LOCK_WAIT_SETTING}={value!r}: expected a number of seconds >= 0 (how "
                         f"long a run waits for another run to publish; default "
                         f"{DEFAULT_LOCK_WAIT_S:g}, 3 hours)")
    return seconds


DEFAULT_DEPLOYMENT = "azure-2023-70b-h100"

# Every FLEETSPEND_ variable a run reads (this module's functions), and the one only the tests
# and the benches read: their folder of public traces (tests/public_traces.py).
SETTINGS = ("FLEETSPEND_WAREHOUSE", "FLEETSPEND_TRACE_DIR", "FLEETSPEND_REPORTS_DIR",
            "FLEETSPEND_REFERENCE_DIR", "FLEETSPEND_NIGHTLY_CRON", LOCK_WAIT_SETTING,
            "FLEETSPEND_DEPLOYMENT")
TEST_SETTINGS = ("FLEETSPEND_PUBLIC_TRACES",)


def unknown_settings(environ=os.environ) -> list[str]:
    """A line for each FLEETSPEND_ variable set in `environ` that nothing reads, with the setting
    it is likely a slip of: a cron line's FLEETSPEND_TRACES_DIR=/logs is silently ignored and the
    run ingests the demo's samples (the preflight's line says where traces come from, but not
    that a variable beside it was set for nothing)."""
    lines = []
    known = (*SETTINGS, *TEST_SETTINGS)
    for name in sorted(v for v in environ if v.startswith("FLEETSPEND_") and v not in known):
        close = difflib.get_close_matches(name, SETTINGS, n=1, cutoff=0.8)
        hint = f"did you mean {close[0]}?" if close else f"the settings are {', '.join(SETTINGS)}"
        lines.append(f"{name} is set, but fleetspend reads no such setting; {hint}")
    return lines


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
