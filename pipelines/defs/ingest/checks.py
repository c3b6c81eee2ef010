"""Ingest invariant: for every file, rows read = accepted + rejected, and the tables agree."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines.reports.text import markdown_table
from pipelines.warehouse import run_sql


@dg.asset_check(asset="requests", blocking=True, additional_deps=["rejected_requests", "trace_files"])
def rows_read_equal_accepted_plus_rejected(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Per trace file, the rows read = the rows accepted + the rows rejected, and requests and
    rejected_requests hold exactly those rows (sql/ingest_balance.sql): no row lost or counted
    twice by the ingest. A failure stops the run, which then publishes nothing: its description
    (one line in the run log) names each unbalanced file and its counts."""
    with duckdb.get_connection() as conn:
        run_sql(conn, "ingest_balance")
        balance = conn.sql("SELECT * FROM ingest_balance ORDER BY file").pl()
    bad = balance.filter(~balance["balanced"])
    shown = balance.with_columns(balanced=pl.when("balanced").then(pl.lit("yes")).otherwise(pl.lit("NO")))
    description = "; ".join(
        f"{r['file']}: {r['rows_read']:,} rows read, {r['rows_accepted']:,} accepted +"
        f" {r['rows_rejected']:,} rejected, but requests holds {r['requests_rows']:,} and"
        f" rejected_requests {r['rejected_rows']:,}" for r in bad.iter_rows(named=True)) or None
    return dg.AssetCheckResult(
        passed=bad.height == 0,
        description=description,
        metadata={
            "files": balance.height,
            "unbalanced_files": bad["file"].to_list(),
            "per_file": dg.MetadataValue.md(markdown_table(shown, {c: c for c in shown.columns})),
        },
    )
