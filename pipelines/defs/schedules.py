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

import time
from pathlib import Path

import dagster as dg
from dagster._utils.schedules import CroniterShim, cron_string_iterator  # private: Dagster's cron parser

from pipelines.defs.ingest.sensors import TRACE_RUN_SELECTION
from pipelines.defs.preflight import check_run
from pipelines.preflight import ConfigurationError

nightly_job = dg.define_asset_job("nightly", selection=TRACE_RUN_SELECTION,
                                  description="New trace data and every report downstream")


# What the UI's Automation page says of the schedule (it showed none).
SCHEDULE_DESCRIPTION = ("The nightly job (ingest, replay and reports; not the calibration) at"
                        " FLEETSPEND_NIGHTLY_CRON, UTC; a tick is skipped with the preflight's"
                        " message while the configuration is bad")


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

    problem = cron_problem(cron)
    if problem is None:
        try:
            return dg.ScheduleDefinition(name="nightly", cron_schedule=cron, job=nightly_job,
                                         execution_fn=evaluate, execution_timezone="UTC",
                                         default_status=dg.DefaultScheduleStatus.STOPPED,
                                         description=SCHEDULE_DESCRIPTION)
        except dg.DagsterInvalidDefinitionError as exc:
            problem = f"Dagster refuses it ({exc})"
    raise ValueError(f"FLEETSPEND_NIGHTLY_CRON={cron!r}: {problem}; expected {CRON_EXPECTED}")


CRON_FIELDS = (("minute", "0-59"), ("hour", "0-23"), ("day-of-month", "1-31"),
               ("month", "1-12 or JAN-DEC"), ("day-of-week", "0-7 or SUN-SAT"))
# The aliases the README documents; Dagster takes more (@yearly, @annually, @midnight), which
# are refused so that what is accepted is what is documented.
CRON_ALIASES = ("@hourly", "@daily", "@weekly", "@monthly")
CRON_EXPECTED = ("a 5-field cron string (minute hour day-of-month month day-of-week, UTC) such as "
                 f"'0 2 * * *' (02:00 UTC daily), or one of Dagster's aliases {', '.join(CRON_ALIASES)}")


def cron_problem(cron: str) -> str | None:
    """What is wrong with `cron` as the nightly schedule's cron string, in words, or None when
    Dagster can schedule it (an alias only if it is one of CRON_ALIASES). Dagster's own error
    says only that it takes 5 fields, whatever the reason, so this asks its cron parser
    (croniter, vendored by Dagster; the import is private API) field by field, and for the next
    run time: a day that never occurs in the months named (31 February, 31 April) parses but
    would never run."""
    fields = cron.split()
    if cron.startswith("@"):
        if cron not in CRON_ALIASES:
            return f"{cron!r} is not one of the aliases this schedule takes"
    elif len(fields) != 5:
        return f"{len(fields)} field{'s' if len(fields) != 1 else ''}, not 5"
    else:
        for i, field in enumerate(fields):
            probe = " ".join(field if j == i else "*" for j in range(5))
            try:
                CroniterShim.expand(probe)
            except Exception as exc:  # croniter's errors (CroniterBadCronError, ...) say why
                reason = str(exc).replace(f"[{probe.lower()}] ", "").replace(f"[{probe}] ", "")
                name, allowed = CRON_FIELDS[i]
                return f"its {name} field {field!r} {reason} ({allowed})"
        if not CroniterShim.is_valid(cron):
            return "croniter cannot parse it"
    try:
        next(cron_string_iterator(time.time(), cron, "UTC"))
    except Exception:  # croniter's CroniterBadDateError ("failed to find prev date")
        if len(fields) == 5:
            return f"day {fields[2]!r} never occurs in month {fields[3]!r}, so it would never run"
        return "no date matches it, so it would never run"
    return None
