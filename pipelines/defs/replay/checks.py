"""Replay invariants: stages are non-negative, TTFT covers prefill, GPU-seconds are conserved."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines.warehouse import run_sql, scalar

CONSERVATION_TOLERANCE = 1e-9


@dg.asset_check(asset="request_stages", blocking=True)
def no_negative_stage(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        run_sql(conn, "negative_stages")
        bad = scalar(conn, "SELECT count(*) FROM negative_stages")
    return dg.AssetCheckResult(passed=bad == 0, metadata={"bad_rows": bad})


@dg.asset_check(asset="request_stages", blocking=True)
def ttft_covers_prefill(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        bad = scalar(conn, "SELECT count(*) FROM request_stages WHERE ttft_s < prefill_s")
    return dg.AssetCheckResult(passed=bad == 0, metadata={"bad_rows": bad})


@dg.asset_check(asset="request_stages", blocking=True, additional_deps=["fleet_timeline", "roofline"])
def gpu_seconds_conserved(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """attributed + idle GPU-seconds = replicas x GPUs per replica x replayed span, per fleet."""
    with duckdb.get_connection() as conn:
        run_sql(conn, "gpu_conservation")
        worst = scalar(conn, "SELECT max(abs(relative_error)) FROM gpu_conservation")
        fleets = scalar(conn, "SELECT count(*) FROM gpu_conservation")
    return dg.AssetCheckResult(
        passed=worst is not None and worst <= CONSERVATION_TOLERANCE,
        metadata={"fleets": fleets, "worst_relative_error": float(worst or 0.0),
                  "tolerance": CONSERVATION_TOLERANCE},
    )
