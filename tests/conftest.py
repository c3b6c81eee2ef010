"""Shared fixtures: a whole-graph materialization into a temporary warehouse, run once per session."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pipelines.definitions import build_defs

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> Path:
    """Materialize every asset and check on the default samples into a fresh warehouse, with a
    real (temporary, on-disk) Dagster instance; returns the run's folder (warehouse/, reports/)."""
    tmp = tmp_path_factory.mktemp("demo")
    mp = pytest.MonkeyPatch()
    mp.setenv("FLEETSPEND_REPORTS_DIR", str(tmp / "reports"))
    mp.delenv("FLEETSPEND_TRACE_DIR", raising=False)
    mp.delenv("FLEETSPEND_REFERENCE_DIR", raising=False)
    warehouse = tmp / "warehouse" / "fleetspend.duckdb"
    defs = build_defs(warehouse)
    (tmp / "dagster_home").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp / "dagster_home")) as instance:
        result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)
        assert result.success
        checks = [e.event_specific_data for e in result.all_events
                  if e.event_type_value == "ASSET_CHECK_EVALUATION"]
        failed = [c.check_name for c in checks if not c.passed]
        assert len(checks) == 11 and not failed, f"asset checks failed: {failed}"
    mp.undo()
    return tmp


@pytest.fixture()
def demo_conn(demo_run):
    with duckdb.connect(str(demo_run / "warehouse" / "fleetspend.duckdb"), read_only=True) as conn:
        yield conn
