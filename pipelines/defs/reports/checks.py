"""Report invariants: the shape buckets cover every replayed request (no request lost to a gap
in shape_buckets.csv), every what-if scenario replayed exactly the baseline's requests, and each
what-if fleet's GPU-seconds are conserved as the baseline's are."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines.defs.replay.checks import conservation_result
from pipelines.warehouse import run_sql, scalar


@dg.asset_check(asset="shape_spend", blocking=True, additional_deps=["request_costs"])
def every_request_has_a_shape(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """sum(requests) over shapes = baseline requests; a gap or overlap in the bucket edges breaks it."""
    with duckdb.get_connection() as conn:
        shaped = scalar(conn, "SELECT coalesce(sum(requests), 0)::BIGINT FROM shape_spend")
        costed = scalar(conn, "SELECT count(*) FROM request_costs WHERE scenario = 'baseline'")
    description = None if shaped == costed else (
        f"shape_spend counts {shaped:,} requests of the baseline's {costed:,}: the shape_buckets.csv"
        f" edges leave a gap or overlap")
    return dg.AssetCheckResult(passed=shaped == costed, description=description,
                               metadata={"requests_in_shapes": shaped, "baseline_requests": costed})


@dg.asset_check(asset="scenario_stages", blocking=True, additional_deps=["request_stages"])
def every_scenario_replays_every_request(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Each scenario holds exactly the baseline's (trace, request_id) pairs."""
    with duckdb.get_connection() as conn:
        run_sql(conn, "scenario_coverage")
        missing = scalar(conn, "SELECT coalesce(sum(missing_rows), 0)::BIGINT FROM scenario_coverage")
        extra = scalar(conn, "SELECT coalesce(sum(extra_rows), 0)::BIGINT FROM scenario_coverage")
        off = conn.execute("SELECT scenario, missing_rows, extra_rows FROM scenario_coverage"
                           " WHERE missing_rows > 0 OR extra_rows > 0 ORDER BY scenario").fetchall()
    description = "; ".join(f"{name}: {m:,} baseline request(s) missing, {e:,} extra"
                            for name, m, e in off) or None
    return dg.AssetCheckResult(passed=missing == 0 and extra == 0, description=description,
                               metadata={"missing_rows": missing, "extra_rows": extra})


@dg.asset_check(asset="scenario_stages", blocking=True, additional_deps=["scenario_fleets"])
def scenario_gpu_seconds_conserved(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Per what-if fleet, attributed + idle GPU-seconds = its GPUs x replayed span, as
    gpu_seconds_conserved checks for the baseline, and attributed = the fleet's busy GPU-seconds
    (scenario_fleets', summed from its timeline: none is kept per replica), each to its own
    tolerance: the idle seconds are what the what-if's fleet dollars (busy + idle,
    delta_fleet_usd) add to the busy ones."""
    with duckdb.get_connection() as conn:
        run_sql(conn, "scenario_gpu_conservation")
        return conservation_result(conn, "scenario_gpu_conservation", "scenario_gpu_conservation",
                                   "a replayed scenario_fleets row without stages, or stages"
                                   " without a scenario_fleets row", no_fleet_passes=True)
