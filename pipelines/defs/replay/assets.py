"""Replay: every trace in `requests` on the chosen deployment -> request_stages, fleet_timeline."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.replay import ReplayError, replay_fleet
from pipelines.roofline import CatalogError, load_catalog
from pipelines.warehouse import read_table, write_table

DEFAULT_DEPLOYMENT = "azure-2023-70b-h100"
BASELINE = "baseline"


class ReplayConfig(dg.Config):
    deployment: str = DEFAULT_DEPLOYMENT
    timeline_bin_s: float = 60.0


@dg.multi_asset(
    specs=[
        dg.AssetSpec("request_stages", group_name="replay", deps=["requests", "roofline"],
                     description="Per request: queue / prefill / decode / network seconds and GPU-seconds"),
        dg.AssetSpec("fleet_timeline", group_name="replay", deps=["requests", "roofline"],
                     description="Per replica and time bin: busy share, batch, KV use, queue, idle GPU-s"),
    ],
)
def replayed_fleet(context: dg.AssetExecutionContext, config: ReplayConfig, duckdb: DuckDBResource):
    """Replay each trace on its own fleet of `deployment` (continuous batching, see
    pipelines/replay/engine.py); the baseline scenario the reports read."""
    try:
        deployment = load_catalog(settings.reference_dir()).deployment(config.deployment)
    except CatalogError as exc:
        raise dg.Failure(f"replay config: {exc}") from None
    with duckdb.get_connection() as conn:
        requests = read_table(conn, "requests")
    stages, timelines = [], []
    for (trace,), frame in requests.partition_by("trace", as_dict=True, maintain_order=True).items():
        try:
            result = replay_fleet(frame, deployment, bin_s=config.timeline_bin_s)
        except ReplayError as exc:
            raise dg.Failure(f"trace {trace}: {exc}") from None
        labels = {"trace": pl.lit(trace), "scenario": pl.lit(BASELINE),
                  "deployment": pl.lit(deployment.name)}
        stages.append(result.stages.select(**labels, **{c: c for c in result.stages.columns}))
        timelines.append(result.timeline.select(**labels, **{c: c for c in result.timeline.columns}))
        context.log.info(f"{trace}: replayed {frame.height} requests over {result.span_s:.0f} s "
                         f"on {deployment.replicas} x {deployment.gpus_per_replica} {deployment.gpu.gpu}")
    with duckdb.get_connection() as conn:
        write_table(conn, "request_stages", pl.concat(stages))
        write_table(conn, "fleet_timeline", pl.concat(timelines))
        for table in ("request_stages", "fleet_timeline"):
            yield dg.MaterializeResult(asset_key=table, metadata={
                **table_metadata(conn, table), "deployment": deployment.name})
