"""Replay a request log on a deployment: Polars in, the `request_stages` columns out.

Stage definitions (they hold exactly, per request):

    queue_s   = admitted - arrival                 waiting for a batch slot and KV blocks
    prefill_s = first token - admitted             the prompt's prefill (possibly in chunks)
    decode_s  = finished - first token             output tokens 2..n, one per step
    network_s = one-way latency + bytes_per_token / bandwidth   what the client waits beyond
                                                   the last token
    e2e_s     = queue_s + prefill_s + decode_s + network_s
    ttft_s    = queue_s + prefill_s + one-way latency (the first byte's trip to the client)
    tpot_s    = decode_s / (output_tokens - 1), null for one-token outputs

Times are seconds from the trace start, `arrival_s` = 0, where the fleet's span (`span_s`, the
timeline, idle GPU-seconds) begins: the canonical requests put their first request there. A
slice of a trace that keeps its arrival times (first request at 102 s) is replayed as a fleet
idle until then, and that idle time is priced; subtract the first arrival to count the slice
alone.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from pipelines.replay.engine import ROUTERS, progress_reporting, simulate
from pipelines.roofline.catalog import valid_tensor_parallel
from pipelines.roofline.deployment import DTYPE_BYTES, Deployment, Network

PROGRESS_EVERY = 1_000_000  # requests routed between two progress reports

STAGE_COLUMNS = [
    "request_id", "arrival_s", "prompt_tokens", "output_tokens", "cached_tokens", "replica",
    "admitted_s", "first_token_s", "finished_s", "queue_s", "prefill_s", "decode_s", "network_s",
    "ttft_s", "tpot_s", "e2e_s", "preemptions", "prefill_gpu_s", "decode_gpu_s", "gpu_s",
    "compute_gpu_s", "bound", "cached_hit_tokens",
]
MOONCAKE_HASH_TOKENS = 512  # tokens per prefix hash in Mooncake traces
# The most replica x time-bin cells of a fleet timeline (TIMELINE_SERIES float64 each: 1 GB): a
# year of 60-s bins on 47 replicas, a week on 2,400.
MAX_TIMELINE_CELLS = 25_000_000


class ReplayError(ValueError):
    """The requests cannot be replayed on this deployment (the message says why)."""


STAGE_BATCH_ROWS = 2_000_000


@dataclass(frozen=True)
class ReplayResult:
    """What a replay produced. The per-request engine outputs are kept lean (`core`); the
    request_stages rows are derived from them on demand, whole (`stages`) or a slice at a time
    (`stage_batches`), so that a week of fleet traffic fits in memory."""

    core: pl.DataFrame        # per request, in arrival order: the inputs and the engine outputs
    timeline: pl.DataFrame    # one row per replica and time bin
    span_s: float             # replayed span: trace start to the last request's last token
    network: Network

    @property
    def idle_gpu_s(self) -> float:
        return float(self.timeline["idle_gpu_s"].sum())

    @property
    def busy_gpu_s(self) -> float:
        """The steps' GPU-seconds, summed apart from the requests' shares of them: what a what-if
        fleet's attributed GPU-seconds balance against (sql/scenario_gpu_conservation.sql)."""
        return float(self.timeline["busy_gpu_s"].sum())

    @property
    def cache_hit_rate(self) -> float:
        """Share of all prompt tokens found in the KV cache at first admission."""
        return float(self.core["cached_hit_tokens"].sum()) / float(self.core["prompt_tokens"].sum())

    @property
    def stages(self) -> pl.DataFrame:
        """One row per request, STAGE_COLUMNS (see the module docstring)."""
        return _stages(self.core, 0, self.network)

    def stage_batches(self, rows: int = STAGE_BATCH_ROWS) -> Iterator[pl.DataFrame]:
        """The rows of `stages`, `rows` at a time."""
        for offset in range(0, self.core.height, rows):
            yield _stages(self.core.slice(offset, rows), offset, self.network)


def _stages(core: pl.DataFrame, offset: int, net: Network) -> pl.DataFrame:
    ids = (pl.col("request_id") if "request_id" in core.columns
           else pl.int_range(offset, offset + pl.len(), dtype=pl.Int64).cast(pl.String))
    cached = (pl.col("cached_tokens").fill_null(0) if "cached_tokens" in core.columns
              else pl.lit(0, pl.Int64))
    return core.lazy().with_columns(
        request_id=ids, cached_tokens=cached,
        queue_s=pl.col("admitted_s") - pl.col("arrival_s"),
        prefill_s=pl.col("first_token_s") - pl.col("admitted_s"),
        decode_s=pl.col("finished_s") - pl.col("first_token_s"),
        network_s=pl.lit(net.tail_s),
        gpu_s=pl.col("prefill_gpu_s") + pl.col("decode_gpu_s"),
    ).with_columns(
        ttft_s=pl.col("queue_s") + pl.col("prefill_s") + net.one_way_s,
        tpot_s=pl.when(pl.col("output_tokens") > 1)
        .then(pl.col("decode_s") / (pl.col("output_tokens") - 1)),
        e2e_s=pl.col("queue_s") + pl.col("prefill_s") + pl.col("decode_s") + pl.col("network_s"),
        bound=pl.when(pl.col("compute_gpu_s") * 2 >= pl.col("gpu_s"))
        .then(pl.lit("compute")).otherwise(pl.lit("memory")),
    ).select(STAGE_COLUMNS).collect()


# The numeric columns a replay reads.
NUMERIC_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "cached_tokens")


def _not_whole(count: pl.Expr) -> pl.Expr:
    """Rows where a token count is missing, NaN / infinite or fractional: the engine would
    truncate 5.5 to 5, and a null or NaN breaks its arithmetic far from the row at fault."""
    return count.is_null() | ~count.is_finite() | (count != count.floor())


def _validated(requests: pl.DataFrame, deployment: Deployment) -> pl.DataFrame:
    """The columns the replay reads, in arrival order, after checking every row."""
    missing = {"arrival_s", "prompt_tokens", "output_tokens"} - set(requests.columns)
    if missing:
        raise ReplayError(f"requests lack column(s) {sorted(missing)}")
    frame = requests.select(
        c for c in ("request_id", "arrival_s", "prompt_tokens", "output_tokens", "cached_tokens",
                    "prefix_hashes")
        if c in requests.columns
    )
    # DuckDB's sums and CASTs to DECIMAL arrive as Decimal, which the checks below cannot test
    frame = frame.with_columns(pl.col(pl.Decimal).cast(pl.Float64))
    not_numbers = {c: str(dtype) for c, dtype in frame.schema.items()
                   if c in NUMERIC_COLUMNS and not (dtype.is_numeric() or dtype == pl.Null)}
    if not_numbers:
        raise ReplayError(f"requests column(s) {not_numbers} are not numbers: expected arrival_s in"
                          f" seconds and whole token counts")
    if not frame["arrival_s"].is_sorted():   # logs usually are: skip a copy of a big frame
        if "request_id" not in frame.columns:   # ids follow the input rows
            frame = frame.with_columns(
                request_id=pl.int_range(pl.len(), dtype=pl.Int64).cast(pl.String))
        frame = frame.sort("arrival_s", maintain_order=True)
    cached = (pl.col("cached_tokens").fill_null(0) if "cached_tokens" in frame.columns
              else pl.lit(0, pl.Int64))
    arrival = pl.col("arrival_s")
    bad = frame.filter(
        _not_whole(pl.col("prompt_tokens")) | _not_whole(pl.col("output_tokens")) | _not_whole(cached)
        | (pl.col("prompt_tokens") < 1) | (pl.col("output_tokens") < 1)
        | (cached < 0) | (cached >= pl.col("prompt_tokens"))
        | arrival.is_null() | ~arrival.is_finite() | (arrival < 0)
    )
    if bad.height:
        raise ReplayError(
            f"{bad.height} request(s) have invalid fields (need whole prompt_tokens >= 1, "
            f"whole output_tokens >= 1, whole 0 <= cached_tokens < prompt_tokens, a finite "
            f"arrival_s >= 0), first: {bad.row(0, named=True)}"
        )
    too_long = beyond_kv(frame, deployment)
    if too_long.height:
        raise ReplayError(f"{kv_shortfall(too_long, deployment)}; replay on a deployment with more"
                          f" KV memory ({_kv_cache_remedy(deployment)}) or leave such requests"
                          f" out of the log")
    return frame


def kv_shortfall(too_long: pl.DataFrame, deployment: Deployment) -> str:
    """What is wrong with the requests `beyond_kv` found: how many, the capacity, an example."""
    first = too_long.row(0, named=True)
    which = f"request {first['request_id']} " if first.get("request_id") else ""
    return (f"{too_long.height:,} request(s) need more KV cache than one replica of"
            f" {deployment.name!r} holds ({deployment.kv_capacity_tokens:,} tokens), e.g. {which}with"
            f" {first['prompt_tokens']:,}+{first['output_tokens']:,} tokens")


def beyond_kv(requests: pl.DataFrame, deployment: Deployment) -> pl.DataFrame:
    """The requests one replica of `deployment` cannot hold in its KV cache, which the replay
    refuses."""
    return requests.filter(_kv_tokens() > deployment.kv_capacity_tokens)


def _kv_tokens() -> pl.Expr:
    """The KV-cache tokens a request's sequence holds at most: prompt + output - 1 (the last
    token's KV is never written)."""
    return pl.col("prompt_tokens") + pl.col("output_tokens") - 1


def _length() -> pl.Expr:
    """A request's tokens, prompt + output: what a model's context (max_context) must hold."""
    return pl.col("prompt_tokens") + pl.col("output_tokens")


def _beyond_context(deployment: Deployment) -> pl.Expr:
    """The requests longer than `deployment`'s model's context (none where the catalog does not
    say its context): an engine refuses them at admission (vLLM's max_model_len)."""
    context = deployment.model.max_context
    return _length() > context if context else pl.lit(False)


def _with_thousands(count: pl.Expr) -> pl.Expr:
    """A non-negative integer count as text with comma thousands separators (4147 -> "4,147"),
    as every other count the pipeline prints; Polars' format has no such option. All seven
    groups of three digits an Int64 holds, zero-padded, then the leading zeros and commas cut."""
    groups = [((count // 1000 ** power) % 1000).cast(pl.String).str.zfill(3)
              for power in range(6, -1, -1)]
    padded = pl.concat_str(groups, separator=",").str.strip_chars_start("0,")
    return pl.when(count == 0).then(pl.lit("0")).otherwise(padded)


UNSERVED_SCHEMA = {"trace": pl.String, "request_id": pl.String, "prompt_tokens": pl.Int64,
                   "output_tokens": pl.Int64, "reason": pl.String}


def set_aside_unservable(traces: Mapping[str, pl.DataFrame], deployment: Deployment,
                         ) -> tuple[dict[str, pl.DataFrame], pl.DataFrame]:
    """(each trace's requests `deployment` can serve, the others with their reason). An engine
    refuses at admission a request longer than its model's context (vLLM's max_model_len, the
    model's max_context in models.csv) and one that one replica's KV cache cannot hold
    (beyond_kv), and the replay refuses a log holding the latter. The replay asset sets such
    requests aside (table unserved_requests, UNSERVED_SCHEMA), so that one oversized row in one
    upload does not stop the replay of every trace; a trace left with no request is left out of
    the first."""
    context, beyond_context = deployment.model.max_context, _beyond_context(deployment)
    too_big = (_kv_tokens() > deployment.kv_capacity_tokens) | beyond_context
    reason = pl.format(f"needs {{}} tokens of KV cache: one replica of {deployment.name} holds"
                       f" {deployment.kv_capacity_tokens:,}", _with_thousands(_kv_tokens()))
    if context:
        reason = pl.when(beyond_context).then(pl.format(
            f"has {{}} tokens (prompt + output), more than {deployment.model.model}'s context"
            f" of {context:,}", _with_thousands(_length()))).otherwise(reason)
    served, unserved = {}, []
    for trace, frame in traces.items():
        refused = frame.filter(too_big)
        if refused.height:
            unserved.append(refused.select(
                trace=pl.lit(trace), request_id=pl.col("request_id").cast(pl.String),
                prompt_tokens="prompt_tokens", output_tokens="output_tokens", reason=reason))
            frame = frame.filter(~too_big)
        if frame.height:
            served[trace] = frame
    return served, pl.concat([pl.DataFrame(schema=UNSERVED_SCHEMA), *unserved])


def remedies(unserved: pl.DataFrame, deployment: Deployment) -> str:
    """What would let `deployment`'s fleet serve the requests set_aside_unservable set aside:
    a model with a longer context for those beyond its context, a larger KV cache for the
    others; only the remedies the set-aside rows need are named, and only the ways to a larger
    KV cache the deployment has left (`_kv_cache_levers`)."""
    over_context = unserved.filter(_beyond_context(deployment)).height
    named = []
    if over_context:
        named.append(f"a model with a context of more than {deployment.model.max_context:,}"
                     f" tokens ({over_context:,} request(s))")
    if over_context < unserved.height:
        named.append(f"a larger KV cache than {deployment.kv_capacity_tokens:,} tokens per"
                     f" replica: {_kv_cache_remedy(deployment)}"
                     f" ({unserved.height - over_context:,} request(s))")
    return "; ".join(named)


def _kv_cache_remedy(deployment: Deployment) -> str:
    """The levers of _kv_cache_levers in one phrase ("a, b or c"), as the set-aside remedies
    and the replay's refusal of a request beyond the KV cache both name them."""
    *others, last = _kv_cache_levers(deployment)
    return f"{', '.join(others)} or {last}" if others else last


def _kv_cache_levers(deployment: Deployment) -> list[str]:
    """The ways to a larger KV cache per replica that `deployment` has left: more GPUs only
    below the largest tensor-parallel degree its model splits into (catalog.valid_tensor_parallel),
    an fp8 KV cache only where its own is wider (one already fp8 or fp4 gains nothing), and
    always a GPU with more memory (the one lever left at the largest tp with an fp8 cache)."""
    levers = []
    if max(valid_tensor_parallel(asdict(deployment.model))) > deployment.tp:
        levers.append("more GPUs per replica")
    if DTYPE_BYTES[deployment.kv_dtype] > DTYPE_BYTES["fp8"]:
        levers.append("an fp8 KV cache")
    return [*levers, "a GPU with more memory"]


def frame_problem(name: str, value) -> str | None:
    """Why `value`, passed as the argument `name`, is not a polars DataFrame (None when it is):
    the calls that follow would fail with an AttributeError on its first use. One message for
    the replay's and the calibration's arguments."""
    if isinstance(value, pl.DataFrame):
        return None
    hint = (" (call .collect() first)" if isinstance(value, pl.LazyFrame)
            else " (pl.DataFrame(...), pl.from_pandas(...), pl.from_arrow(...), pl.read_csv(...))")
    return f"{name}: expected a polars DataFrame, got {type(value).__name__}{hint}"


def deployment_problem(name: str, value) -> str | None:
    """Why `value`, passed as the argument `name`, is not a Deployment (None when it is): a
    deployment's name, say, where the object belongs. One message for the replay's and the
    calibration's arguments."""
    if isinstance(value, Deployment):
        return None
    return (f"{name}={value!r}: expected a Deployment, e.g. load_catalog().deployment(name) or"
            f" load_catalog().build(...)")


def _check_span(frame: pl.DataFrame, deployment: Deployment, bin_s: float) -> None:
    """Refuse a log whose span would need a fleet timeline beyond MAX_TIMELINE_CELLS (replicas x
    bins, TIMELINE_SERIES floats each): such a span is almost always an arrival in the wrong
    unit or year, and allocating it would exhaust memory instead of saying so."""
    first, last = frame["arrival_s"][0], frame["arrival_s"][-1]
    cells = deployment.replicas * (last // bin_s + 2)
    if cells > MAX_TIMELINE_CELLS:
        raise ReplayError(
            f"the requests span {last - first:,.0f} s ({(last - first) / 86400:,.0f} days, from"
            f" arrival_s {first:,.0f} to {last:,.0f}): {deployment.replicas} replicas x"
            f" {bin_s:g}-s bins would need a fleet timeline of {cells:,.0f} cells, over the"
            f" {MAX_TIMELINE_CELLS:,} a replay holds; check the log's arrival times (a wrong unit"
            f" or year) or replay with a larger timeline_bin_s")


def _prefix_hashes(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Every request's prefix hashes as one flat array and the offsets of each request's run
    in it (request i: hashes[offsets[i]:offsets[i + 1]]); none when the column is absent."""
    if "prefix_hashes" not in frame.columns:
        return np.zeros(frame.height + 1, np.int64), np.zeros(0, np.int64)
    column = frame["prefix_hashes"].cast(pl.List(pl.Int64)).list.drop_nulls()
    lengths = column.list.len().fill_null(0).cast(pl.Int64).to_numpy()
    offsets = np.zeros(frame.height + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = column.explode().drop_nulls().to_numpy()
    return offsets, np.ascontiguousarray(flat, dtype=np.int64)


def replay_fleet(
    requests: pl.DataFrame, deployment: Deployment, bin_s: float = 60.0, *,
    router: str = "least_outstanding",
    hash_tokens: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> ReplayResult:
    """Replay on every replica of `deployment`; per-request stages plus the fleet timeline.

    `router` is one of engine.ROUTERS (round_robin, least_outstanding, least_kv). The KV block
    size, chunked prefill and the other scheduler limits are the deployment's
    (`deployment.scheduler`; `catalog.build(..., kv_block_tokens=32)` for another block size).
    `hash_tokens` is how many prompt tokens each entry of `prefix_hashes` covers (a multiple
    of the KV block size; None: Mooncake's 512, also for a trace without hashes, where it is
    unused), as trace_files.prefix_block_tokens records it per trace.
    `progress(requests routed, requests, simulated seconds)` is called every PROGRESS_EVERY
    requests during long replays.
    """
    problem = frame_problem("requests", requests)
    if problem:
        raise ReplayError(problem)
    problem = deployment_problem("deployment", deployment)
    if problem:
        raise ReplayError(problem)
    if router not in ROUTERS:
        raise ReplayError(f"router={router!r}: expected one of {', '.join(ROUTERS)}")
    if isinstance(bin_s, bool) or not isinstance(bin_s, numbers.Real) or not bin_s > 0:
        raise ReplayError(f"bin_s={bin_s!r}: expected a positive number of seconds")
    sched = deployment.scheduler
    hash_tokens = MOONCAKE_HASH_TOKENS if hash_tokens is None else hash_tokens
    if (isinstance(hash_tokens, bool) or not isinstance(hash_tokens, numbers.Real)
            or not float(hash_tokens).is_integer()):
        raise ReplayError(f"hash_tokens={hash_tokens!r}: expected a whole number of prompt tokens"
                          f" per prefix hash")
    hash_tokens = int(hash_tokens)   # 256.0 is 256: a float would fail numba's typing
    frame = _validated(requests, deployment)
    if frame.height == 0:
        raise ReplayError("no requests to replay")
    _check_span(frame, deployment, bin_s)
    offsets, hashes = _prefix_hashes(frame)
    if hashes.size and (hash_tokens < 1 or hash_tokens % sched.kv_block_tokens):
        raise ReplayError(f"hash_tokens={hash_tokens}: expected a positive multiple of the KV "
                          f"block size of {deployment.name!r} ({sched.kv_block_tokens} tokens)")
    # Int64 columns pass to the engine without a copy
    cached = (frame["cached_tokens"].fill_null(0).cast(pl.Int64).to_numpy()
              if "cached_tokens" in frame.columns else np.zeros(frame.height, np.int64))
    with progress_reporting(progress or (lambda *_: None)):
        (replica, admitted, first, finished, preemptions, prefill_gpu, decode_gpu, compute_gpu,
         hit, timeline) = simulate(
            frame["arrival_s"].cast(pl.Float64).to_numpy(),
            frame["prompt_tokens"].cast(pl.Int64).to_numpy(),
            frame["output_tokens"].cast(pl.Int64).to_numpy(),
            cached, offsets, hashes, hash_tokens, deployment.coefficients,
            deployment.replicas, sched.max_seqs, sched.max_batched_tokens,
            sched.chunked_prefill, deployment.kv_capacity_tokens // sched.kv_block_tokens,
            sched.kv_block_tokens, float(bin_s), ROUTERS[router],
            sched.graph_sizes,
            sched.kv_reservation == "full", PROGRESS_EVERY if progress else 0,
        )
    del cached, offsets, hashes
    if np.isnan(finished).any():
        raise ReplayError(
            f"{int(np.isnan(finished).sum())} request(s) never finished on {deployment.name!r}: "
            f"check its scheduler settings (max_seqs, max_batched_tokens, kv_block_tokens)"
        )
    gpus = float(deployment.gpus_per_replica)
    for gpu_s in (prefill_gpu, decode_gpu, compute_gpu):
        gpu_s *= gpus   # per GPU -> per replica, in place
    core = frame.with_columns(
        replica=pl.Series(replica), admitted_s=admitted, first_token_s=first,
        finished_s=finished, preemptions=pl.Series(preemptions),
        prefill_gpu_s=prefill_gpu, decode_gpu_s=decode_gpu, compute_gpu_s=compute_gpu,
        cached_hit_tokens=pl.Series(hit),
    ).drop("prefix_hashes", strict=False)
    span = float(np.max(finished))
    return ReplayResult(core, _timeline_frame(timeline, bin_s, span, gpus), span,
                        deployment.network)


# Relative distance from a whole bin within which a bin's summed busy time is the whole bin:
# far above the rounding of summing a bin's steps (~1e-16 each) and far below any step (60 ns of
# a minute's bin, where a step takes microseconds at least).
BUSY_SNAP = 1e-9


def _timeline_frame(timeline: np.ndarray, bin_s: float, span: float, gpus: float) -> pl.DataFrame:
    """Per replica and bin within [0, span): busy share, means over the bin, idle GPU-seconds.

    mean_batch and mean_kv_use (share of the KV capacity holding tokens) are taken at step
    start and held for the step; mean_queue and mean_running (admitted, not finished) are exact
    time-averages, so sum((mean_queue + mean_running) * bin_s) = sum(finished - arrival)."""
    replicas, bins = timeline.shape[1], int(np.ceil(span / bin_s))
    busy, batch, kv, queue, running = (timeline[k, :, :bins].ravel() for k in range(5))
    # bin b is [b x bin_s, (b + 1) x bin_s), each edge as the engine computes it: start + bin_s
    # rounds apart from the next start where bin_s is no binary fraction (0.1 s), and two days of
    # such bins covered 3e-11 more than the span, idle seconds too many, which busy seconds taken
    # as capacity less idle (the what-if check's, once) read as an attribution error on a mostly
    # idle fleet
    edges = np.arange(bins + 1) * bin_s
    start = np.tile(edges[:-1], replicas)
    covered = np.tile(np.minimum(edges[1:], span) - edges[:-1], replicas)
    # A bin busy from end to end sums thousands of step pieces, so its busy time lands a few
    # ulps either side of the bin (a fleet busy all the time read "idle 0.0% = $0.0000000000000024"
    # and a busy share of 1.0000000000000007); within BUSY_SNAP of the bin it is the bin.
    busy = np.where(np.abs(covered - busy) <= BUSY_SNAP * covered, covered, busy)
    return pl.DataFrame({
        "replica": np.repeat(np.arange(replicas, dtype=np.int32), bins),
        "bin_start_s": start,
        "bin_s": covered,
        "busy_share": busy / covered,
        "mean_batch": batch / covered,
        "mean_kv_use": kv / covered,
        "mean_queue": queue / covered,
        "mean_running": running / covered,
        "busy_gpu_s": busy * gpus,
        "idle_gpu_s": np.maximum(covered - busy, 0.0) * gpus,
    })


def replay(requests: pl.DataFrame, deployment: Deployment, *,
           router: str = "least_outstanding", hash_tokens: int | None = None) -> pl.DataFrame:
    """One row per request with the `request_stages` columns (see module docstring).
    `hash_tokens`: prompt tokens per entry of `prefix_hashes` (None: Mooncake's 512); for a log
    read with another block size, pass its `read_trace(...).prefix_block_tokens`, or the
    replay credits each hash with the wrong number of cached tokens (replay_fleet)."""
    return replay_fleet(requests, deployment, router=router, hash_tokens=hash_tokens).stages


def by_trace(requests: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The requests of each trace, in order of first appearance: every trace is replayed on a
    fleet of its own (its requests share no replica with another trace's)."""
    return {trace: frame for (trace,), frame
            in requests.partition_by("trace", as_dict=True, maintain_order=True).items()}


def replay_traces(
    traces: Mapping[str, pl.DataFrame], deployment: Deployment, bin_s: float = 60.0, *,
    router: str = "least_outstanding", hash_tokens: Mapping[str, int | None] | None = None,
    transform: Callable[[pl.DataFrame], pl.DataFrame] = lambda frame: frame,
    progress_for: Callable[[str], Callable[[int, int, float], None]] | None = None,
) -> Iterator[tuple[str, pl.DataFrame, ReplayResult]]:
    """(trace, its requests, its replay) for each trace on its own fleet of `deployment`,
    lazily: one trace's result is held at a time when the caller is done with it before the
    next. The baseline replay and the what-if replays both run through here, with the same
    options: `hash_tokens` by trace (replay_fleet's default where a trace has none), `transform`
    applied to each trace's requests (a what-if's request change), `progress_for(trace)` the
    progress callback of that trace's replay. A ReplayError names the trace."""
    hash_tokens = hash_tokens or {}
    for trace, frame in traces.items():
        try:
            result = replay_fleet(transform(frame), deployment, bin_s, router=router,
                                  hash_tokens=hash_tokens.get(trace),
                                  progress=progress_for(trace) if progress_for else None)
        except ReplayError as exc:
            raise ReplayError(f"trace {trace}: {exc}") from None
        yield trace, frame, result
        del result  # not held while the next trace replays
