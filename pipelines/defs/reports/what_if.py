"""What-if replays: every scenario of data/reference/scenarios.csv replayed on the same traces as
the baseline -> scenario_stages (request_stages columns per scenario) and scenario_fleets."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.replay import ReplayError, replay_fleet
from pipelines.reports.scenarios import (
    ScenarioError,
    load_scenarios,
    scenario_deployment,
    scenario_requests,
)
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
    changes (pipelines/reports/scenarios.py), each trace on its own fleet as in the baseline."""
    catalog = load_catalog(settings.reference_dir())
    with duckdb.get_connection() as conn:
        requests = read_table(conn, "requests")
        base_name = scalar(conn, "SELECT min(deployment) FROM request_stages WHERE scenario = 'baseline'")
    try:
        scenarios = load_scenarios(settings.reference_dir() / "scenarios.csv")
        baseline = catalog.deployment(base_name)
        deployments = [scenario_deployment(catalog, baseline, s) for s in scenarios]
    except (ScenarioError, CatalogError) as exc:
        raise dg.Failure(str(exc)) from None
    traces = requests.partition_by("trace", as_dict=True, maintain_order=True)
    stages, fleets = [], []
    for s, deployment in zip(scenarios, deployments):
        price = catalog.usd_per_gpu_hour(deployment)
        for (trace,), frame in traces.items():
            try:
                result = replay_fleet(scenario_requests(frame, s), deployment)
            except ReplayError as exc:
                raise dg.Failure(f"scenario {s.scenario!r}, trace {trace}: {exc}") from None
            labels = {"trace": pl.lit(trace), "scenario": pl.lit(s.scenario),
                      "deployment": pl.lit(deployment.name)}
            stages.append(result.stages.select(**labels, **{c: c for c in result.stages.columns}))
            fleets.append({
                "trace": trace, "scenario": s.scenario, "description": s.description,
                "deployment": deployment.name, "gpu": deployment.gpu.gpu, "tp": deployment.tp,
                "weight_dtype": deployment.weight_dtype, "kv_dtype": deployment.kv_dtype,
                "replicas": deployment.replicas, "gpus_per_replica": deployment.gpus_per_replica,
                "max_seqs": deployment.scheduler.max_seqs, "prefix_cache": s.prefix_cache,
                "output_cap": s.output_cap, "usd_per_gpu_hour": price, "span_s": result.span_s,
                "idle_gpu_s": result.idle_gpu_s,
            })
        context.log.info(f"scenario {s.scenario}: replayed {requests.height} requests on {deployment.name}")
    with duckdb.get_connection() as conn:
        write_table(conn, "scenario_stages", pl.concat(stages))
        write_table(conn, "scenario_fleets", pl.DataFrame(fleets))
        for table in ("scenario_stages", "scenario_fleets"):
            yield dg.MaterializeResult(asset_key=table, metadata=table_metadata(conn, table))
