"""What-if replays: every scenario of data/reference/scenarios.csv replayed on the same traces as
the baseline -> scenario_stages (request_stages columns per scenario) and scenario_fleets."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource
from duckdb import CatalogException

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.defs.replay.assets import hash_tokens_by_trace
from pipelines.reports.scenarios import FLEET_SCHEMA, ScenarioError, load_scenarios, replay_scenarios
from pipelines.roofline import CatalogError, load_catalog
from pipelines.warehouse import publish_staged, read_table, scalar, stage_rows

SCENARIO_TABLES = ["scenario_stages", "scenario_fleets"]


@dg.multi_asset(
    specs=[
        dg.AssetSpec("scenario_stages", group_name="reports",
                     deps=["requests", "request_stages", "fleet_timeline", "unserved_requests"],
                     description="Per scenario and request: the request_stages columns of a what-if replay"),
        dg.AssetSpec("scenario_fleets", group_name="reports",
                     deps=["requests", "request_stages", "fleet_timeline", "unserved_requests"],
                     description="Per scenario and trace: the deployment replayed, its price, span, "
                                 "idle and busy GPU-s, or why the scenario was skipped"),
    ],
)
def scenario_replays(context: dg.AssetExecutionContext, duckdb: DuckDBResource):
    """Replay each trace once per scenario, on its baseline deployment (request_stages: each
    trace's own) with the scenario's changes, each trace on its own fleet with the baseline's
    router and prefix-hash size (pipelines/reports/scenarios.py). Rows are staged per scenario
    and trace and both tables replaced together at the end; a scenario that cannot apply to a
    baseline deployment is skipped on every trace, its scenario_fleets rows saying why."""
    catalog = load_catalog(settings.reference_dir())
    with duckdb.get_connection() as conn:
        try:
            # The baseline replay records its router in fleet_timeline: the what-if replays
            # differ from it only by the scenario's change.
            router = scalar(conn, "SELECT min(router) FROM fleet_timeline WHERE scenario = 'baseline'")
            # the requests the baseline replayed (the ones it set aside are in no scenario
            # either), of the traces it replayed, and each trace's deployment
            requests = read_table(conn, "requests").join(
                read_table(conn, "unserved_requests").select("trace", "request_id"),
                on=["trace", "request_id"], how="anti", maintain_order="left")
            baselines = dict(conn.sql("SELECT DISTINCT trace, deployment FROM request_stages"
                                      " WHERE scenario = 'baseline'").fetchall())
            requests = requests.filter(pl.col("trace").is_in(list(baselines)))
            hash_tokens = hash_tokens_by_trace(conn)
        except CatalogException as exc:   # materialized alone, before the replay
            raise dg.Failure(f"{str(exc).splitlines()[0]}: the what-if replays read the baseline"
                             f" replay's tables; materialize request_stages (the replay, with"
                             f" fleet_timeline and unserved_requests) first") from None
        try:
            scenarios = load_scenarios(settings.reference_dir() / "scenarios.csv")
            built = {name: catalog.deployment(name) for name in set(baselines.values())}
            runs = replay_scenarios(requests, catalog,
                                    {trace: built[name] for trace, name in baselines.items()},
                                    scenarios, router=router, hash_tokens=hash_tokens)
            fleets, first = [], True
            for run in runs:
                for batch in run.stage_batches:
                    stage_rows(conn, "scenario_stages", batch, first=first)
                    first = False
                fleets.append(run.fleet)
        except (ScenarioError, CatalogError) as exc:
            raise dg.Failure(str(exc)) from None
        if first:  # every scenario skipped: an empty scenario_stages with the baseline's columns
            stage_rows(conn, "scenario_stages", conn.sql("FROM request_stages LIMIT 0").pl(), first=True)
        frame = pl.DataFrame(fleets, schema=FLEET_SCHEMA)
        stage_rows(conn, "scenario_fleets", frame, first=True)
        publish_staged(conn, SCENARIO_TABLES)
        skipped = dict(frame.filter(pl.col("skipped").is_not_null())
                       .unique("scenario", maintain_order=True).select("scenario", "skipped").rows())
        for name, reason in skipped.items():
            context.log.warning(f"scenario {name} skipped: {reason}")
        context.log.info(f"replayed {requests.height:,} requests in each of "
                         f"{len(scenarios) - len(skipped)} scenarios on"
                         f" {', '.join(sorted(set(baselines.values())))} with changes "
                         f"(router {router})")
        for table in SCENARIO_TABLES:
            yield dg.MaterializeResult(asset_key=table, metadata={
                **table_metadata(conn, table), "router": router,
                "skipped_scenarios": dg.MetadataValue.json(skipped)})
