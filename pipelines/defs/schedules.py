"""The nightly schedule: materialize what the day's logs add, then every report downstream.

The target is "the ingest assets and everything downstream of them, plus the reference data they
are priced with" (cheap, and a fresh warehouse needs it), so it follows the graph as it grows;
calibration is left out (on demand, see pipelines/defs/ingest/sensors.py ON_DEMAND).
Ingest itself picks the new files (no Dagster partitions): it is incremental per file, keyed by content hash
(pipelines/defs/ingest/assets.py), so a night reads only the files that are new or changed and
everything downstream is rebuilt from the whole `requests` table. The inbox sensor
(pipelines/defs/ingest/sensors.py) requests the same work as files arrive; the nightly run is the
catch-all that also picks up reference-data changes.

A tick whose configuration fails the preflight is skipped with the preflight's message (shown on
the tick in the UI), instead of launching a run that would fail.
"""

from pathlib import Path

import dagster as dg

from pipelines.defs.ingest.sensors import INGEST_DOWNSTREAM
from pipelines.defs.preflight import check_run
from pipelines.preflight import ConfigurationError

NIGHTLY_SELECTION = INGEST_DOWNSTREAM | dg.AssetSelection.groups("reference")
nightly_job = dg.define_asset_job("nightly", selection=NIGHTLY_SELECTION,
                                  description="New trace data and every report downstream")


def nightly_schedule(cron: str, warehouse: Path) -> dg.ScheduleDefinition:
    """The schedule for `cron` (UTC) publishing to `warehouse`; a bad cron string names the
    setting it came from."""

    def evaluate(context: dg.ScheduleEvaluationContext):
        try:
            check_run(warehouse, {})
        except ConfigurationError as exc:
            return dg.SkipReason(str(exc))
        return dg.RunRequest(run_key=context.scheduled_execution_time.isoformat(),
                             tags={"fleetspend/trigger": "nightly"})

    try:
        return dg.ScheduleDefinition(name="nightly", cron_schedule=cron, job=nightly_job,
                                     execution_fn=evaluate, execution_timezone="UTC",
                                     default_status=dg.DefaultScheduleStatus.STOPPED)
    except dg.DagsterInvalidDefinitionError:
        raise ValueError(f"FLEETSPEND_NIGHTLY_CRON={cron!r}: expected a 5-field cron string "
                         f"such as '0 2 * * *' (02:00 UTC daily)") from None
