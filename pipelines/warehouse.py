"""Moving tables in and out of the DuckDB warehouse, and running the SQL steps in sql/.

Plain DuckDB: the Dagster layer hands in a connection from DuckDBResource, tests hand in their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import polars as pl

from pipelines.settings import SQL_DIR

# Write the warehouse in DuckDB 1.5 storage format, so the `duckdb` shell (duckdb-cli, the newest
# CLI on PyPI, 1.5.x) can open it; the Python package (2.x) reads and writes it either way.
# One thread: parallel aggregation adds doubles in a run-dependent order, so two runs on the
# same input would differ in the last bits; with one thread every table is reproducible exactly
# (rerunning a partition is idempotent to the bit). On this 2-core target the single-threaded
# replay dominates a run anyway.
WAREHOUSE_CONFIG = {"storage_compatibility_version": "v1.5.0", "threads": 1}

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


def _checked(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"table name {name!r}: expected lower-case letters, digits and underscores")
    return name


@contextmanager
def incoming(conn: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> Iterator[None]:
    """`frame` visible to SQL as the view `_incoming` (through Arrow, no copy) for the block."""
    conn.register("_incoming", frame.to_arrow())
    try:
        yield
    finally:
        conn.unregister("_incoming")


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The block's statements in one transaction: committed together, or rolled back together
    on any exception (an interrupt included)."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def write_table(conn: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> int:
    """Replace table `name` with `frame` (types carried over through Arrow); returns its rows."""
    table = _checked(name)
    with incoming(conn, frame):
        conn.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM _incoming")
    return frame.height


def insert_rows(conn: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    """Add `frame`'s rows to table `name`, matching columns by name (the table's others null)."""
    table = _checked(name)
    with incoming(conn, frame):
        conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _incoming")


def run_sql(conn: duckdb.DuckDBPyConnection, step: str,
            params: list | None = None) -> duckdb.DuckDBPyConnection:
    """Run sql/<step>.sql (one statement: it creates or replaces one table or view, writes rows,
    or selects), with `params` bound to its $1, $2, ...; returns the connection, so the caller
    can fetch what a SELECT returned (fetch it all: see `scalar`)."""
    return conn.execute((SQL_DIR / f"{_checked(step)}.sql").read_text(), params or [])


def read_table(conn: duckdb.DuckDBPyConnection, name: str) -> pl.DataFrame:
    return conn.sql(f"SELECT * FROM {_checked(name)}").pl()


def head(conn: duckdb.DuckDBPyConnection, name: str, rows: int,
         exclude: tuple[str, ...] = ()) -> pl.DataFrame:
    """The first `rows` rows of table `name` without the `exclude` columns (read with LIMIT, not
    the whole table)."""
    dropped = f" EXCLUDE ({', '.join(_checked(c) for c in exclude)})" if exclude else ""
    return conn.sql(f"SELECT *{dropped} FROM {_checked(name)} LIMIT {int(rows)}").pl()


def scalar(conn: duckdb.DuckDBPyConnection, query: str, params: list | None = None):
    """The single value of a one-row, one-column query. (DuckDB 2 refuses further work on a
    connection whose last result was only partly fetched, so this fetches it all.)"""
    return conn.execute(query, params or []).fetchall()[0][0]


def row_count(conn: duckdb.DuckDBPyConnection, name: str) -> int:
    return scalar(conn, f"SELECT count(*) FROM {_checked(name)}")


def stage_rows(conn: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame, *, first: bool) -> None:
    """Add `frame` to the temporary table staged_<name> (created anew when `first`). Temporary
    tables live only as long as the connection: an interrupted run leaves nothing behind."""
    table = f"staged_{_checked(name)}"
    with incoming(conn, frame):
        if first:
            conn.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM _incoming")
        else:
            conn.execute(f"INSERT INTO {table} SELECT * FROM _incoming")


def publish_staged(conn: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """Replace each table `name` by staged_<name>, all in one transaction: readers see either
    the old set of tables or the new one, never a mix."""
    with transaction(conn):
        for name in names:
            conn.execute(f"CREATE OR REPLACE TABLE {_checked(name)} AS SELECT * FROM staged_{name}")
    for name in names:
        conn.execute(f"DROP TABLE staged_{name}")
