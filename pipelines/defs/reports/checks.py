"""Report invariants: the shape buckets cover every request (no request lost to a gap in
shape_buckets.csv), and every what-if scenario replayed every request."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines.warehouse import scalar


@dg.asset_check(asset="shape_spend", blocking=True, additional_deps=["request_costs"])
def every_request_has_a_shape(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """sum(requests) over shapes = baseline requests; a gap or overlap in the bucket edges breaks it."""
    with duckdb.get_connection() as conn:
        shaped = scalar(conn, "SELECT coalesce(sum(requests), 0)::BIGINT FROM shape_spend")
        costed = scalar(conn, "SELECT count(*) FROM request_costs WHERE scenario = 'baseline'")
    return dg.AssetCheckResult(passed=shaped == costed,
                               metadata={"requests_in_shapes": shaped, "baseline_requests": costed})


@dg.asset_check(asset="scenario_stages", blocking=True, additional_deps=["request_stages"])
def every_scenario_replays_every_request(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Each scenario holds exactly the baseline's (trace, request_id) pairs."""
    with duckdb.get_connection() as conn:
        missing = scalar(conn, """
            SELECT count(*) FROM (SELECT DISTINCT scenario FROM scenario_stages) AS sc
            CROSS JOIN (SELECT trace, request_id FROM request_stages WHERE scenario = 'baseline') AS b
            ANTI JOIN scenario_stages AS s
              ON s.scenario = sc.scenario AND s.trace = b.trace AND s.request_id = b.request_id""")
        extra = scalar(conn, """
            SELECT count(*) FROM scenario_stages AS s
            ANTI JOIN request_stages AS b
              ON b.scenario = 'baseline' AND b.trace = s.trace AND b.request_id = s.request_id""")
    return dg.AssetCheckResult(passed=missing == 0 and extra == 0,
                               metadata={"missing_rows": missing, "extra_rows": extra})
