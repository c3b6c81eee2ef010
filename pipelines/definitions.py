"""The Dagster code location: `dagster ... -m pipelines.definitions`.

Runs execute in-process (one DuckDB writer, and no 4x process start-up cost per step); the
warehouse resource relies on it: one resource per run, so one working copy published at the end
(pipelines/publish.py). The warehouse file comes from FLEETSPEND_WAREHOUSE (see
pipelines/settings.py); tests build their own Definitions on a temporary warehouse with
`build_defs`.
"""

from pathlib import Path

import dagster as dg

from pipelines import settings
from pipelines.warehouse import WAREHOUSE_CONFIG
from pipelines.defs.calibration import assets as calibration_assets
from pipelines.defs.ingest import assets as ingest_assets
from pipelines.defs.ingest import checks as ingest_checks
from pipelines.defs.ingest import sensors as ingest_sensors
from pipelines.defs.reference import assets as reference_assets
from pipelines.defs.replay import assets as replay_assets
from pipelines.defs.replay import checks as replay_checks
from pipelines.defs.reports import assets as report_assets
from pipelines.defs.reports import checks as report_checks
from pipelines.defs.reports import what_if as what_if_assets
from pipelines.defs.resources import PublishedWarehouse
from pipelines.defs.schedules import nightly_job, nightly_schedule




# Every asset, in one place: the Definitions hold them, and a step's failure that names an
# asset to materialize first names the others one computation writes with it (resources.py).
ASSET_MODULES = (reference_assets, ingest_assets, replay_assets, report_assets, what_if_assets,
                 calibration_assets)


def build_defs(warehouse: Path) -> dg.Definitions:
    """Every asset and check, publishing to the DuckDB file `warehouse` (its folder is created
    by the first run, after the preflight has checked it can be)."""
    return dg.Definitions(
        assets=dg.load_assets_from_modules(ASSET_MODULES),
        asset_checks=dg.load_asset_checks_from_modules([ingest_checks, replay_checks, report_checks]),
        jobs=[ingest_sensors.ingest_job, nightly_job],
        sensors=[ingest_sensors.trace_inbox_sensor],
        resources={"duckdb": PublishedWarehouse(database=str(warehouse), connection_config=WAREHOUSE_CONFIG)},
        schedules=[nightly_schedule(settings.nightly_cron(), warehouse)],
        executor=dg.in_process_executor,
    )


defs = build_defs(settings.warehouse_path())
