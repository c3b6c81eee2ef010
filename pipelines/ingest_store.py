"""Per-file writes of ingest results into the warehouse: delete-then-insert, one transaction per
file, so a re-run is idempotent and a file that fails to parse leaves every table as it was.

Plain DuckDB, no Dagster (the ingest asset, pipelines/defs/ingest/assets.py, is wiring around
it). The tables are created by sql/ingest_*_table.sql (and the calibration asset's, empty, by
sql/calibration*_table.sql), rows are deleted by sql/ingest_delete_*.sql (a trace's calibration
rows by sql/calibration*_delete_trace.sql); only ingest writes
tables row range by row range. The files a pass could not use are recorded, with their errors,
in failed_trace_files (`record_failures`). A trace whose rows are replaced or removed loses its
calibration rows in the same transaction: they were fitted on the rows that go. The calibration
asset swaps the rows of the traces it fits here too (`replace_calibrated_traces`).
"""

from __future__ import annotations

from datetime import datetime, timezone

import duckdb
import polars as pl

from pipelines.formats.common import COUNTS, DEFAULTS, REJECTED_SCHEMA, REQUESTS_SCHEMA, IngestResult
from pipelines.warehouse import incoming, insert_rows, run_sql, transaction

INGEST_TABLES = ("requests", "rejected_requests", "trace_files")
# The trace_files row of a file (IngestResult.file_row plus its options and when it was
# written), typed as sql/ingest_trace_files_table.sql declares it.
TRACE_FILES_SCHEMA = {
    "file": pl.String, "trace": pl.String, "format": pl.String, "sha256": pl.String,
    "rows_read": pl.Int64, "rows_accepted": pl.Int64, "rows_rejected": pl.Int64,
    **dict.fromkeys(COUNTS, pl.Int64), "prefix_block_tokens": pl.Int64, "reader_version": pl.Int64,
    "options": pl.String, "ingested_at": pl.Datetime("us", "UTC"),
}
# The files the last ingest could not use (sql/ingest_failed_files_table.sql).
FAILED_FILES_SCHEMA = {"file": pl.String, "error": pl.String}
COLUMNS = {"requests": [*REQUESTS_SCHEMA, "line"], "rejected_requests": list(REJECTED_SCHEMA),
           "trace_files": list(TRACE_FILES_SCHEMA), "failed_trace_files": list(FAILED_FILES_SCHEMA)}
TABLE_SQL = {"requests": "ingest_requests_table", "rejected_requests": "ingest_rejected_table",
             "trace_files": "ingest_trace_files_table", "failed_trace_files": "ingest_failed_files_table"}
# The on-demand calibration asset's tables (pipelines/defs/calibration/assets.py), one row set
# per trace: results fitted on that trace's requests, which must not outlive them. Created with
# the ingest tables (table -> sql/<step>.sql, whose CREATE statement is the one place their
# columns are written), empty until calibration runs, so that SQL against them works from the
# first run on; and the view of what calibration replays, handy for SQL too.
CALIBRATION_TABLE_SQL = {"calibration": "calibration_table",
                         "calibration_errors": "calibration_errors_table"}
# table -> sql/<step>.sql deleting one trace's rows
CALIBRATION_DELETE_SQL = {"calibration": "calibration_delete_trace",
                          "calibration_errors": "calibration_errors_delete_trace"}
CALIBRATION_VIEW_SQL = "calibration_requests"


def _columns(conn: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [row[0] for row in run_sql(conn, "ingest_table_columns", [table]).fetchall()]


def _declared_columns(table: str) -> list[str]:
    """The columns sql/<step>.sql declares for calibration table `table`, read by creating it in
    a scratch in-memory database, so the CREATE statement stays their only definition."""
    with duckdb.connect() as scratch:
        run_sql(scratch, CALIBRATION_TABLE_SQL[table])
        return _columns(scratch, table)


def _stale_tables(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables an older release left with other columns, to drop and recreate empty. Any
    ingest table so (COLUMNS): all of them, so every file is ingested again, and the calibration
    tables with them, fitted on rows that are all replaced (and possibly holding traces that left
    the folder while the ingest left calibration alone). Else each calibration table whose
    columns are not those its CREATE statement declares: CREATE TABLE IF NOT EXISTS keeps it."""
    if any(_columns(conn, t) not in ([], columns) for t, columns in COLUMNS.items()):
        return [*COLUMNS, *CALIBRATION_TABLE_SQL]
    return _stale_calibration_tables(conn)


def _stale_calibration_tables(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Each calibration table whose columns are not those its CREATE statement declares."""
    return [t for t in CALIBRATION_TABLE_SQL if _columns(conn, t) not in ([], _declared_columns(t))]


def ensure_tables(conn: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Create the ingest tables (COLUMNS) and, where they do not exist yet, the calibration
    tables and view; first drop those of an older release's shape (`_stale_tables`). Returns
    each table dropped with the rows it held, for the ingest to say: the calibration rows are
    fits that only a calibration run makes again."""
    dropped = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
               for table in _stale_tables(conn) if _columns(conn, table)}
    for table in dropped:
        conn.execute(f"DROP TABLE {table}")
    for step in (*TABLE_SQL.values(), *CALIBRATION_TABLE_SQL.values(), CALIBRATION_VIEW_SQL):
        run_sql(conn, step)
    return dropped


def ensure_calibration_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """The calibration tables as declared, for the calibration asset to replace its traces' rows
    in: created where missing (a warehouse the ingest has not opened since), and dropped and
    created empty where an older release left other columns, as the ingest does."""
    for table in _stale_calibration_tables(conn):
        conn.execute(f"DROP TABLE {table}")
    for step in CALIBRATION_TABLE_SQL.values():
        run_sql(conn, step)


def replace_calibrated_traces(conn: duckdb.DuckDBPyConnection,
                              tables: dict[str, pl.DataFrame], traces: list[str]) -> None:
    """Swap the rows of `traces` in the calibration tables (table -> the new rows, keyed by
    trace) for the new ones, atomically, leaving every other trace's rows: a run that
    calibrates some traces does not erase the others' fits."""
    ensure_calibration_tables(conn)
    with transaction(conn):
        for table, frame in tables.items():
            for trace in traces:
                run_sql(conn, CALIBRATION_DELETE_SQL[table], [trace])
            insert_rows(conn, table, frame)


def ingested(conn: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str, str, int]]:
    """file -> (trace, sha256, sidecar options as canonical JSON, reader version) of every file
    in trace_files; (sha256, options, reader version) is the identity a file must keep to be
    skipped."""
    return {file: (trace, sha256, options, version) for file, trace, sha256, options, version in
            run_sql(conn, "ingest_known_files").fetchall()}


def _delete(conn: duckdb.DuckDBPyConnection, file: str, trace: str) -> int:
    """Remove one file's rows, and its trace's calibration rows: the warehouse mirrors the
    folder, and a fit of rows that are gone would go on describing them. Returns how many
    calibration rows (both tables) went, for the ingest to say: a fit took a calibration run."""
    for step, value in (("ingest_delete_requests", trace), ("ingest_delete_rejected", file),
                        ("ingest_delete_file", file)):
        run_sql(conn, step, [value])
    return sum(run_sql(conn, step, [trace]).fetchone()[0] for step in CALIBRATION_DELETE_SQL.values())


def _insert_requests(conn: duckdb.DuckDBPyConnection, result: IngestResult) -> None:
    """The compact accepted rows go over as Arrow (a few integer columns); DuckDB fills the
    columns the format lacks while it writes (DEFAULTS of pipelines.formats.common, the rest
    null), and request_id is a virtual column (sql/ingest_requests_table.sql), so the 27M-row
    canonical frame never exists in memory. Same result as pipelines.formats.common.canonical."""
    present = [c for c in REQUESTS_SCHEMA if c in result.rows.columns]
    defaults = [f"{int(value)} AS {name}" for name, value in DEFAULTS.items() if name not in present]
    with incoming(conn, result.rows):
        conn.execute(f"INSERT INTO requests BY NAME SELECT $trace AS trace, line, "
                     f"{', '.join(present + defaults)} FROM _incoming", {"trace": result.trace})


def replace_file(conn: duckdb.DuckDBPyConnection, result: IngestResult, old_trace: str | None,
                 options: str = "{}") -> int:
    """Swap one file's rows in the ingest tables, atomically (`_delete` first); `options` is the
    canonical text of the file's sidecar options (pipelines/formats/sidecar.py). The row records
    when: should the file later fail to read, the summary says from when the rows the reports
    still show are. Returns the calibration rows removed with the old rows."""
    row = {**result.file_row(), "options": options, "ingested_at": datetime.now(timezone.utc)}
    with transaction(conn):
        removed = _delete(conn, row["file"], old_trace or row["trace"])
        _insert_requests(conn, result)
        insert_rows(conn, "rejected_requests", result.rejected)
        insert_rows(conn, "trace_files", pl.DataFrame([row], schema=TRACE_FILES_SCHEMA))
    return removed


def forget_file(conn: duckdb.DuckDBPyConnection, file: str, trace: str) -> int:
    """Remove one file's rows, atomically (`_delete`; a failure leaves them all); returns the
    calibration rows removed with them."""
    with transaction(conn):
        return _delete(conn, file, trace)


def record_failures(conn: duckdb.DuckDBPyConnection, failed: dict[str, str]) -> None:
    """Make failed_trace_files this ingest's failures (file path -> error), atomically. A failed
    file keeps its previous rows, which the reports go on showing; the summary and the report
    read this table to say so, since they never see the run's log or asset checks."""
    frame = pl.DataFrame({"file": list(failed), "error": list(failed.values())},
                         schema=FAILED_FILES_SCHEMA)
    with transaction(conn):
        run_sql(conn, "ingest_clear_failed_files")
        insert_rows(conn, "failed_trace_files", frame)
