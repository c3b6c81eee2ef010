"""Ingest invariant: for every file, rows read = accepted + rejected, and the tables agree."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines.warehouse import run_sql, scalar


@dg.asset_check(asset="requests", blocking=True, additional_deps=["rejected_requests", "trace_files"])
def rows_read_equal_accepted_plus_rejected(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        run_sql(conn, "ingest_balance")
        bad = conn.sql("SELECT * FROM ingest_balance WHERE NOT balanced").pl()
        files = scalar(conn, "SELECT count(*) FROM ingest_balance")
    return dg.AssetCheckResult(
        passed=bad.height == 0,
        metadata={"files": files, "unbalanced_files": bad["file"].to_list()},
    )
