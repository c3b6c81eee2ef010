"""The trace inbox: a sensor on the trace folder (FLEETSPEND_TRACE_DIR) that asks for an ingest
run (and everything downstream of it) when a log file appears, changes or is removed (the run
drops a removed file's rows, and its failed_trace_files entry, so the warehouse mirrors the
folder).

The cursor is the folder's listing as {path: "size:mtime_ns"} (plus the same of the file's
option sidecar, when it has one, so editing a sidecar asks for a run): cheap to take every 60 s even
for GB-sized logs (content hashes are taken by the run itself, which skips files it already
holds, so a touched but unchanged file costs one hash and no rows). As the nightly schedule's
ticks, a file's arrival under a configuration the preflight refuses is skipped with its message
instead of starting a run that would fail, and asks again at every evaluation until it is fixed.
A file modified in the last SETTLE_S seconds (either side of now) is still being written (an
upload): it asks for its run at the first tick after it stops changing, not at every tick while
it grows.
"""

import hashlib
import json
import time
from pathlib import Path

import dagster as dg

from pipelines import settings
from pipelines.defs.preflight import check_run
from pipelines.formats.sidecar import sidecar_of
from pipelines.formats.source import trace_files
from pipelines.ingest_store import INGEST_TABLES
from pipelines.preflight import ConfigurationError

# Calibration is on demand (README "Calibration"): a full replay of the log per least-squares
# evaluation (up to 400 a fit, plus one per fitted factor for each finite-difference Jacobian,
# and up to three fits a log) is not work to repeat for every file that arrives or every night.
ON_DEMAND = dg.AssetSelection.groups("calibration")
INGEST_DOWNSTREAM = dg.AssetSelection.assets(*INGEST_TABLES).downstream() - ON_DEMAND
# The traces, everything downstream of them and the reference data they are priced with (the
# catalog tables and `roofline`, which the replay's checks and the reports join): without it, a
# first run from the inbox on a fresh warehouse failed ("Table with name roofline does not
# exist") until a nightly run had built them. Cheap: a few CSV files.
TRACE_RUN_SELECTION = INGEST_DOWNSTREAM | dg.AssetSelection.groups("reference")
ingest_job = dg.define_asset_job(
    "ingest_new_traces",
    selection=TRACE_RUN_SELECTION,
    description="Ingest new or changed trace files, then replay and report",
)


# A file modified this recently is taken as still being written, and waits for a later tick.
SETTLE_S = 60.0


@dg.sensor(job=ingest_job, minimum_interval_seconds=60, description=(
    "Every 60 s: asks for an ingest_new_traces run (ingest, replay and reports; not the"
    " calibration) when a log file of FLEETSPEND_TRACE_DIR, or its sidecar, appears, changes"
    f" or is removed, once it has not changed for {SETTLE_S:.0f} s; skipped with the"
    " preflight's message while the configuration is bad"))
def trace_inbox_sensor(context: dg.SensorEvaluationContext):
    folder = settings.trace_dir()
    if not folder.is_dir():   # unset, mistyped or unmounted: says nothing of the files, cursor kept
        return dg.SkipReason(f"FLEETSPEND_TRACE_DIR={folder}: no such folder; expected the folder"
                             f" of request logs to watch")
    seen = json.loads(context.cursor) if context.cursor else {}
    listing = {}
    for path in trace_files(folder):
        stamp = _stamp(path)
        if stamp is None:   # removed between the listing and now: not in the folder
            continue
        sidecar = _stamp(sidecar_of(path))
        listing[str(path)] = stamp if sidecar is None else f"{stamp}|{sidecar}"
    changed = sorted(path for path, stamp in listing.items() if seen.get(path) != stamp)
    writing = sorted(path for path in changed if _written_within(Path(path), SETTLE_S))
    new = sorted(set(changed) - set(writing))
    removed = sorted(set(seen) - set(listing))   # the run drops their rows (and failed entries)
    if new or removed:
        try:
            check_run(settings.warehouse_path(), {})
        except ConfigurationError as exc:   # the cursor stays: the files ask again once it is fixed
            return dg.SkipReason(str(exc))
    # A file still being written keeps what the cursor knew of it: it asks again at the next tick.
    cursor = {**listing, **{path: seen.get(path) for path in writing}}
    context.update_cursor(json.dumps({path: stamp for path, stamp in cursor.items() if stamp},
                                     sort_keys=True))
    if not new and not removed:
        if writing:
            return dg.SkipReason(f"still being written (changed in the last {SETTLE_S:g} s): "
                                 f"{', '.join(writing)}; a run is asked for once it stops changing")
        return dg.SkipReason(f"no new, changed or removed trace files in {folder}")
    return dg.RunRequest(run_key=_run_key(context.last_run_key, {p: listing[p] for p in new},
                                          {p: seen[p] for p in removed}),
                         tags={"fleetspend/new_trace_files": str(len(new)),
                               "fleetspend/removed_trace_files": str(len(removed))})


def _run_key(last: str | None, new: dict[str, str], removed: dict[str, str]) -> str:
    """A key for this tick's changes, chained to the sensor's previous run key: the same change
    can come twice (a file moved out of the folder and back keeps its size and mtime), and
    Dagster drops a run request whose key it has already seen, which would leave the file out
    until the nightly run."""
    changes = {"after": last, "new": new, "removed": removed}
    return hashlib.sha256(json.dumps(changes, sort_keys=True).encode()).hexdigest()[:16]


def _written_within(path: Path, seconds: float) -> bool:
    """Whether the log or its sidecar was modified in the last `seconds`: still being uploaded.
    Each tick of a growing file saw a new size, so a log copied in over half an hour asked for
    thirty runs, each ingesting part of it and waiting on the warehouse for the one before.
    Within `seconds` either side of now: a file dated further ahead (unpacked from an archive
    made on a clock a year fast) is not being written, and would otherwise wait until that date."""
    newest = 0.0
    for file in (path, sidecar_of(path)):
        try:
            newest = max(newest, file.stat().st_mtime)
        except FileNotFoundError:
            pass
    return abs(time.time() - newest) < seconds


def _stamp(path) -> str | None:
    """"size:mtime_ns" of a file from one stat; None when it does not exist (or just left)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return f"{info.st_size}:{info.st_mtime_ns}"
