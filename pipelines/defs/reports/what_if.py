"""What-if replays: every scenario of data/reference/scenarios.csv replayed on the same traces as
the baseline -> scenario_stages (request_stages columns per scenario) and scenario_fleets."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.reports.scenarios import ScenarioError, load_scenarios, replay_scenarios
from pipelines.roofline import CatalogError, load_catalog
from pipelines.warehouse import read_table, scalar, write_table


@dg.multi_asset(
    specs=[
        dg.AssetSpec("scenario_stages", group_name="reports", deps=["requests", "request_stages"],
                     description="Per scenario and request: the request_stages columns of a what-if replay"),
        dg.AssetSpec("scenario_fleets", group_name="reports", deps=["requests", "request_stages"],
                     description="Per scenario and trace: the deployment replayed, its price, span and idle GPU-s"),
    ],
)
def scenario_replays(context: dg.AssetExecutionContext, duckdb: DuckDBResource):
    """Replay each trace once per scenario, on the baseline deployment with the scenario's
    changes, each trace on its own fleet as in the baseline (pipelines/reports/scenarios.py)."""
    catalog = load_catalog(settings.reference_dir())
    with duckdb.get_connection() as conn:
        requests = read_table(conn, "requests")
        base_name = scalar(conn, "SELECT min(deployment) FROM request_stages WHERE scenario = 'baseline'")
    try:
        scenarios = load_scenarios(settings.reference_dir() / "scenarios.csv")
        stages, fleets = replay_scenarios(requests, catalog, catalog.deployment(base_name), scenarios)
    except (ScenarioError, CatalogError) as exc:
        raise dg.Failure(str(exc)) from None
    context.log.info(f"replayed {requests.height} requests in each of {len(scenarios)} scenarios "
                     f"on {base_name} with changes")
    with duckdb.get_connection() as conn:
        write_table(conn, "scenario_stages", stages)
        write_table(conn, "scenario_fleets", fleets)
        for table in ("scenario_stages", "scenario_fleets"):
            yield dg.MaterializeResult(asset_key=table, metadata=table_metadata(conn, table))
