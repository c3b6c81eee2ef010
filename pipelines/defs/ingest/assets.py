"""Ingest: the trace folder -> requests, rejected_requests, trace_files, one file at a time.

Incremental and idempotent, keyed by content: a file whose sha256 is already in trace_files is
skipped; a new or changed file has its rows swapped in (one transaction per file); a file that
left the folder has its rows removed, so the warehouse mirrors the folder. A file that is not a
trace fails alone: its error is logged and listed in the metadata, nothing of it is written,
it is tried again on the next run, and the non-blocking check `every_trace_file_ingested` fails
until it reads (non-blocking, so the other files' rows still flow to replay and the reports).
A file's identity is its content hash plus its sidecar options (pipelines/formats/sidecar.py).
"""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.formats import TraceFormatError, read_trace
from pipelines.formats.common import sha256_of, trace_name
from pipelines.formats.sidecar import canonical, file_options, raw_options, sidecar_of
from pipelines.formats.source import trace_files
from pipelines.ingest_store import INGEST_TABLES, ensure_tables, forget_file, ingested, replace_file


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
        description="Fails while a file of the trace folder cannot be ingested; its metadata names "
                    "each such file and why"),
    ],
)
def ingested_traces(context: dg.AssetExecutionContext, duckdb: DuckDBResource):
    """Ingest every new or changed log file in FLEETSPEND_TRACE_DIR (default data/samples)."""
    folder = settings.trace_dir()
    files = trace_files(folder)
    if not files:
        raise dg.Failure(f"no trace files (*.csv, *.jsonl, *.json, *.parquet, optionally .gz/.zst) in {folder}; "
                         f"set FLEETSPEND_TRACE_DIR to your logs")
    added, failed = [], {}
    with duckdb.get_connection() as conn:
        ensure_tables(conn)
        known = ingested(conn)
        traces = {file: trace for file, (trace, *_) in known.items()}
        identity = {file: tuple(rest) for file, (_, *rest) in known.items()}
        for gone in sorted(set(known) - {str(f) for f in files}):
            forget_file(conn, gone, traces[gone])
            context.log.info(f"{gone}: no longer in {folder}; its rows were removed")
        claimed = {traces[f]: f for f in traces if f in {str(p) for p in files}}
        for file in files:
            try:
                options = raw_options(file)
                unchanged = identity.get(str(file)) == (sha256_of(file), canonical(options))
            except ValueError as exc:
                failed[file.name] = str(exc)
                continue
            except OSError as exc:  # unreadable (permissions, I/O): this file fails alone
                failed[file.name] = f"{file}: cannot be read ({exc.strerror or exc})"
                continue
            if unchanged:
                continue
            owner = claimed.get(trace_name(file))
            if owner not in (None, str(file)):
                failed[file.name] = f"{file}: its trace name {trace_name(file)!r} is taken by {owner}; rename one"
                continue
            try:
                result = read_trace(file, **file_options(file))
            except (TraceFormatError, ValueError) as exc:
                sidecar = str(sidecar_of(file))
                failed[file.name] = f"{exc} (options from {sidecar})" if options and sidecar not in str(exc) else str(exc)
                continue
            except OSError as exc:
                failed[file.name] = f"{file}: cannot be read ({exc.strerror or exc})"
                continue
            replace_file(conn, result, traces.get(str(file)), canonical(options))
            claimed[result.trace] = str(file)
            added.append(result.file_row())
            context.log.info(f"{file.name}: {result.format}, {result.rows_read} rows read, "
                             f"{result.rows.height} accepted, {result.rejected.height} rejected")
        for message in failed.values():
            context.log.error(message)
        for table in INGEST_TABLES:
            yield dg.MaterializeResult(asset_key=table, metadata=_metadata(conn, table, added, failed))
    yield _failed_files_check(folder, len(files), failed)


def _failed_files_check(folder, total: int, failed: dict) -> dg.AssetCheckResult:
    listed = "\n".join(f"- `{name}`: {reason}" for name, reason in sorted(failed.items()))
    return dg.AssetCheckResult(
        check_name="every_trace_file_ingested", asset_key="trace_files", passed=not failed,
        metadata={
            "folder": dg.MetadataValue.path(str(folder)),
            "files": dg.MetadataValue.int(total),
            "failed_files": dg.MetadataValue.json(sorted(failed)),
            "reasons": dg.MetadataValue.md(listed or "every file ingested"),
        },
    )


def _metadata(conn, table: str, added: list[dict], failed: dict) -> dict:
    metadata = table_metadata(conn, table, exclude=("prefix_hashes",) if table == "requests" else ())
    if table == "trace_files":
        metadata["files_ingested_this_run"] = dg.MetadataValue.int(len(added))
        metadata["files_failed"] = dg.MetadataValue.json(failed)
    return metadata
