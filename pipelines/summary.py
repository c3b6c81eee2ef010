"""`python -m pipelines.summary`: print the fleet summary, the top request shapes and the what-if
savings from the warehouse (read-only), and say where the warehouse and the report files are.
The physics caveats of what it prices come first, before any dollar figure (the report puts a
what-if fleet's under its table; here every caveat leads, a what-if one named as such)."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import polars as pl

from pipelines import settings
from pipelines.formats.source import trace_files
from pipelines.reports.text import (
    SHAPE_COLUMNS,
    WHAT_IF_COLUMNS,
    ReportTables,
    headline,
    markdown_table,
    summary_lines,
)
from pipelines.warehouse import run_sql


def main(top: int = 10) -> int:
    try:
        return _print_summary(top)
    except (KeyError, pl.exceptions.ColumnNotFoundError) as exc:
        print(f"fleetspend: the report tables in {settings.warehouse_path()} lack {exc}: they were"
              f" built by an older release; rebuild them with `make demo` (or the nightly job)",
              file=sys.stderr)
        return 1


def _print_summary(top: int) -> int:
    path = settings.warehouse_path()
    if not path.exists():
        print(f"fleetspend: no warehouse at {path}; run `make demo` first", file=sys.stderr)
        return 1
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            tables = ReportTables.read(conn)
            caveats = run_sql(conn, "report_caveats").fetchall()
            ingested = {file for (file,) in conn.sql("SELECT file FROM trace_files").fetchall()}
    except duckdb.CatalogException:
        print(f"fleetspend: {path} has no report tables yet; run `make demo`", file=sys.stderr)
        return 1
    except duckdb.Error as exc:  # not a DuckDB file, or held by another process
        print(f"fleetspend: cannot read the warehouse {path}: {str(exc).splitlines()[0]}",
              file=sys.stderr)
        return 1
    shape_columns = {k: v for k, v in SHAPE_COLUMNS.items()
                     if k not in ("cum_pct_spend", "bound", "usd_per_1m_output_tokens", "lever",
                                  "cost_lever")}
    what_if_columns = {k: v for k, v in WHAT_IF_COLUMNS.items() if k != "change"}
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
    print(markdown_table(tables.shape_spend.sort("rank").head(top), shape_columns))
    print("\n== What-if replays (all shapes) ==")
    print(markdown_table(tables.what_if.filter(pl.col("shape") == "all").sort("delta_usd_per_day"),
                         what_if_columns))
    print("\n" + headline(tables))
    reports = settings.reports_dir()
    shell = Path(sys.executable).with_name("duckdb")
    print(f"\nWarehouse: {path}\n  query it: {shell} -readonly {path} \"FROM shape_spend LIMIT 5\"")
    print(f"Reports:   {reports / 'report.html'}, {reports / 'report.md'} (charts beside them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
