"""Calibrate a deployment's efficiency factors and overheads on observed latencies.

The catalog's factors are defaults for a GPU family and serving stack; a user's own engine,
drivers and settings differ. Given what their logs observed, we fit the five numbers that carry
the software: compute efficiency, bandwidth efficiency, the per-step overhead, the per-sequence
overhead of a step (step.py, O_seq: sampling and the engine's per-sequence work, 1 us on today's
engines and ~0.3 ms where it runs in Python between steps) and the client-side latency (network
one-way), and report how far the model was from the observations before and after, per request
shape.

Two kinds of observations:

- request logs (the `requests` table: arrival_s, prompt/output/cached tokens, observed_ttft_s,
  observed_e2e_s). Predictions come from replaying the *whole* log on the deployment
  (pipelines.replay), so queueing and batching under the log's own load are part of the model;
  the residuals compare the replay's ttft_s / e2e_s with the observed ones, and the time per
  output token derived from both, (e2e - ttft) / (output_tokens - 1), the decode stage alone.
- step measurements (`kind` = prefill | decode, `batch`, `prompt_tokens`, `context_tokens`,
  `observed_s`), such as SplitwiseSim's perf_model.csv: the prefill of `batch` prompts of
  `prompt_tokens` in one step, or one decode step over `batch` sequences of `context_tokens`.

Fitting: residual = log(predicted / observed) per observation, minimised with
scipy.optimize.least_squares(loss="soft_l1", f_scale=0.2): a robust loss, so a few requests
that queued behind something the log does not show (or a noisy measurement) do not drag the fit.
Parameters are fitted in log space, efficiencies bounded to (0.01, 1], overheads to (10 us, 1 s),
the per-sequence overhead to (0.1 us, 10 ms).

Held-out check: observations are split into alternating halves in arrival (or row) order, each
metric's on its own, so both halves see the same load; the fit uses the even half (and only the
metrics asked for), errors are reported on both halves and every observed metric. Per group (shape
x half x metric): error = median over its observations of |predicted / observed - 1| (per-request
accuracy), shape_error = |median predicted / median observed - 1| (the group's bias, what a
per-shape cost attribution inherits) and error_baseline = the `error` of predicting each
observation by the median observed value of its shape and metric in the fit half. The baseline is
what a lookup table of the log itself achieves without any physics: where `error_after` is not
below it, the model explains nothing of the per-request spread (server jitter, unknown output
lengths), and where it is well below, the replay's queueing and batching carry real information.

Plausibility: a fit can always shrink a residual by pushing a factor to its bound, and a log
served by other hardware than the deployment named for it still "calibrates". Two checks say so
(`Calibration.warnings`, judged on the fit half of the fitted metrics only, so that neither the
held-out half nor a metric left out of the fit because its inputs are estimates decides them):
the median observation of a metric is faster than the deployment can be with every fitted
factor at its ideal (100% of peak compute and bandwidth, no step overhead, no client latency;
the catalog's all-reduce latency and per-layer launch cost stay, being hardware), or a fitted
efficiency ends at its bound (100% of peak, or 1%) or an overhead at its ceiling (1 s; 10 ms for
the per-sequence one). Either means the deployment is not the one that served the log (GPU,
tensor-parallel degree, dtype or model), whatever the errors say. Two more ask about the log's
unit instead: every factor at its slow bound (milliseconds read as seconds?), and every fitted
metric's median more than UNIT_SLIP_RATIO (100) times faster than the ideal (seconds read as
milliseconds?).

Outliers: a fitted metric's observations (both halves) more than 10 x off the fitted prediction
either way are counted per metric, with the worst (`Calibration.outliers`): a fit can be
plausible and its medians good while a few rows are absurd (a TTFT of 5,000 s among 0.2 s
ones), which the robust loss discounts without a word.

Candidates: a log from a hosted API names its model but not the hardware behind it.
`calibrate_candidates` calibrates the log on each candidate deployment, rules out the
implausible ones (and those serving another catalog model than the log's `model` column names)
and keeps the plausible one whose *catalog* factors explain the fit half best
once the client latency alone is fitted (`catalog_error`: the mean over the fitted metrics of
the fit half's median per-request error). Why not the error after the full fit: five free
factors absorb a wrong GPU (the AIBrix log, served by an A10, fits an H100 or an A100 within
two or four points of the A10 once their factors move far from their families': docs/physics.md
section 6), while the catalog's factors are what
is known about each GPU and the client path is what the log does not say. The held-out half
never takes part in the choice, so its errors stay an honest test of the kept candidate. The
one kept is the best explanation the catalog's physics gives among those offered, not a
finding of what the provider ran.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
from scipy.optimize import least_squares

from pipelines.replay import ReplayError, replay_fleet
from pipelines.replay.api import deployment_problem, frame_problem
from pipelines.roofline import step
from pipelines.roofline.catalog import another_model
from pipelines.roofline.deployment import Deployment

PARAMETERS = ("compute_efficiency", "bandwidth_efficiency", "step_overhead_s", "sequence_overhead_s",
              "net_one_way_s")
BOUNDS = {
    "compute_efficiency": (0.01, 1.0),
    "bandwidth_efficiency": (0.01, 1.0),
    "step_overhead_s": (1e-5, 1.0),
    "sequence_overhead_s": (1e-7, 0.01),
    "net_one_way_s": (1e-5, 1.0),
}
# A request log's observed latencies: the two a log records (`requests` columns), and the time
# per output token derived from them, (e2e - ttft) / (output_tokens - 1): the decode stage alone,
# as the client saw it from its first token to its last, free of the queue, the prefill and the
# client path that TTFT and e2e both carry. Clients define their own TPOT differently (AIBrix's
# divides by every output token, vLLM's benchmark by all but the first), so it is derived here,
# the same way on both sides of the comparison. The fit uses TTFT and e2e unless told otherwise:
# e2e already holds the decode, which fitting TPOT as well would count twice.
LOGGED_METRICS = {"ttft": "observed_ttft_s", "e2e": "observed_e2e_s"}
REQUEST_METRICS = (*LOGGED_METRICS, "tpot")
DEFAULT_FIT_METRICS = ("ttft", "e2e")
FIT, HELD_OUT = "fit", "held_out"
# Residuals are log ratios: beyond F_SCALE (about 20%) an observation counts linearly, not
# quadratically. DIFF_STEP: relative step of the finite differences in log-parameter space, wide
# enough to step over the replay's discrete batching decisions. MAX_EVALUATIONS bounds the work.
F_SCALE = 0.2
DIFF_STEP = 0.05
MAX_EVALUATIONS = 400
ALL_SHAPES = "all"
OVERHEADS = ("step_overhead_s", "sequence_overhead_s", "net_one_way_s")
# Every factor at its slow bound: efficiencies at their floor, overheads at their ceiling.
SLOWEST = {p: BOUNDS[p][1] if p in OVERHEADS else BOUNDS[p][0] for p in PARAMETERS}
# The ideal deployment of the plausibility check: every factor at its best (module docstring).
IDEAL = {"compute_efficiency": 1.0, "bandwidth_efficiency": 1.0,
         **{p: BOUNDS[p][0] for p in OVERHEADS}}
# Where the fit starts a parameter whose own value lies below this: in log space, near the lower
# bound of the per-sequence overhead (0.1 us) a step of 5% moves a step by nanoseconds, the
# finite differences see no slope and the fit stays where it started. From 10 us it finds the
# BurstGPT log's ~0.35 ms (docs/physics.md section 6) and a catalog's 1 us where that is right.
START_AT_LEAST = {"sequence_overhead_s": 1e-5}
# What the catalog cannot know about a log: the path between the engine and the client.
CLIENT_ONLY = ("net_one_way_s",)
# A fitted value within this ratio of a bound counts as at the bound: the finite differences
# step 5% (DIFF_STEP in log space), so the fit cannot settle closer to a bound than that.
AT_BOUND = 1.05
# An observation of a fitted metric more than OUTLIER_RATIO times slower or faster than the
# fitted model predicts (|residual| beyond ln 10, 11 F_SCALEs) is counted (Calibration.outliers):
# the robust loss discounts it without a word. Server jitter stays well inside (the shared logs'
# worst are in docs/physics.md §6); a unit slip, a clock jump, a cold start, a stalled request
# or a measurement that is not what it is read as do not.
OUTLIER_RATIO = 10.0
# Every fitted metric's median observation more than UNIT_SLIP_RATIO times faster than the
# deployment at its ideal asks whether seconds were read as milliseconds (a generic log's
# latency_unit), as every factor at its slow bound asks the converse. A unit slip is 1,000 x,
# and real engines run at a few times their ideal: the AIBrix log read so is 300 x (TTFT) and
# 615 x (e2e) faster than its A10. Wrong hardware, precision or model do not reach 100 x in
# both metrics: the 1B BurstGPT log on the 405B model (8 x A100, int8) is 3.6 x / 4.6 x; only
# a replay the log swamps queues its TTFT that far (70B on 8 x L4: 1,656 x), and its e2e, which
# carries the decode the queue does not inflate as much, stays at 18 x. Hence every metric.
UNIT_SLIP_RATIO = 100.0


class CalibrationError(ValueError):
    """The observations cannot calibrate the deployment (the message says why)."""


@dataclass(frozen=True)
class Calibration:
    before: Deployment
    after: Deployment
    errors: pl.DataFrame  # shape, split, metric, observations, median_observed_s, (shape_)error_before/after, error_baseline
    cost_before: float
    cost_after: float
    fit_metrics: tuple[str, ...]  # the metrics the fit used
    warnings: tuple[str, ...]  # why the deployment may not be the one that served the log
    # per fitted metric with any, the observations (both halves) beyond OUTLIER_RATIO of the
    # fitted prediction: how many, and the worst one
    outliers: tuple[str, ...]
    # fit-half errors: the mean over the fitted metrics of the fit half's median per-request
    # error, after the full fit and with the catalog's factors (only the client latency fitted,
    # for request logs; as they are, for step times)
    fit_error: float
    catalog_error: float
    # observations left out of the fit and the errors, one sentence per group: step measurements
    # faster than the deployment can be at 100% of peak (calibrate_steps)
    left_out: tuple[str, ...] = ()

    def at_bound(self) -> list[str]:
        """The fitted parameters that ended at a bound that means implausible (module docstring)."""
        return list(_at_bound(self.after))

    def parameters(self) -> dict[str, tuple[float, float]]:
        """{parameter: (before, after)}."""
        return {p: (parameter(self.before, p), parameter(self.after, p)) for p in PARAMETERS}

    def held_out_error(self, metric: str, column: str = "error") -> tuple[float, float]:
        """(before, after) `error` or `shape_error` over all held-out observations of `metric`."""
        row = self.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("split") == HELD_OUT)
                                 & (pl.col("metric") == metric))
        if row.height == 0:
            raise KeyError(f"no held-out {metric} observations")
        return float(row[f"{column}_before"][0]), float(row[f"{column}_after"][0])


def parameter(d: Deployment, name: str) -> float:
    if name == "net_one_way_s":
        return d.network.one_way_s
    return getattr(d.efficiency, name)


def with_parameters(d: Deployment, values: dict[str, float]) -> Deployment:
    """The deployment with some of PARAMETERS replaced."""
    efficiency = {k: v for k, v in values.items() if k != "net_one_way_s"}
    network = d.network if "net_one_way_s" not in values else replace(
        d.network, one_way_s=values["net_one_way_s"])
    return replace(d, efficiency=replace(d.efficiency, **efficiency), network=network)


# ---- predictions ------------------------------------------------------------------------------

def predict_requests(d: Deployment, requests: pl.DataFrame, *, router: str = "least_outstanding",
                     hash_tokens: int | None = None) -> pl.DataFrame:
    """request_id, ttft, e2e, tpot (derived as the observed one is, LOGGED_METRICS' comment;
    null for a one-token answer): the replay of the whole log on `d` with the replay asset's
    router and the trace's tokens per prefix hash (trace_files.prefix_block_tokens)."""
    stages = replay_fleet(requests, d, router=router, hash_tokens=hash_tokens).stages
    return stages.select("request_id", ttft="ttft_s", e2e="e2e_s", tpot=_tpot("ttft_s", "e2e_s"))


def _tpot(ttft: str, e2e: str) -> pl.Expr:
    """(e2e - ttft) / (output_tokens - 1), null for a one-token answer: the one definition of
    the time per output token, for the observed latencies and the replayed ones alike."""
    return pl.when(pl.col("output_tokens") >= 2).then(
        (pl.col(e2e) - pl.col(ttft)) / (pl.col("output_tokens") - 1))


def predict_steps(d: Deployment, steps: pl.DataFrame) -> np.ndarray:
    """Seconds of each measured step: the prefill of `batch` prompts of `prompt_tokens` in one
    step, or one decode step over `batch` sequences of `context_tokens` each (either way `batch`
    sequences, one LM-head row each; a decode step padded to the deployment's CUDA-graph batch
    sizes, as Deployment.decode_step_s pads it)."""
    prefill = pl.col("kind") == "prefill"
    batch = pl.col("batch").cast(pl.Float64)
    prompt = pl.col("prompt_tokens").cast(pl.Float64)
    context = pl.col("context_tokens").cast(pl.Float64)
    arrays = steps.select(
        is_prefill=prefill,
        batch=batch,
        prompt=prompt,
        tokens=pl.when(prefill).then(batch * prompt).otherwise(batch),
        decode_pairs=batch * context,
        kv_read=pl.when(prefill).then(0.0).otherwise(batch * context),
        kv_written=pl.when(prefill).then(batch * prompt).otherwise(batch),
    )
    col = {c: arrays[c].to_numpy() for c in arrays.columns}
    pairs = np.where(col["is_prefill"],
                     col["batch"] * step.chunk_attn_pairs(0.0, col["prompt"]), col["decode_pairs"])
    # the padding's GEMMs and per-sequence work are part of the measured step, and of the
    # replayed one: fitted without them, the factors would charge them twice in the replay
    padded = step.graph_batches(d.scheduler.graph_sizes, col["batch"].astype(np.float64))
    gemm_batch = np.where(col["is_prefill"], col["batch"], padded)
    tokens = np.where(col["is_prefill"], col["tokens"], padded)
    return step.step_seconds(d.coefficients, tokens, gemm_batch, pairs, col["kv_read"],
                             col["kv_written"])


# ---- arguments ----------------------------------------------------------------------------------

def _check_frame(name: str, frame) -> None:
    """A CalibrationError naming the argument when it is not a polars DataFrame."""
    problem = frame_problem(name, frame)
    if problem:
        raise CalibrationError(problem)


def _check_deployment(name: str, d) -> None:
    """A CalibrationError naming what was passed where a Deployment belongs (a name, say)."""
    problem = deployment_problem(name, d)
    if problem:
        raise CalibrationError(problem)


def _check_buckets(buckets) -> None:
    """The shape buckets every error is grouped by: prompt and output rows of shape_buckets.csv."""
    _check_frame("buckets", buckets)
    expected = "the shape buckets of shape_buckets.csv (pipelines.roofline.catalog.load_shape_buckets())"
    missing = {"dimension", "lower", "label"} - set(buckets.columns)
    if missing:
        raise CalibrationError(f"buckets lack column(s) {sorted(missing)}: expected {expected}")
    for dimension in ("prompt", "output"):
        if buckets.filter(pl.col("dimension") == dimension).height == 0:
            raise CalibrationError(f"buckets have no {dimension!r} rows: expected {expected}")


# ---- observations in long form ------------------------------------------------------------------

def _request_observations(requests: pl.DataFrame, buckets: pl.DataFrame) -> pl.DataFrame:
    """request_id, shape, metric, observed, split (alternating over each logged metric's
    observations in arrival order; a TPOT in its e2e's half)."""
    _check_frame("requests", requests)
    _check_buckets(buckets)
    missing = {"request_id", "arrival_s", "prompt_tokens", "output_tokens",
               *LOGGED_METRICS.values()} - set(requests.columns)
    if missing:
        raise CalibrationError(f"requests lack column(s) {sorted(missing)}")
    for column in ("arrival_s", "prompt_tokens", "output_tokens", *LOGGED_METRICS.values()):
        if not (requests.schema[column].is_numeric() or requests.schema[column] == pl.Null):
            raise CalibrationError(f"requests column {column} holds {requests.schema[column]}:"
                                   f" expected numbers")
    # one log is one fleet: the replay would queue and batch two traces' requests together
    # (the calibration_requests view holds every observed trace)
    traces = requests["trace"].unique(maintain_order=True) if "trace" in requests.columns else []
    if len(traces) > 1:
        raise CalibrationError(f"requests hold {len(traces)} traces ({', '.join(map(str, traces))}):"
                               f" calibrate one log at a time (pipelines.replay.by_trace splits them)")
    # predictions are matched to observations by request_id: a repeated or missing id would
    # pair a request with another one's replayed latency
    ids = requests["request_id"]
    if ids.null_count() or ids.is_duplicated().any():
        which = "is empty" if ids.null_count() else f"{ids.filter(ids.is_duplicated())[0]!r} is used twice"
        raise CalibrationError(f"requests column request_id {which}: expected one distinct id per"
                               f" request (a log concatenated from several, each numbered from 0?)")
    ordered = requests.sort("arrival_s", maintain_order=True).with_row_index("order")
    long = pl.concat([
        ordered.select("request_id", "prompt_tokens", "output_tokens", "order",
                       metric=pl.lit(metric), observed=pl.col(column).cast(pl.Float64))
        for metric, column in LOGGED_METRICS.items()
    ]).filter(pl.col("observed").is_not_null())
    # a latency cannot be negative, NaN or infinite (the fit's residuals would be too); 0 s is a
    # log's mark for "not measured" and is left out, saying so when nothing else is left
    bad = long.filter(~pl.col("observed").is_finite() | (pl.col("observed") < 0))
    if bad.height:
        first = bad.row(0, named=True)
        raise CalibrationError(
            f"request {first['request_id']!r}: observed {first['metric']} is {first['observed']}"
            f" s: expected a finite latency of 0 s or more ({bad.height} such observation(s))")
    zeros = long.filter(pl.col("observed") == 0).height
    long = long.filter(pl.col("observed") > 0)
    if long.height == 0:
        raise CalibrationError("no request carries an observed TTFT or end-to-end latency" + (
            f" above 0 s ({zeros} observation(s) of 0 s, which no request can take, are left out)"
            if zeros else ""))
    # each metric's observations alternate between the halves, not every request's: in a partly
    # observed log (TTFT on every other request, e2e on all of them, say) a numbering over all
    # requests, or over those observed on any metric, put all of one metric in one half. Where
    # every observed request carries both metrics, a request falls in the same half of both.
    observed_order = pl.col("order").rank("dense").over("metric") - 1
    logged = _with_shape(long, buckets).with_columns(
        split=pl.when(observed_order % 2 == 0).then(pl.lit(FIT)).otherwise(pl.lit(HELD_OUT))
    ).drop("order")
    return pl.concat([logged, _tpot_observations(logged)])


def _tpot_observations(logged: pl.DataFrame) -> pl.DataFrame:
    """The time per output token of every request observed on both TTFT and e2e with two output
    tokens or more (LOGGED_METRICS' comment), in `logged`'s columns. Each takes the half of its
    request's e2e observation, from which it is derived: a TPOT in the held-out half whose e2e
    the fit saw would not be held out. A request whose TTFT is not before its e2e has none (the
    ingest rejects a first token after the end of the answer, formats/rows.py; in a frame built
    by hand its TTFT and e2e are still judged, and counted as outliers where absurd)."""
    wide = logged.filter(pl.col("output_tokens") >= 2).pivot(
        "metric", index=["request_id", "prompt_tokens", "output_tokens", "shape"],
        values=["observed", "split"])
    if not {"observed_ttft", "observed_e2e"} <= set(wide.columns):
        return logged.clear()
    return wide.filter(pl.col("observed_ttft").is_not_null() & pl.col("observed_e2e").is_not_null()).select(
        "request_id", "prompt_tokens", "output_tokens", metric=pl.lit("tpot"),
        observed=_tpot("observed_ttft", "observed_e2e"), shape="shape", split="split_e2e",
    ).filter(pl.col("observed") > 0).select(logged.columns)


def _step_observations(steps: pl.DataFrame, buckets: pl.DataFrame) -> pl.DataFrame:
    """kind, batch, tokens, shape (`prefill` / `decode`, batch, prompt bucket), metric, observed,
    split (alternating in row order)."""
    _check_frame("steps", steps)
    _check_buckets(buckets)
    missing = {"kind", "batch", "prompt_tokens", "context_tokens", "observed_s"} - set(steps.columns)
    if missing:
        raise CalibrationError(f"step measurements lack column(s) {sorted(missing)}")
    kinds = set(steps["kind"].unique()) - {"prefill", "decode"}
    if kinds:   # sorted by text: a missing kind (None) does not compare with 'warmup'
        raise CalibrationError(f"step kind(s) {sorted(kinds, key=str)}: expected 'prefill' or 'decode'")
    if not steps.schema["observed_s"].is_numeric():
        raise CalibrationError(f"step measurements column observed_s holds "
                               f"{steps.schema['observed_s']}: expected seconds")
    # a step time the log of residuals cannot take stopped scipy ('Residuals are not finite')
    bad = steps.with_row_index("row").filter(
        pl.col("observed_s").is_null() | ~(pl.col("observed_s").cast(pl.Float64) > 0)
        | ~pl.col("observed_s").cast(pl.Float64).is_finite())
    if bad.height:
        raise CalibrationError(f"step measurement row {bad['row'][0]}: observed_s is "
                               f"{bad['observed_s'][0]}: expected a finite number of seconds > 0"
                               f" ({bad.height} such row(s))")
    prompt_breaks, prompt_labels = _labels(buckets, "prompt")
    return steps.with_row_index("order").with_columns(
        metric=pl.col("kind"), observed=pl.col("observed_s").cast(pl.Float64),
        shape=pl.concat_str(
            pl.col("kind"), pl.lit(" batch "), pl.col("batch").cast(pl.String), pl.lit(" / "),
            _bucket("prompt_tokens", prompt_breaks, prompt_labels)),
        split=pl.when(pl.col("order") % 2 == 0).then(pl.lit(FIT)).otherwise(pl.lit(HELD_OUT)),
    ).drop("order")


# ---- fitting -----------------------------------------------------------------------------------

def _fit(before: Deployment, predict, observed: np.ndarray, fit_mask: np.ndarray,
         names: tuple[str, ...] = PARAMETERS) -> tuple[Deployment, float]:
    """Least squares on log(predicted / observed) over the fit half, in log-parameter space,
    of the parameters `names` (the others keep `before`'s values): the fitted deployment and
    its robust cost on the fit half."""
    names = list(names)
    low = np.log([BOUNDS[p][0] for p in names])
    high = np.log([BOUNDS[p][1] for p in names])
    start = np.clip(np.log([max(parameter(before, p), START_AT_LEAST.get(p, BOUNDS[p][0]))
                            for p in names]),
                    low + 1e-9, high - 1e-9)
    log_observed = np.log(observed[fit_mask])

    def residuals(x: np.ndarray) -> np.ndarray:
        candidate = with_parameters(before, dict(zip(names, np.exp(x), strict=True)))
        return np.log(predict(candidate)[fit_mask]) - log_observed

    result = least_squares(residuals, start, bounds=(low, high), loss="soft_l1", f_scale=F_SCALE,
                           x_scale=1.0, diff_step=DIFF_STEP, max_nfev=MAX_EVALUATIONS)
    return with_parameters(before, dict(zip(names, np.exp(result.x), strict=True))), result.cost


def _cost(predicted: np.ndarray, observed: np.ndarray) -> float:
    """Median |log(predicted / observed)| (a scale-free summary of the fit)."""
    return float(np.median(np.abs(np.log(predicted / observed))))


def _error_table(obs: pl.DataFrame, predicted_before: np.ndarray,
                 predicted_after: np.ndarray) -> pl.DataFrame:
    fit_half = obs.filter(pl.col("split") == FIT)
    shape_medians = fit_half.group_by("shape", "metric").agg(shape_median=pl.col("observed").median())
    metric_medians = fit_half.group_by("metric").agg(metric_median=pl.col("observed").median())
    frame = obs.with_columns(
        pred_before=pl.Series(predicted_before), pred_after=pl.Series(predicted_after)
    ).join(shape_medians, on=["shape", "metric"], how="left", maintain_order="left").join(
        metric_medians, on="metric", how="left", maintain_order="left"
    ).with_columns(
        err_before=(pl.col("pred_before") / pl.col("observed") - 1.0).abs(),
        err_after=(pl.col("pred_after") / pl.col("observed") - 1.0).abs(),
        # a shape absent from the fit half falls back to its metric's fit-half median
        err_baseline=(pl.coalesce("shape_median", "metric_median") / pl.col("observed") - 1.0).abs(),
    )
    aggregations = dict(
        observations=pl.len(), median_observed_s=pl.col("observed").median(),
        error_before=pl.col("err_before").median(), error_after=pl.col("err_after").median(),
        shape_error_before=(pl.col("pred_before").median() / pl.col("observed").median() - 1).abs(),
        shape_error_after=(pl.col("pred_after").median() / pl.col("observed").median() - 1).abs(),
        error_baseline=pl.col("err_baseline").median(),
    )
    per_shape = frame.group_by("shape", "split", "metric").agg(**aggregations)
    overall = frame.group_by("split", "metric").agg(**aggregations).with_columns(
        shape=pl.lit(ALL_SHAPES))
    return pl.concat([per_shape, overall.select(per_shape.columns)]).with_columns(
        pl.col("observations").cast(pl.Int64)).sort("split", "metric", "shape")


def _labels(buckets: pl.DataFrame, dimension: str) -> tuple[list[float], list[str]]:
    rows = buckets.filter(pl.col("dimension") == dimension).sort("lower")
    return [float(x) for x in rows["lower"][1:]], rows["label"].to_list()


def _bucket(column: str, breaks: list[float], labels: list[str]) -> pl.Expr:
    """The label of the last bucket whose lower edge the value reaches (edges ascending)."""
    expr = pl.lit(labels[0])
    for edge, label in zip(breaks, labels[1:], strict=True):
        expr = pl.when(pl.col(column) >= edge).then(pl.lit(label)).otherwise(expr)
    return expr


def _with_shape(frame: pl.DataFrame, buckets: pl.DataFrame) -> pl.DataFrame:
    """The prompt-bucket x output-bucket label of shape_buckets.csv (same edges as the reports)."""
    prompt_breaks, prompt_labels = _labels(buckets, "prompt")
    output_breaks, output_labels = _labels(buckets, "output")
    return frame.with_columns(
        shape=pl.concat_str(
            _bucket("prompt_tokens", prompt_breaks, prompt_labels),
            pl.lit(" / "),
            _bucket("output_tokens", output_breaks, output_labels),
        )
    )


def calibrate_requests(d: Deployment, requests: pl.DataFrame, buckets: pl.DataFrame,
                       fit_metrics: tuple[str, ...] | None = None, *,
                       router: str = "least_outstanding",
                       hash_tokens: int | None = None) -> Calibration:
    """Fit `d` to a request log's observed latencies (module docstring). `requests` is the whole
    log, observed or not: every request queues and batches in the replay. `fit_metrics` (some of
    ttft, e2e, tpot) are the ones the fit uses; none: those of DEFAULT_FIT_METRICS the log
    observes (a log of end-to-end times alone is fitted on them). Leave e2e and tpot out when
    the log's output token counts are estimates (every observed metric is still reported). A
    metric named but absent from the fit half beside others it holds is refused, not dropped.
    `router` and `hash_tokens` are the replay's (pipelines.replay.replay_fleet)."""
    _check_deployment("d", d)
    if isinstance(fit_metrics, str):   # fit_metrics="ttft": one metric, not its letters
        fit_metrics = (fit_metrics,)
    if fit_metrics is not None:
        if not isinstance(fit_metrics, (list, tuple, set, frozenset)):
            raise CalibrationError(f"fit_metrics={fit_metrics!r}: expected some of {list(REQUEST_METRICS)}")
        unknown = set(fit_metrics) - set(REQUEST_METRICS)
        if unknown or not fit_metrics:
            raise CalibrationError(f"fit_metrics {list(fit_metrics)}: expected some of {list(REQUEST_METRICS)}")
    obs = _request_observations(requests, buckets)
    in_fit_half = set(obs.filter(pl.col("split") == FIT)["metric"])
    if fit_metrics is None:   # none of them observed: _calibrate says what the log holds instead
        fit_metrics = tuple(m for m in DEFAULT_FIT_METRICS if m in in_fit_half) or DEFAULT_FIT_METRICS
    # a named metric the fit half lacks beside others it holds (the TPOT of a log without e2e,
    # of one-token answers or of unstreamed requests whose TTFT is their e2e) was dropped
    # without a word: the fit ran on the others while its fit_metrics, and the asset's
    # fit_metrics metadata, named it. (With none of them, _calibrate says the fit half is empty.)
    absent = [m for m in dict.fromkeys(fit_metrics) if m not in in_fit_half]
    if absent and in_fit_half & set(fit_metrics):
        raise CalibrationError(
            f"fit_metrics names {' / '.join(absent)}, of which the fit half holds no observation"
            f" ({_observed_metrics(obs)}): leave it out of fit_metrics")
    order = {metric: number for number, metric in enumerate(REQUEST_METRICS)}
    ids = obs["request_id"]
    metric_index = obs["metric"].replace_strict(order, return_dtype=pl.Int64).to_numpy()

    def predict(candidate: Deployment) -> np.ndarray:
        table = predict_requests(candidate, requests, router=router, hash_tokens=hash_tokens)
        joined = pl.DataFrame({"request_id": ids}).join(table, on="request_id", how="left",
                                                         maintain_order="left")
        every = np.column_stack([joined[m].to_numpy() for m in REQUEST_METRICS])
        return every[np.arange(len(metric_index)), metric_index]

    return _calibrate(d, obs, predict, fit_metrics, client_path=True)


def calibrate_steps(d: Deployment, steps: pl.DataFrame, buckets: pl.DataFrame) -> Calibration:
    """Fit `d` to measured prefill and decode step times (module docstring). The network
    one-way latency does not enter step times and keeps its value."""
    _check_deployment("d", d)
    obs = _step_observations(steps, buckets)
    obs, impossible = _impossible_steps(d, obs)
    result = _calibrate(d, obs, lambda candidate: predict_steps(candidate, obs),
                        ("prefill", "decode"), client_path=False)
    return replace(result, left_out=impossible)


def _impossible_steps(d: Deployment, obs: pl.DataFrame) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """(the step measurements `d` can reach, one sentence per shape of those it cannot). A step
    measured faster than `d` with every factor at its ideal (100% of peak compute and bandwidth,
    overheads at their floor) is not a step of `d`: no setting of the factors reaches it, so
    fitting it would only pull the others, and the error tables would judge the model by it.
    Such rows are left out, named with their shape, measured and ideal time. SplitwiseSim's
    perf_model.csv has them: its batch-64 prefills of 512 tokens take 0.79 s on 2 x A100 (batch
    32: 6.6 s), 32,768 prompt tokens of a 70B model at 9 x the GPUs' peak FLOP/s. Only a
    minority of a metric's measurements is left out: where half or more are out of reach, the
    deployment is the wrong one, which the plausibility check (on the median) says instead."""
    ideal = pl.Series("ideal_s", predict_steps(_ideal(d), obs), dtype=pl.Float64)
    faster = pl.col("observed") < pl.col("ideal_s")
    marked = obs.with_columns(ideal_s=ideal).with_columns(
        impossible=faster & (faster.mean().over("metric") < 0.5))
    sentences = tuple(
        f"{count} of {obs.filter(pl.col('shape') == shape).height} measurements of {shape}"
        f" ({batch} x {prompt} prompt tokens) left out of the fit and the errors: measured"
        f" {measured:.4g} s, faster than"
        f" {d.name} can be ({fastest:.4g} s at 100% of peak compute and bandwidth and no step"
        f" overhead, with the catalog's all-reduce and per-layer launch costs)"
        for shape, batch, prompt, count, measured, fastest in marked.filter("impossible")
        .group_by("shape", "batch", "prompt_tokens", maintain_order=True)
        .agg(pl.len(), pl.col("observed").median(), pl.col("ideal_s").median()).iter_rows())
    return marked.filter(~pl.col("impossible")).drop("ideal_s", "impossible"), sentences


def _calibrate(d: Deployment, obs: pl.DataFrame, predict, fit_metrics: tuple[str, ...], *,
               client_path: bool) -> Calibration:
    """The fit, its errors and warnings. `client_path`: whether the observations cross the
    client path (request logs) or not (step times, where the catalog error is the error before).

    On a request log the client latency is first fitted alone (Calibration.catalog_error is the
    fit-half error there), and the full fit runs twice, from the catalog's factors and from that
    client fit, keeping the lower fit-half cost. The replay's cost surface is rough (discrete
    batching decisions) and a trust-region fit can stall near its start: from the catalog's
    factors the AIBrix log stalled at 40% held-out TTFT error, with every TTFT off by the same
    unknown client path; from the client fit, BurstGPT's x100 log settles on a worse optimum
    than from the catalog's factors. Neither start is best for every log, and the fit half
    decides between them."""
    observed = obs["observed"].to_numpy()
    fit_mask = ((obs["split"] == FIT) & obs["metric"].is_in(list(fit_metrics))).to_numpy()
    if fit_mask.sum() < len(PARAMETERS):
        # what the log does observe: fitting a metric it lacks (fit_metrics_by_trace) read as a
        # log too short to calibrate
        raise CalibrationError(
            f"{int(fit_mask.sum())} observations of {' / '.join(fit_metrics)} in the fit half: need"
            f" at least {len(PARAMETERS)} ({_observed_metrics(obs)})")
    before = predict(d)
    fits = [_fit(d, predict, observed, fit_mask)]
    client_only = before
    if client_path:
        client_fit, _ = _fit(d, predict, observed, fit_mask, names=CLIENT_ONLY)
        fits.append(_fit(client_fit, predict, observed, fit_mask))
        client_only = predict(client_fit)
    after_deployment = min(fits, key=lambda fit: fit[1])[0]
    after = predict(after_deployment)
    ideal = predict(_ideal(d))
    if not all(np.isfinite(x).all() for x in (before, after, ideal, client_only)):
        raise CalibrationError("the replay left some observed request without a prediction")
    # judged on what the fit saw: the fit half of the fitted metrics (not estimated ones)
    metrics = obs["metric"].to_numpy()[fit_mask]
    return Calibration(
        before=d, after=after_deployment, errors=_error_table(obs, before, after),
        cost_before=_cost(before, observed), cost_after=_cost(after, observed),
        fit_metrics=tuple(fit_metrics),
        warnings=_plausibility(d, after_deployment, metrics, observed[fit_mask], ideal[fit_mask]),
        outliers=_outliers(obs, after, fit_metrics),
        fit_error=_mean_median_error(after[fit_mask], observed[fit_mask], metrics),
        catalog_error=_mean_median_error(client_only[fit_mask], observed[fit_mask], metrics),
    )


def _observed_metrics(obs: pl.DataFrame) -> str:
    """What the log observes, for a refusal to fit what it does not."""
    counts = obs.group_by("metric", maintain_order=True).len().iter_rows()
    return "observations in the log, both halves: " + ", ".join(f"{m} {n}" for m, n in counts)


def _outliers(obs: pl.DataFrame, predicted: np.ndarray, fit_metrics: tuple[str, ...]) -> tuple[str, ...]:
    """One sentence per fitted metric with observations beyond OUTLIER_RATIO of the fitted
    prediction, either way (module constant): a metric left out of the fit is not judged (the
    BurstGPT log's e2e, on estimated output tokens, is off by up to 500 x)."""
    frame = obs.with_columns(predicted=pl.Series(predicted, dtype=pl.Float64)).filter(
        pl.col("metric").is_in(list(fit_metrics))).with_columns(
        off=(pl.col("predicted") / pl.col("observed")).log().abs())
    sentences = []
    for metric in fit_metrics:
        rows = frame.filter(pl.col("metric") == metric)
        beyond = rows.filter(pl.col("off") > math.log(OUTLIER_RATIO))
        if beyond.height == 0:
            continue
        worst = beyond.sort("off", descending=True).row(0, named=True)
        which = f"request {worst['request_id']}" if "request_id" in worst else worst["shape"]
        in_fit = beyond.filter(pl.col("split") == FIT).height
        sentences.append(
            f"{beyond.height} of {rows.height} observed {metric} are more than {OUTLIER_RATIO:g}×"
            f" off the fitted prediction ({in_fit} in the fit half, which the robust loss discounts"
            f" without a word); the worst, {which}: observed {worst['observed']:.4g} s, predicted"
            f" {worst['predicted']:.4g} s: check it in the log")
    return tuple(sentences)


def _mean_median_error(predicted: np.ndarray, observed: np.ndarray, metrics: np.ndarray) -> float:
    """Mean over the metrics of the median per-observation |predicted / observed - 1|."""
    error = np.abs(predicted / observed - 1)
    return float(np.mean([np.median(error[metrics == m]) for m in dict.fromkeys(metrics)]))


def _ideal(d: Deployment) -> Deployment:
    """`d` with every fitted factor at its best: 100% of peak compute and bandwidth, overheads
    at their floor (or the catalog's own value where that is lower)."""
    return with_parameters(d, {p: min(IDEAL[p], parameter(d, p)) if p in OVERHEADS else IDEAL[p]
                               for p in PARAMETERS})


def _at_bound(fitted: Deployment) -> dict[str, float]:
    """The fitted parameters at a bound that means implausible, each with that bound: an
    efficiency at 100% of peak or at 1%, or an overhead at its ceiling (BOUNDS; a small overhead
    at its floor is plausible: the engine simply has none to speak of)."""
    bounded = {}
    for name in PARAMETERS:
        value, (low, high) = parameter(fitted, name), BOUNDS[name]
        if value * AT_BOUND >= high:
            bounded[name] = high
        elif name not in OVERHEADS and value <= low * AT_BOUND:
            bounded[name] = low
    return bounded


def _plausibility(d: Deployment, fitted: Deployment, metrics: np.ndarray, observed: np.ndarray,
                  ideal: np.ndarray) -> tuple[str, ...]:
    """The warnings of the module docstring's plausibility checks, one sentence each."""
    served_by = f"{d.name} ({d.model.model} on {d.tp} x {d.gpu.gpu}, {d.weight_dtype} weights)"
    warnings = []
    far_faster = True
    for metric in dict.fromkeys(metrics):
        rows = metrics == metric
        observed_median, ideal_median = float(np.median(observed[rows])), float(np.median(ideal[rows]))
        far_faster &= observed_median * UNIT_SLIP_RATIO < ideal_median
        if observed_median < ideal_median:
            warnings.append(
                f"median observed {metric} {observed_median:.4g} s is faster than {served_by} "
                f"can be ({ideal_median:.4g} s at 100% of peak compute and bandwidth, no step "
                f"overhead, no client latency): the log was served by other hardware, "
                f"parallelism, precision or model")
    # the bound and the margin named: "fitted to 0.9631, at its bound" read as a bound of 0.9631
    bounded = _at_bound(fitted)
    for name, bound in bounded.items():
        warnings.append(f"{name} was fitted to {parameter(fitted, name):.4g}, at its bound of"
                        f" {bound:g} (within {AT_BOUND - 1:.0%}, as close as the fit settles):"
                        f" {served_by} cannot explain the log without it")
    if bounded == SLOWEST:   # a log in ms read as s (generic.py): a setting to name, not hardware
        warnings.append(f"every factor ended at its slow bound: the log is slower than {served_by} at"
                        f" its slowest; latencies in milliseconds read as seconds? (a CSV, JSONL or"
                        f' Parquet log\'s sidecar takes "latency_unit": "ms")')
    if far_faster:   # the converse: a log in s read as ms, its sidecar's latency_unit wrong
        warnings.append(f"every fitted metric's median is more than {UNIT_SLIP_RATIO:g}× faster than"
                        f" {served_by} can be at 100% of peak compute and bandwidth: latencies in"
                        f" seconds read as milliseconds? (a CSV, JSONL or Parquet log's sidecar's"
                        f' "latency_unit", "s" unless set, is the unit of its observed latencies)')
    return tuple(warnings)


CANDIDATE_SCHEMA = {"deployment": pl.String, "plausible": pl.Boolean, "catalog_error": pl.Float64,
                    "fit_error": pl.Float64, "kept": pl.Boolean, "why_not": pl.String}


@dataclass(frozen=True)
class Choice:
    """The candidate kept for a log, how every candidate did (CANDIDATE_SCHEMA), and the
    calibration of every candidate that could be calibrated, in the order offered."""
    kept: Calibration
    candidates: pl.DataFrame
    calibrations: tuple[Calibration, ...]


def calibrate_candidates(candidates: list[Deployment], requests: pl.DataFrame, buckets: pl.DataFrame,
                         fit_metrics: tuple[str, ...] | None = None, *,
                         router: str = "least_outstanding",
                         hash_tokens: int | None = None,
                         catalog_models: Iterable[str] = ()) -> Choice:
    """Calibrate the log on every candidate and keep the plausible one whose catalog factors
    explain its fit half best, only the client latency fitted (module docstring); with no
    plausible candidate, the best of the rest is kept and its warnings say why. A candidate
    that cannot be calibrated on the log (too few observations, a request it cannot serve) is
    listed with the reason; if none can, CalibrationError says why for each. With one
    candidate this is calibrate_requests, plus the model check below.

    `catalog_models`: the catalog's model names, to place the names of the log's `model`
    column on (catalog.model_named). A candidate serving another model than one the log names
    is not plausible, however well it fits (_other_models): a 70B log fits a 7B deployment
    at 35% of peak bandwidth, and a candidate of another model was kept and called plausible
    while the kept fit's warnings said it could not have served the log."""
    if isinstance(candidates, Deployment) or not isinstance(candidates, (list, tuple)):
        raise CalibrationError(f"candidates: expected a list of Deployments, got "
                               f"{type(candidates).__name__} (calibrate_requests takes one)")
    if not candidates:
        raise CalibrationError("no candidate deployment to calibrate")
    for number, d in enumerate(candidates):
        _check_deployment(f"candidates[{number}]", d)
    catalog_models = tuple(catalog_models)   # read once per candidate
    results, rows = [], []
    for d in candidates:
        try:
            results.append(calibrate_requests(d, requests, buckets, fit_metrics, router=router,
                                              hash_tokens=hash_tokens))
        except (CalibrationError, ReplayError) as exc:
            rows.append({"deployment": d.name, "plausible": False, "catalog_error": None,
                         "fit_error": None, "kept": False, "why_not": str(exc)})
    if not results:
        raise CalibrationError("; ".join(f"{r['deployment']}: {r['why_not']}" for r in rows))
    results = [replace(r, warnings=r.warnings + _other_models(requests, r.before, catalog_models))
               for r in results]
    kept = min([r for r in results if not r.warnings] or results, key=lambda r: r.catalog_error)
    rows = [{"deployment": r.before.name, "plausible": not r.warnings,
             "catalog_error": r.catalog_error, "fit_error": r.fit_error, "kept": r is kept,
             "why_not": "; ".join(r.warnings) or None} for r in results] + rows
    return Choice(kept=kept, candidates=pl.DataFrame(rows, schema=CANDIDATE_SCHEMA),
                  calibrations=tuple(results))


def _other_models(requests: pl.DataFrame, d: Deployment, catalog_models: Iterable[str]) -> tuple[str, ...]:
    """One sentence per model the log names (requests.model) that is another catalog model
    than `d`'s (catalog.another_model): the fit cannot tell a 70B log fitted on a 7B deployment
    (Fireworks' Llama-2-70B LLMPerf log on seed-example passes at 35% of peak bandwidth). A
    name the catalog cannot place says nothing; a log without the column neither."""
    if "model" not in requests.columns:
        return ()
    named = (another_model(name, count, requests.height, d.name, d.model.model, catalog_models)
             for name, count in requests["model"].drop_nulls().value_counts(sort=True).iter_rows())
    return tuple(f"{sentence}: the log was served by another model" for sentence in named if sentence)


# the columns of SplitwiseSim's perf_model.csv that perf_model_steps reads
PERF_MODEL_COLUMNS = ("model", "hardware", "tensor_parallel", "batch_size", "prompt_size",
                      "token_size", "prompt_time", "token_time")


def perf_model_steps(perf_model: pl.DataFrame, model: str, hardware: str, tp: int) -> pl.DataFrame:
    """SplitwiseSim perf_model.csv rows of one configuration as step measurements: each row's
    prompt_time (ms) is the prefill of batch_size prompts, its token_time (ms) a decode step over
    batch_size sequences (context taken at the middle of the output: prompt + token_size / 2)."""
    _check_frame("perf_model", perf_model)
    missing = set(PERF_MODEL_COLUMNS) - set(perf_model.columns)
    if missing:
        raise CalibrationError(f"perf_model lacks column(s) {sorted(missing)}: expected "
                               f"SplitwiseSim's data/perf_model.csv")
    if isinstance(tp, bool) or not isinstance(tp, numbers.Integral):
        raise CalibrationError(f"tp={tp!r}: expected a whole number of GPUs")
    rows = perf_model.filter((pl.col("model") == model) & (pl.col("hardware") == hardware)
                             & (pl.col("tensor_parallel") == tp))
    if rows.height == 0:
        raise CalibrationError(f"perf_model has no rows for {model} on {hardware} at tp={tp}")
    common = dict(batch=pl.col("batch_size").cast(pl.Int64),
                  prompt_tokens=pl.col("prompt_size").cast(pl.Int64))
    prefill = rows.select(kind=pl.lit("prefill"), **common, context_tokens=pl.lit(0, pl.Int64),
                          observed_s=pl.col("prompt_time") / 1e3)
    decode = rows.select(kind=pl.lit("decode"), **common,
                         context_tokens=(pl.col("prompt_size") + pl.col("token_size") // 2)
                         .cast(pl.Int64),
                         observed_s=pl.col("token_time") / 1e3)
    return pl.concat([prefill, decode])


ENGINE_LOG_COLUMNS = ("prompt_throughput", "generation_throughput", "num_running", "num_pending")
# A sample longer than this is not one decode step: the 0.5 s window straddled an idle gap.
LONGEST_DECODE_STEP_S = 0.5


def engine_log_step_line(engine_log: pl.DataFrame) -> tuple[float, float, int]:
    """(seconds a decode step takes with no sequence, seconds each running sequence adds, samples
    used) from an engine's periodic throughput log, such as the vLLM stats the BurstGPT replay
    recorded (`prompt_throughput`, `generation_throughput` in tokens/s, `num_running`,
    `num_pending` every ~0.5 s). Where a sample only decoded (no prompt tokens, none waiting),
    each running sequence got one token a step, so a step took num_running /
    generation_throughput; a least-squares line through those against num_running gives the
    per-sequence cost of a step (step.py, O_seq) measured directly, with the weights' and KV
    cache's share folded into the two numbers (small for a small model). A check on what
    `calibrate_requests` fits from latencies alone, not a fit of the deployment."""
    _check_frame("engine_log", engine_log)
    missing = set(ENGINE_LOG_COLUMNS) - set(engine_log.columns)
    if missing:
        raise CalibrationError(f"engine_log lacks column(s) {sorted(missing)}: expected "
                               f"{', '.join(ENGINE_LOG_COLUMNS)} (tokens/s and request counts per sample)")
    text = [c for c in ENGINE_LOG_COLUMNS if not engine_log[c].dtype.is_numeric()]
    if text:   # a value such as 'n/a' made the column text: Polars' comparison error said nothing
        raise CalibrationError(f"engine_log column(s) {text} are not numbers: expected tokens/s"
                               f" and request counts in every sample")
    decoding = engine_log.filter(
        (pl.col("prompt_throughput") == 0) & (pl.col("num_pending") == 0)
        & (pl.col("num_running") > 0) & (pl.col("generation_throughput") > 0)
    ).select(running=pl.col("num_running").cast(pl.Float64),
             step_s=pl.col("num_running") / pl.col("generation_throughput")
             ).filter(pl.col("step_s") < LONGEST_DECODE_STEP_S)
    if decoding.select(pl.col("running").n_unique()).item() < 2:
        raise CalibrationError(f"engine_log has {decoding.height} pure-decode samples at fewer than"
                               f" two batch sizes: a step-time line needs at least two")
    per_sequence, empty = np.polyfit(decoding["running"].to_numpy(), decoding["step_s"].to_numpy(), 1)
    return float(empty), float(per_sequence), decoding.height


def format_table(errors: pl.DataFrame) -> str:
    """Markdown table of the per-shape errors (for asset metadata and reports)."""
    lines = ["| split | metric | shape | n | median observed s | error before | error after "
             "| shape-median baseline |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in errors.iter_rows(named=True):
        lines.append(
            f"| {r['split']} | {r['metric']} | {r['shape']} | {r['observations']} | "
            f"{r['median_observed_s']:.4g} | {_pct(r['error_before'])} | {_pct(r['error_after'])} "
            f"| {_pct(r['error_baseline'])} |"
        )
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{100 * x:.1f}%"
