"""Ingest: the trace folder -> requests, rejected_requests, trace_files, one file at a time.

The work is pipelines/ingest_folder.py (incremental by content hash, sidecar options and reader
rules, a file that cannot be used fails alone, the warehouse mirrors the folder); this asset
lists the folder, logs, and records what happened: table metadata, and the non-blocking check
`every_trace_file_ingested`, which fails until every file reads (non-blocking, so the other
files' rows still flow to replay and the reports). The failures are also in the warehouse
(failed_trace_files, written by ingest_folder), where the summary and the report read them.
"""

from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.formats.source import TRACE_NAMES, UNREAD_KINDS, folder_mark, trace_files, unread_files
from pipelines.ingest_folder import FolderIngest, duplicate_lines, ingest_folder
from pipelines.ingest_store import CALIBRATION_TABLE_SQL, COLUMNS, INGEST_TABLES, ensure_tables


@dg.multi_asset(
    specs=[
        dg.AssetSpec("requests", group_name="ingest",
                     description="Canonical request rows (DESIGN.md), one trace per file"),
        dg.AssetSpec("rejected_requests", group_name="ingest",
                     description="Rows that could not be used: file, line, raw text, reason"),
        dg.AssetSpec("trace_files", group_name="ingest",
                     description="One row per file: format, sha256, rows read / accepted / rejected, "
                                 "policy counts"),
    ],
    check_specs=[dg.AssetCheckSpec(
        "every_trace_file_ingested", asset="trace_files",
        description="Fails while a file of the trace folder cannot be ingested, naming the first; "
                    "its metadata names each such file and why"),
    ],
)
def ingested_traces(context: dg.AssetExecutionContext, duckdb: DuckDBResource):
    """Ingest every new or changed log file in FLEETSPEND_TRACE_DIR (default data/samples)."""
    folder = settings.trace_dir()
    files = trace_files(folder)
    if not files:
        raise dg.Failure(f"no trace files ({TRACE_NAMES}) in {folder}; "
                         f"set FLEETSPEND_TRACE_DIR to your logs")
    with duckdb.get_connection() as conn:
        dropped = ensure_tables(conn)
        if dropped:
            context.log.warning(_rebuilt_line(dropped))
        outcome = ingest_folder(conn, files, context.log.info)
        outcome.calibration_rows_removed += sum(dropped.get(t, 0) for t in CALIBRATION_TABLE_SQL)
        for message in outcome.failed.values():
            context.log.error(message)
        context.log.info(_pass_line(folder, len(files), outcome))
        for line in duplicate_lines(conn):
            context.log.warning(line)
        unread = unread_files(folder)
        if unread:
            context.log.warning(f"{folder}: not read, {UNREAD_KINDS}:"
                                f" {', '.join(p.name + folder_mark(p) for p in unread)}")
        for table in INGEST_TABLES:
            yield dg.MaterializeResult(asset_key=table, metadata=_metadata(conn, table, outcome))
    yield _failed_files_check(folder, len(files), _by_name(outcome.failed))


def _pass_line(folder, total: int, outcome: FolderIngest) -> str:
    """One line for the whole pass: a quiet night reads no file and logs no file line, and the
    run log must still show the ingest saw the folder and what it held."""
    unchanged = total - len(outcome.added) - len(outcome.failed)
    return (f"{folder}: {total} trace file(s): {len(outcome.added)} read, {unchanged} unchanged"
            f" since they were ingested, {len(outcome.failed)} failed; {len(outcome.removed)}"
            f" removed from the folder")


def _rebuilt_line(dropped: dict[str, int]) -> str:
    """What the first run of a release whose tables have other columns did to the warehouse:
    the files' rows come back from the folder, the calibration's fits do not."""
    line = (f"tables an older release wrote with other columns were dropped and created anew"
            f" ({', '.join(dropped)})")
    if set(dropped) & set(COLUMNS):
        line += ": every trace file is read again"
    fits = sum(dropped.get(t, 0) for t in CALIBRATION_TABLE_SQL)
    if fits:
        line += (f", and the {fits:,} calibration rows they held are gone: materialize the"
                 f" calibration again")
    return line


def _by_name(failed: dict[str, str]) -> dict[str, str]:
    """File name -> reason, from file path -> reason: every file is in the one folder, which the
    check's metadata gives, so the UI lists the names."""
    return {Path(file).name: reason for file, reason in failed.items()}


def _failed_files_check(folder, total: int, failed: dict) -> dg.AssetCheckResult:
    """The description is the line the UI shows on the failed check (its page, the run log):
    how many files failed and the first one's reason, so no one has to open the metadata to
    learn which upload is broken; `reasons` lists them all."""
    # each reason starts with the file it names (the ingest's messages do)
    reasons = [reason for _, reason in sorted(failed.items())]
    listed = "\n".join(f"- {reason}" for reason in reasons)
    description = (f"{len(reasons)} of {total} trace file(s) could not be ingested (each in"
                   f" reasons), first {reasons[0]}" if reasons else None)
    return dg.AssetCheckResult(
        check_name="every_trace_file_ingested", asset_key="trace_files", passed=not failed,
        description=description,
        metadata={
            "folder": dg.MetadataValue.path(str(folder)),
            "files": dg.MetadataValue.int(total),
            "failed_files": dg.MetadataValue.json(sorted(failed)),
            "reasons": dg.MetadataValue.md(listed or "every file ingested"),
        },
    )


def _metadata(conn, table: str, outcome: FolderIngest) -> dict:
    metadata = table_metadata(conn, table, exclude=("prefix_hashes",) if table == "requests" else ())
    if table == "trace_files":
        metadata["files_ingested_this_run"] = dg.MetadataValue.int(len(outcome.added))
        metadata["files_removed_this_run"] = dg.MetadataValue.json(outcome.removed)
        metadata["calibration_rows_removed_this_run"] = dg.MetadataValue.int(
            outcome.calibration_rows_removed)
        metadata["files_failed"] = dg.MetadataValue.json(_by_name(outcome.failed))
    return metadata
