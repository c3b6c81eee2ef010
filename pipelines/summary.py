"""`python -m pipelines.summary`: print the fleet summary and the top request shapes from the
warehouse (read-only), and say where the warehouse and the report files are."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from pipelines import settings
from pipelines.reports.text import SHAPE_COLUMNS, headline, markdown_table, summary_lines
from pipelines.warehouse import read_table


def main(top: int = 10) -> int:
    path = settings.warehouse_path()
    if not path.exists():
        print(f"fleetspend: no warehouse at {path}; run `make demo` first", file=sys.stderr)
        return 1
    with duckdb.connect(str(path), read_only=True) as conn:
        try:
            summary = read_table(conn, "fleet_summary")
            shapes = read_table(conn, "shape_spend")
        except duckdb.CatalogException:
            print(f"fleetspend: {path} has no report tables yet; run `make demo`", file=sys.stderr)
            return 1
    columns = {k: v for k, v in SHAPE_COLUMNS.items() if k not in ("cum_pct_spend", "bound")}
    print("\n== Fleet summary ==")
    print("\n".join(summary_lines(summary)))
    print(f"\n== Top {top} request shapes by share of spend ==")
    print(markdown_table(shapes.sort("rank").head(top), columns))
    print("\n" + headline(summary, shapes))
    reports = settings.reports_dir()
    shell = Path(sys.executable).with_name("duckdb")
    print(f"\nWarehouse: {path}\n  query it: {shell} -readonly {path} \"FROM shape_spend LIMIT 5\"")
    print(f"Reports:   {reports / 'report.md'}, {reports / 'spend_share.png'}, "
          f"{reports / 'spend_share.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
