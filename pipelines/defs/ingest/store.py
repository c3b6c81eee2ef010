"""Per-file writes of ingest results into the warehouse: delete-then-insert, one transaction per
file, so a re-run is idempotent and a file that fails to parse leaves every table as it was.

Kept beside the assets (not in pipelines/warehouse.py) because only ingest writes tables row
range by row range; the SQL is in sql/ingest_delete_*.sql.
"""

from __future__ import annotations

import duckdb
import polars as pl

from pipelines.formats.common import COUNTS, REJECTED_SCHEMA, REQUESTS_SCHEMA, IngestResult
from pipelines.settings import SQL_DIR
from pipelines.warehouse import run_sql

TRACE_FILES_SCHEMA = {
    "file": pl.String, "trace": pl.String, "format": pl.String, "sha256": pl.String,
    "rows_read": pl.Int64, "rows_accepted": pl.Int64, "rows_rejected": pl.Int64,
    **dict.fromkeys(COUNTS, pl.Int64), "prefix_block_tokens": pl.Int64, "options": pl.String,
}
COLUMNS = {"requests": [*REQUESTS_SCHEMA, "line"], "rejected_requests": list(REJECTED_SCHEMA),
           "trace_files": list(TRACE_FILES_SCHEMA)}


def _columns(conn: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
        [table]).fetchall()]


def ensure_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """Create the three ingest tables; a warehouse written by an older release (other columns)
    has them dropped and recreated empty, so every file is ingested again."""
    if any(_columns(conn, t) not in ([], columns) for t, columns in COLUMNS.items()):
        for table in COLUMNS:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    run_sql(conn, "ingest_requests_table")
    for table, schema in (("rejected_requests", REJECTED_SCHEMA), ("trace_files", TRACE_FILES_SCHEMA)):
        conn.register("_empty", pl.DataFrame(schema=schema).to_arrow())
        try:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} AS SELECT * FROM _empty")
        finally:
            conn.unregister("_empty")


def ingested(conn: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """file -> (sha256, sidecar options as canonical JSON) of every file in trace_files: the
    identity a file must keep to be skipped."""
    return {file: (sha256, options) for file, sha256, options in
            conn.execute("SELECT file, sha256, options FROM trace_files").fetchall()}


def _delete(conn: duckdb.DuckDBPyConnection, file: str, trace: str) -> None:
    for step, value in (("ingest_delete_requests", trace), ("ingest_delete_rejected", file),
                        ("ingest_delete_file", file)):
        conn.execute((SQL_DIR / f"{step}.sql").read_text(), [value])


def _insert(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> None:
    conn.register("_incoming", frame.to_arrow())
    try:
        conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _incoming")
    finally:
        conn.unregister("_incoming")


def _insert_requests(conn: duckdb.DuckDBPyConnection, result: IngestResult) -> None:
    """The compact accepted rows go over as Arrow (a few integer columns); DuckDB fills the
    columns the format lacks while it writes, and request_id is a virtual column
    (sql/ingest_requests_table.sql), so the 27M-row canonical frame never exists in memory.
    Same rule as pipelines.formats.common.canonical."""
    present = [c for c in REQUESTS_SCHEMA if c in result.rows.columns]
    cached = [] if "cached_tokens" in present else ["0 AS cached_tokens"]
    conn.register("_incoming", result.rows.to_arrow())
    try:
        conn.execute(f"INSERT INTO requests BY NAME SELECT $trace AS trace, line, "
                     f"{', '.join(present + cached)} FROM _incoming", {"trace": result.trace})
    finally:
        conn.unregister("_incoming")


def replace_file(conn: duckdb.DuckDBPyConnection, result: IngestResult, old_trace: str | None,
                 options: str = "{}") -> None:
    """Swap one file's rows in all three tables, atomically; `options` is the canonical text of
    the file's sidecar options (pipelines/formats/sidecar.py)."""
    row = {**result.file_row(), "options": options}
    conn.execute("BEGIN TRANSACTION")
    try:
        _delete(conn, row["file"], old_trace or row["trace"])
        _insert_requests(conn, result)
        _insert(conn, "rejected_requests", result.rejected)
        _insert(conn, "trace_files", pl.DataFrame([row], schema=TRACE_FILES_SCHEMA))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def forget_file(conn: duckdb.DuckDBPyConnection, file: str, trace: str) -> None:
    conn.execute("BEGIN TRANSACTION")
    _delete(conn, file, trace)
    conn.execute("COMMIT")
