"""Replay: every trace in `requests` on its deployment (its log's sidecar's, else the run's) ->
request_stages, fleet_timeline, unserved_requests."""

import time
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
from dagster_duckdb import DuckDBResource
from pydantic import Field

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.replay import ReplayError, by_trace, replay_traces
from pipelines.replay.api import remedies, set_aside_unservable
from pipelines.replay.engine import ROUTERS
from pipelines.roofline import Catalog, CatalogError, Deployment, load_catalog
from pipelines.warehouse import publish_staged, read_table, run_sql, stage_rows

BASELINE = "baseline"
REPLAY_TABLES = ["request_stages", "fleet_timeline", "unserved_requests"]


class ReplayConfig(dg.Config):
    """The descriptions are what the UI's launchpad shows beside each field."""

    deployment: str | None = Field(default=None, description=(
        "The deployments.csv row to replay every trace on whose log's sidecar names no"
        " deployment, for this run only; none: the FLEETSPEND_DEPLOYMENT setting (read when the"
        f" run starts), else {settings.DEFAULT_DEPLOYMENT}"))
    timeline_bin_s: float = Field(default=60.0, description=(
        "Seconds per fleet_timeline bin (a positive number)"))
    router: str = Field(default="least_outstanding", description=(
        f"How requests are routed to replicas: {', '.join(ROUTERS)}; the what-if replays use"
        " the same"))


def replay_options(cfg: dict, where: str, problems: list[str]) -> None:
    """Problems of the options the replay takes besides its deployment: `router` (also the
    calibration's) and `timeline_bin_s` (ReplayConfig, CalibrationConfig), appended to
    `problems`; the preflight, this asset and the calibration asset check them alike."""
    if "router" in cfg and cfg["router"] not in ROUTERS:
        problems.append(f"run config {where}.router: {cfg['router']!r}, expected one of"
                        f" {', '.join(ROUTERS)}")
    if "timeline_bin_s" in cfg:
        value = cfg["timeline_bin_s"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            problems.append(f"run config {where}.timeline_bin_s: {value!r}, expected a positive"
                            f" number of seconds")


def hash_tokens_by_trace(conn: duckdb.DuckDBPyConnection) -> dict[str, int | None]:
    """Tokens per prefix hash of each trace, as its format says (trace_files.prefix_block_tokens;
    Mooncake: 512, null where the format logs no hashes); the what-if replays use the same."""
    return {row["trace"]: row["prefix_block_tokens"] for row in read_table(
        conn, "trace_files").select("trace", "prefix_block_tokens").iter_rows(named=True)}


def sidecar_choices(conn: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """trace -> (where its name came from, the deployment) for each ingested log whose sidecar
    names the deployment that served it (sql/trace_deployments.sql); the replay and the
    calibration take the trace on it, and name its sidecar's key where the catalog cannot build
    it."""
    return {trace: (f"{sidecar}, key 'deployment'", name) for trace, sidecar, name
            in run_sql(conn, "trace_deployments").fetchall() if name is not None}


def trace_deployments(conn: duckdb.DuckDBPyConnection, catalog: Catalog, traces: list[str],
                      default: str, source: str) -> dict[str, Deployment]:
    """The deployment each of `traces` replays on: the one its log's sidecar names
    (sidecar_choices), else `default` (the run's choice, which `source` describes). A
    name the catalog cannot build is a Failure naming where the name came from: the ingest
    checks a sidecar's, but deployments.csv can change after."""
    named = sidecar_choices(conn)
    built: dict[str, Deployment] = {}
    chosen = {}
    for trace in traces:
        where, name = named.get(trace, (source, default))
        if name not in built:
            try:
                built[name] = catalog.deployment(name)
            except CatalogError as exc:
                raise dg.Failure(f"{where}: {exc}") from None
        chosen[trace] = built[name]
    return chosen


def _nothing_to_replay(conn: duckdb.DuckDBPyConnection) -> str:
    """Why the requests table is empty, in the user's terms: every row of every file rejected,
    with each file's first rejected lines (the run publishes nothing, so rejected_requests is
    not there to query afterwards), every file unreadable, or files with a header and no row;
    where unreadable files sit beside others, each file with its own cause."""
    files: dict[str, list] = {}
    for file, count, line, reason in run_sql(conn, "top_rejections").fetchall():
        files.setdefault(Path(file).name, [count]).append(f"line {line}: {reason}")
    rejected = [f"{name}: {count:,} rows rejected, e.g. {', '.join(examples)}"
                for name, (count, *examples) in files.items()]
    unreadable = [(Path(file).name, error) for file, error, *_ in run_sql(conn, "summary_failed_files").fetchall()]
    empty = [Path(file).name for (file,) in run_sql(conn, "empty_trace_files").fetchall()]
    if unreadable and (rejected or empty):   # each file with its own cause, none under another's
        listed = _first_three([*rejected, *(f"{name} could not be read: {error}" for name, error in unreadable),
                               *(f"{name} has no data row (expected request rows after the header)"
                                 for name in empty)], "; ")
        return (f"no requests to replay: no trace file gave a usable row: {listed}; the ingest's"
                f" failed_trace_files and its every_trace_file_ingested check list the files that could"
                f" not be read")
    if rejected:   # header-only files beside them need no naming: "rejected" is the cause to fix
        return f"no requests to replay: every row of the trace files was rejected: {'; '.join(rejected)}"
    if unreadable:   # every file the ingest met failed whole (format, options, encoding)
        listed = _first_three([f"{name}: {error}" for name, error in unreadable], "; ")
        return (f"no requests to replay: no trace file could be read: {listed};"
                f" the ingest's failed_trace_files and its every_trace_file_ingested check list them")
    listed = f": {_first_three(empty, ', ')}" if empty else ""
    return (f"no requests to replay: no file of the trace folder has a data row{listed}"
            f" (expected request rows after the header)")


def _names(chosen: dict[str, Deployment]) -> str:
    """The deployments the traces replay on, in order of first use, comma-separated."""
    return ", ".join(dict.fromkeys(d.name for d in chosen.values()))


def _first_three(items: list[str], separator: str) -> str:
    """The first three `items` joined, and how many more there are."""
    more = f" (and {len(items) - 3} more)" if len(items) > 3 else ""
    return separator.join(items[:3]) + more


@dg.multi_asset(
    specs=[
        dg.AssetSpec("request_stages", group_name="replay", deps=["requests", "roofline"],
                     description="Per request: queue / prefill / decode / network seconds and GPU-seconds"),
        dg.AssetSpec("fleet_timeline", group_name="replay", deps=["requests", "roofline"],
                     description="Per replica and time bin: busy share, batch, KV use, queue, idle GPU-s"),
        dg.AssetSpec("unserved_requests", group_name="replay", deps=["requests", "roofline"],
                     description="Requests the deployment their trace replays on cannot serve"
                                 " (longer than its model's context or one replica's KV cache),"
                                 " set aside from the replay with the reason"),
    ],
)
def replayed_fleet(context: dg.AssetExecutionContext, config: ReplayConfig, duckdb: DuckDBResource):
    """Replay each trace on its own fleet of its deployment (trace_deployments: its log's
    sidecar's, else the run's; continuous batching, see pipelines/replay/engine.py); the
    baseline scenario the reports read. Requests a trace's deployment cannot serve are set aside
    into unserved_requests (set_aside_unservable), not replayed.

    Each trace's results go to temporary staging tables; the three (REPLAY_TABLES) are replaced together in
    one transaction at the end, so an interrupted or failed replay leaves the previous tables
    whole and a rerun starts clean."""
    problems: list[str] = []
    replay_options(config.model_dump(), "ops.replayed_fleet.config", problems)
    if problems:  # the preflight names them first in a run through the warehouse resource
        raise dg.Failure("; ".join(problems))
    name, source = settings.deployment_choice(config.deployment, "replay config")
    try:   # a catalog file's problems name their file; they are not the deployment choice's
        catalog = load_catalog(settings.reference_dir())
    except CatalogError as exc:
        raise dg.Failure(str(exc)) from None
    with duckdb.get_connection() as conn:
        traces = by_trace(read_table(conn, "requests"))
        if not traces:
            raise dg.Failure(_nothing_to_replay(conn))
        chosen = trace_deployments(conn, catalog, list(traces), name, source)
        fleets, unserved_rows = [], []   # (deployment, its traces' servable requests)
        for deployment in {d.name: d for d in chosen.values()}.values():
            served, unserved = set_aside_unservable(
                {t: f for t, f in traces.items() if chosen[t].name == deployment.name}, deployment)
            fleets.append((deployment, served, unserved))
            unserved_rows.append(unserved.select("trace", pl.lit(deployment.name).alias("deployment"),
                                                 *unserved.columns[1:]))
            for trace, count, reason in (unserved.group_by("trace", maintain_order=True)
                                         .agg(pl.len(), pl.col("reason").first()).rows()):
                context.log.warning(f"{trace}: {count:,} request(s) set aside, not replayed"
                                    f" (unserved_requests), e.g. one that {reason}")
        stage_rows(conn, "unserved_requests", pl.concat(unserved_rows), first=True)
        if not any(served for _, served, _ in fleets):
            aside = [(deployment, unserved) for deployment, _, unserved in fleets]
            (deployment, unserved), *others = aside
            remedy = ("; ".join(f"replay {d.name}'s traces on a deployment with {remedies(u, d)}"
                                for d, u in aside) if others
                      else f"replay on a deployment with {remedies(unserved, deployment)}")
            raise dg.Failure(f"no request can be served by {_names(chosen)}: every one is set"
                             f" aside, e.g. one that {unserved['reason'][0]}; {remedy}")

        def progress_for(trace: str):  # called as the trace's replay starts
            started = time.perf_counter()

            def progress(routed: int, total: int, now: float) -> None:
                context.log.info(f"{trace}: {routed:,} of {total:,} requests routed, "
                                 f"{now / 3600:.1f} h of traffic replayed in "
                                 f"{time.perf_counter() - started:.0f} s")
            return progress

        hit_rates, started, number = {}, time.perf_counter(), 0
        hash_tokens = hash_tokens_by_trace(conn)
        try:
            for deployment, served, _ in fleets:
                replays = replay_traces(served, deployment, config.timeline_bin_s,
                                        router=config.router, hash_tokens=hash_tokens,
                                        progress_for=progress_for)
                for trace, frame, result in replays:
                    labels = {"trace": pl.lit(trace), "scenario": pl.lit(BASELINE),
                              "deployment": pl.lit(deployment.name)}
                    first = number == 0
                    for batch in result.stage_batches():
                        stage_rows(conn, "request_stages",
                                   batch.select(**labels, **{c: c for c in batch.columns}), first=first)
                        first = False
                    stage_rows(conn, "fleet_timeline",
                               result.timeline.select(**labels, router=pl.lit(config.router),
                                                      **{c: c for c in result.timeline.columns}),
                               first=number == 0)
                    number += 1
                    hashed = "prefix_hashes" in frame.columns and frame["prefix_hashes"].is_not_null().any()
                    hit_rates[trace] = result.cache_hit_rate if hashed else None   # no hashes: no rate
                    hits = (f"prefix-cache hit rate {result.cache_hit_rate:.1%}" if hashed
                            else "no prefix hashes: no prefix-cache hit rate")
                    context.log.info(f"{trace}: replayed {frame.height:,} requests over"
                                     f" {result.span_s:,.0f} s on {deployment.replicas} x"
                                     f" {deployment.gpus_per_replica} {deployment.gpu.gpu}"
                                     f" ({deployment.name}) in"
                                     f" {time.perf_counter() - started:.1f} s ({hits})")
                    del result  # not held while the next trace replays
                    started = time.perf_counter()
        except ReplayError as exc:
            raise dg.Failure(str(exc)) from None
        publish_staged(conn, REPLAY_TABLES)
        for table in REPLAY_TABLES:
            yield dg.MaterializeResult(asset_key=table, metadata={
                **table_metadata(conn, table), "deployment": _names(chosen),
                "trace_deployments": dg.MetadataValue.json({t: d.name for t, d in chosen.items()}),
                "router": config.router,
                "prefix_cache_hit_rate": dg.MetadataValue.json(hit_rates)})
