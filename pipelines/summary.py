"""`python -m pipelines.summary`: print the fleet summary, the top request shapes and the what-if
savings from the warehouse (read-only), and say where the warehouse and the report files are.
The physics caveats of what it prices come first, before any dollar figure (the report puts a
what-if fleet's under its table; here every caveat leads, a what-if one named as such). Before
reading, it checks the warehouse has every table and column it reads (`READS`), so a warehouse an
older release built gets one line naming what it lacks, not a traceback halfway through."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb
import polars as pl

from pipelines import settings
from pipelines.formats.source import trace_files
from pipelines.reports.text import (
    HEADLINE_COLUMNS,
    REPORT_TABLES,
    SHAPE_COLUMNS,
    SUMMARY_LINE_COLUMNS,
    WHAT_IF_COLUMNS,
    ReportTables,
    headline,
    markdown_table,
    summary_lines,
)
from pipelines.warehouse import run_sql

# The report's shape and what-if tables, narrowed to what fits a terminal.
SHAPES_SHOWN = {k: v for k, v in SHAPE_COLUMNS.items()
                if k not in ("cum_pct_spend", "bound", "usd_per_1m_output_tokens", "lever", "cost_lever")}
WHAT_IFS_SHOWN = {k: v for k, v in WHAT_IF_COLUMNS.items() if k != "change"}


def _union(*parts: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Table -> every column any of `parts` names for it."""
    merged: dict[str, frozenset[str]] = {}
    for part in parts:
        for table, columns in part.items():
            merged[table] = merged.get(table, frozenset()) | frozenset(columns)
    return merged


# Every table and column the summary reads, checked before it reads any (`lacking`).
READS = _union(
    {table: () for table in REPORT_TABLES},  # ReportTables.read reads each one whole
    {"fleet_summary": SUMMARY_LINE_COLUMNS, "shape_spend": SHAPES_SHOWN,
     "what_if": ("shape", *WHAT_IFS_SHOWN)},
    HEADLINE_COLUMNS,
    {"roofline": ("deployment", "caveat"), "request_stages": ("deployment", "scenario"),
     "scenario_fleets": ("scenario", "caveat")},  # sql/report_caveats.sql
    {"trace_files": ("file",)},
)


def lacking(conn: duckdb.DuckDBPyConnection,
            reads: Mapping[str, frozenset[str]]) -> list[tuple[str, str | None]]:
    """(table, None) for each table of `reads` the warehouse lacks and (table, column) for each
    column, from information_schema before any table is read: a warehouse an older release built
    is then named for what it lacks, and a KeyError while printing stays the bug it is."""
    present: dict[str, set[str]] = {}
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_catalog = current_database() AND table_schema = current_schema()").fetchall():
        present.setdefault(table, set()).add(column)
    lacks: list[tuple[str, str | None]] = []
    for table, columns in sorted(reads.items()):
        if table not in present:
            lacks.append((table, None))
        else:
            lacks += [(table, column) for column in sorted(columns - present[table])]
    return lacks


def lack_message(path: Path, lacks: list[tuple[str, str | None]]) -> str:
    """One line for what `lacking` found: a warehouse with no report table at all was never
    built this far; one that lacks some was built by another release (or by hand)."""
    if {table for table, column in lacks if column is None} >= set(REPORT_TABLES):
        return f"fleetspend: {path} has no report tables yet; run `make demo`"
    what = "; ".join(f"table {table}" if column is None else f"column {column} of table {table}"
                     for table, column in lacks)
    return (f"fleetspend: {path} lacks {what}, which the summary reads; rebuild the warehouse with"
            f" this release (`make demo`, or the nightly job)")


def main(top: int = 10) -> int:
    """Print the summary; 1, with one line on stderr, where there is nothing to summarize: no
    warehouse, a file that is not one, or one without a table or column the summary reads."""
    path = settings.warehouse_path()
    if not path.exists():
        print(f"fleetspend: no warehouse at {path}; run `make demo` first", file=sys.stderr)
        return 1
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            lacks = lacking(conn, READS)
            if lacks:
                print(lack_message(path, lacks), file=sys.stderr)
                return 1
            tables = ReportTables.read(conn)
            caveats = run_sql(conn, "report_caveats").fetchall()
            ingested = {file for (file,) in conn.sql("SELECT file FROM trace_files").fetchall()}
    except duckdb.Error as exc:  # not a DuckDB file, or held by another process
        print(f"fleetspend: cannot read the warehouse {path}: {str(exc).splitlines()[0]}",
              file=sys.stderr)
        return 1
    _print_summary(path, tables, caveats, ingested, top)
    return 0


def _print_summary(path: Path, tables: ReportTables, caveats: list[tuple[str, str]],
                   ingested: set[str], top: int) -> None:
    """The summary on stdout. It runs after `lacking` found every column it reads, so an error
    here is a bug of the summary, and it propagates as one."""
    folder = settings.trace_dir()
    # only for the folder the warehouse was built from (a summary run by hand with another
    # FLEETSPEND_TRACE_DIR would otherwise call every file missing)
    built_here = any(Path(file).parent == folder for file in ingested)
    missing = [f.name for f in trace_files(folder) if str(f) not in ingested] if built_here else []
    if missing:
        print(f"\n== Not in the warehouse: {len(missing)} file(s) of {folder} ==\n"
              f"{', '.join(missing)}\n(a file the last run could not ingest, whose reason is on"
              f" its every_trace_file_ingested check and in the run log, or one added since)")
    if caveats:
        print("\n== Physics caveats (docs/physics.md section 5) ==")
        print("\n".join(f"- {text}" for _, text in caveats))
    print("\n== Fleet summary ==")
    print("\n".join(f"- {line}" for line in summary_lines(tables.fleet_summary)))
    print(f"\n== Top {top} request shapes by share of spend ==")
    print(markdown_table(tables.shape_spend.sort("rank").head(top), SHAPES_SHOWN))
    print("\n== What-if replays (all shapes) ==")
    print(markdown_table(tables.what_if.filter(pl.col("shape") == "all").sort("delta_usd_per_day"),
                         WHAT_IFS_SHOWN))
    print("\n" + headline(tables))
    reports = settings.reports_dir()
    shell = Path(sys.executable).with_name("duckdb")
    print(f"\nWarehouse: {path}\n  query it: {shell} -readonly {path} \"FROM shape_spend LIMIT 5\"")
    print(f"Reports:   {reports / 'report.html'}, {reports / 'report.md'} (charts beside them)")


if __name__ == "__main__":
    sys.exit(main())
