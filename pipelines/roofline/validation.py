"""Predict published measurements with the roofline, to say how far the physics is from reality.

A measurement row (bench/validation/published_measurements.csv) names a model, GPU, tensor-parallel
degree, dtypes, serving engine, request shape and one measured figure:

- ttft_s: time to first token of a lone request (batch 1) = `prefill_s(prompt)`; with batch b > 1
  (a static batch of b prompts prefilled together) the prefill of b * prompt tokens.
- tpot_s: time per output token of a batch of b sequences decoding `output` tokens after a
  `prompt`-token prompt: the mean decode step over the output, plus, for the E2E_OVER_OUTPUT
  engines (vLLM's benchmark_latency measures the whole batch end to end, at any b, 1 included),
  the batch's prefill spread over the output.
- max_throughput_tok_s: output tokens/s under unbounded load (`Deployment.max_throughput_tok_s`,
  the steady state of a batch the KV cache and scheduler allow, run again and again). A row
  with `requests` N (trtllm-bench's `$num_requests`, vLLM benchmark_throughput's
  `--num-prompts`) measured a finite run instead: N identical requests queued at t = 0, output
  tokens N x output over the time until the last one ends. That run goes in waves of the batch
  the engine admits, the last one partial, and a partial wave decodes its whole output at a
  small batch whose steps carry the weights, all-reduce latency and overheads for few tokens:
  1,500 requests of 128 + 4,096 tokens on 8 x H200 (the v0.20 perf overview's 70B row), whose
  KV cache holds 1,495 of them, are one full wave of 336 s and 5 requests decoding alone for
  41 s more, 16,300 output tokens/s where the steady state gives 18,200 (measured 16,669). The
  replay (pipelines.replay, with the engine's admission rule) runs the N requests, so the
  prediction pays that tail as the measurement did.
- rows with a `qps` (online serving at a request rate): mean TTFT / mean time per output token of
  the replay (pipelines.replay, the same engine the reports use) of SERVED_REQUESTS identical
  requests arriving as a Poisson stream at that rate (fixed seed), with no client network: a
  request waits for the step in flight and its prefill shares steps with the running decodes.
- rows with a `concurrency` C (a closed-loop benchmark: genai-perf / AIPerf `--concurrency`,
  `vllm bench serve --max-concurrency`): C clients, each sending its next request the moment
  its previous one completes, for CLOSED_LOOP_ROUNDS requests each. The replay is open-loop
  (arrivals given), so the arrivals are found as its fixed point: every request after a
  client's first arrives when that client's previous one ends in the previous pass, until no
  arrival moves. Clients start at random phases within one lone request's latency (real
  clients drift apart; identical requests started together would stay in lockstep), averaged
  over CLOSED_LOOP_SEEDS draws. The means are over the steady rounds: the first
  WARM_UP_ROUNDS are left out (clients starting) and so is the last (clients finishing, fewer
  than C requests in flight).
  `output_tok_s` is the run's output tokens/s in that steady state: by Little's law,
  C x output / mean end-to-end latency.
- `measured_at`: `engine` rows (offline benchmarks, profilers) are the engine's time alone;
  `client` rows (genai-perf, HTTP benchmarks) add the serving front end's time to the TTFT
  (frontend.FRONTEND_S: HTTP, chat template and tokenization). Time per output token is the
  same at both ends (streamed tokens pass through the front end one after another).

Predictions use the catalog's default efficiency factors: nothing is fitted to these rows. The
engine column sets the engine's default scheduler limits and the serving stack whose catalog
factors apply (ENGINE_SCHEDULER); a row whose source states the server's own limits carries them
in the optional SCHEDULER_COLUMNS (max_seqs: SGLang `--max-running-requests`, TensorRT-LLM
max_batch_size; max_batched_tokens: `--chunked-prefill-size`, max_num_tokens;
kv_memory_fraction: `--mem-fraction-static`, free_gpu_memory_fraction), which override the
engine's defaults for that row only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from pipelines.replay import replay
from pipelines.roofline import step
from pipelines.roofline.catalog import Catalog
from pipelines.roofline.deployment import GIB, Deployment, Network
from pipelines.roofline.frontend import FRONTEND_S

# Scheduler limits per engine. trtllm: TensorRT-LLM's defaults: max_batch_size 2048,
# max_num_tokens 8192, a KV cache of 0.90 of the memory free after loading ("allocate 90% of
# free GPU memory for KV cache", docs "How to Change KV Cache Behavior"), chunked context off
# unless asked for ("To enable chunked context, please set the enable_chunked_prefill in LLM API
# to True", docs features/long-sequence), and each admitted request's whole length reserved in
# the KV cache: the default capacity scheduler policy is GUARANTEED_NO_EVICT ("to guarantee that a
# started request is never paused", docs performance-tuning-guide/useful-runtime-flags; NVIDIA's
# dynamo-mocker: "reserve prompt + max_output per admitted request up front; never preempt"; a
# replay knows the tokens generated, not the max_tokens asked for, so it reserves those).
# trtllm-bench: the same with the perf overview's
# `--kv_cache_free_gpu_mem_fraction 0.95` ("better performance than the default setting of
# 0.90"). trtllm-serving: the Triton TensorRT-LLM backend of the perf overview's online table, at
# TensorRT-LLM's defaults.
# vllm / vllm-2023: vLLM's defaults (the Scheduler dataclass). sglang: SGLang's defaults differ in
# detail (its static memory fraction and prefill chunk depend on the GPU and tp); vLLM's stand in
# for the rows that state no limits of their own (at most 64 clients, which never fill the KV
# cache), and the rows that do state them carry them in SCHEDULER_COLUMNS.
# trtllm-bench-pytorch: the perf overview's editions from v0.19 on ("Starting with v0.19, testing
# was performed using the PyTorch backend"): the same, with the limits trtllm-bench derives for
# the dataset when the command gives none (trtllm_bench_limits) and decode steps padded to the
# CUDA-graph batch sizes of the overview's llm_options.yml (PERF_OVERVIEW_GRAPH_SIZES).
TRTLLM_DEFAULTS = {"max_seqs": 2048, "max_batched_tokens": 8192, "kv_memory_fraction": 0.9,
                   "kv_memory_basis": "free", "chunked_prefill": False, "kv_reservation": "full"}
TRTLLM_BENCH = {**TRTLLM_DEFAULTS, "kv_memory_fraction": 0.95}
ENGINE_SCHEDULER = {
    "trtllm": TRTLLM_DEFAULTS,
    "trtllm-bench": TRTLLM_BENCH,
    "trtllm-bench-pytorch": TRTLLM_BENCH,
    "trtllm-serving": TRTLLM_DEFAULTS,
    "vllm": {},
    "sglang": {},
    "vllm-2023": {"stack": "vllm-2023"},
}
# Engines whose tpot_s rows are an end-to-end batch latency divided by the output length.
E2E_OVER_OUTPUT = {"vllm"}
METRICS = ("ttft_s", "tpot_s", "max_throughput_tok_s", "output_tok_s")
MEASURED_AT = ("engine", "client")
SERVED_REQUESTS = 400
SERVED_METRIC_COLUMN = {"ttft_s": "ttft_s", "tpot_s": "tpot_s"}
CLOSED_LOOP_METRICS = (*SERVED_METRIC_COLUMN, "output_tok_s")
CLOSED_LOOP_ROUNDS = 8
WARM_UP_ROUNDS = 2
CLOSED_LOOP_SEEDS = 4
MAX_PASSES = 300


# The perf overview's llm_options.yml from v0.19 on: `cuda_graph_config: enable_padding: true`
# with these batch sizes (NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @00f37686).
PERF_OVERVIEW_GRAPH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)
# trtllm-bench's bytes per weight / KV element by quantization (tuning.py BYTES_PER_ELEM)
TRTLLM_BENCH_BYTES = {"fp8": 1.0, "fp4": 0.5}


def deployment_for(catalog: Catalog, row: dict) -> Deployment:
    """The deployment a measurement row describes: its engine's scheduler limits, overridden by
    the limits the row states (SCHEDULER_COLUMNS)."""
    if row["engine"] not in ENGINE_SCHEDULER:
        raise ValueError(f"engine {row['engine']!r}: expected one of {', '.join(ENGINE_SCHEDULER)}")
    stated = {c: row[c] for c in SCHEDULER_COLUMNS if row.get(c) not in (None, "")}
    spec = dict(model=row["model"], gpu=row["gpu"], tp=int(row["tp"]),
                weights=row["weight_dtype"], kv_cache=row["kv_dtype"])
    derived = (trtllm_bench_limits(catalog.build(**spec), int(row["prompt_tokens"]),
                                   int(row["output_tokens"]))
               if row["engine"] == "trtllm-bench-pytorch" else {})
    return catalog.build(**spec, **{**ENGINE_SCHEDULER[row["engine"]], **derived, **stated})


def trtllm_bench_limits(d: Deployment, prompt: int, output: int,
                        kv_fraction: float = 0.95) -> dict:
    """The max_seqs, max_batched_tokens and CUDA-graph batch sizes trtllm-bench's PyTorch flow
    runs a dataset of `prompt` + `output` tokens with when the command sets no limits (the perf
    overview's), following TensorRT-LLM's code:

    - tensorrt_llm/bench/build/tuning.py `calc_engine_setting` / `finetune_setting`: KV bytes
      per token of the whole group with max(tp, kv heads) heads; cache memory = (device GiB x
      GPUs - parameters x bytes per weight) x the KV fraction; requests it holds R = that /
      (KV per token x (prompt + output)); max batch = R rounded up to 32 (at least 64) below
      256, to 128 below 1,024, else to 256, R capped at 4,096 first; max tokens = R x (1 +
      prompt / output), capped at 32,768, rounded up to 256 (at least 2,048) below 4,096, to
      512 below 8,192, else to 1,024;
    - tensorrt_llm/bench/benchmark/utils (get_settings): without chunked prefill, max tokens at
      least the longest prompt + the max batch;
    - the captured sizes are llm_options.yml's; Catalog.build keeps those up to min(max batch,
      max tokens) and pads to that cap above them (catalog.graph_sizes_within, TensorRT-LLM's
      `_filter_cuda_graph_batch_sizes`), so limits a row states reach the cap too.

    The device memory is the driver's (gpus.csv memory_gib); parameters are the model's total."""
    m = d.model
    kv_bytes = TRTLLM_BENCH_BYTES.get(d.kv_dtype, 2.0)
    gib_per_token = (2 * m.layers * max(d.tp, m.kv_heads) * m.head_dim * kv_bytes) / 1024**3
    weights_gib = m.total_params_b * 1e9 * TRTLLM_BENCH_BYTES.get(d.weight_dtype, 2.0) / 1024**3
    cache_gib = (d.gpu.memory_gib * d.tp - weights_gib) * kv_fraction
    requests = min(cache_gib / (gib_per_token * (prompt + output)), 4096.0)
    max_batch = _round_up(requests, ((256, 32), (1024, 128), (math.inf, 256)), least=64)
    raw_tokens = min(requests * (1 + prompt / output), 32768.0)
    max_tokens = _round_up(raw_tokens, ((4096, 256), (8192, 512), (math.inf, 1024)), least=2048)
    max_tokens = max(max_tokens, prompt + max_batch)
    return {"max_seqs": max_batch, "max_batched_tokens": max_tokens,
            "graph_batch_sizes": PERF_OVERVIEW_GRAPH_SIZES}


def _round_up(value: float, bands: tuple[tuple[float, int], ...], least: int) -> int:
    """finetune_setting's rounding: `value` up to a multiple of the step of the first band it
    lies below (band = (upper edge, step)), and at least `least`."""
    step_size = next(size for below, size in bands if value < below)
    return max(least, step_size * math.ceil(value / step_size))


def predict(catalog: Catalog, row: dict) -> float:
    """The model's value for one measurement row (same unit as `measured`)."""
    check_row(row)
    return _predict(deployment_for(catalog, row), row)


def _predict(d: Deployment, row: dict) -> float:
    """predict for a row check_row passed, on its deployment (deployment_for)."""
    prompt, output = int(row["prompt_tokens"]), int(row["output_tokens"])
    batch = int(row["batch"]) if row.get("batch") not in (None, "") else 1
    metric = row["metric"]
    frontend_s = FRONTEND_S if row["measured_at"] == "client" else 0.0
    qps, concurrency = (row.get(c) not in (None, "") for c in ("qps", "concurrency"))
    if row.get("requests") not in (None, ""):
        return finite_run_tok_s(d, int(row["requests"]), prompt, output)
    if qps:
        return _served(d, float(row["qps"]), prompt, output, metric, frontend_s)
    if concurrency:
        return _closed_loop(d, int(row["concurrency"]), prompt, output, metric, frontend_s)
    if metric == "ttft_s":
        engine = d.prefill_s(prompt) if batch == 1 else d.prefill_batch_s(batch, prompt)
        return engine + frontend_s
    if metric == "tpot_s":
        decode = sum(d.decode_step_s(batch, batch * (prompt + i)) for i in range(1, output))
        if row["engine"] in E2E_OVER_OUTPUT:
            return (d.prefill_batch_s(batch, prompt) + decode) / output
        return decode / (output - 1)
    return d.max_throughput_tok_s(prompt, output)  # the one metric check_row leaves here


def finite_run_tok_s(d: Deployment, requests: int, prompt: int, output: int) -> float:
    """Output tokens/s of a max-load benchmark of `requests` identical requests all queued at
    t = 0 (module docstring): requests x output over the replayed makespan, with no network."""
    done = replay(_identical(np.zeros(requests), prompt, output), _at_client(d, 0.0))
    return requests * output / float(done["e2e_s"].max())


def _served(d: Deployment, qps: float, prompt: int, output: int, metric: str,
            frontend_s: float) -> float:
    """Mean `metric` of a replayed Poisson stream of identical requests at `qps` per second; the
    front end's time reaches the client with the first token (the replay's one-way latency)."""
    gaps = np.random.default_rng(0).exponential(1.0 / qps, SERVED_REQUESTS)
    requests = _identical(np.cumsum(gaps) - gaps[0], prompt, output)
    return float(replay(requests, _at_client(d, frontend_s))[SERVED_METRIC_COLUMN[metric]].mean())


def _closed_loop(d: Deployment, concurrency: int, prompt: int, output: int, metric: str,
                 frontend_s: float) -> float:
    """Steady-state mean `metric` of `concurrency` closed-loop clients (module docstring)."""
    return _closed_loop_means(_at_client(d, frontend_s), concurrency, prompt, output)[metric]


@lru_cache(maxsize=64)
def _closed_loop_means(d: Deployment, concurrency: int, prompt: int, output: int) -> dict:
    """Every closed-loop metric of one run, over CLOSED_LOOP_SEEDS starting phases (a source
    publishes TTFT, ITL and throughput of the same run: simulated once)."""
    lone = float(replay(_identical(np.zeros(1), prompt, output), d)["e2e_s"][0])
    runs = []
    for seed in range(CLOSED_LOOP_SEEDS):
        start = np.random.default_rng(seed).uniform(0.0, lone, concurrency)
        runs.append(closed_loop_steady(d, start - start.min(), prompt, output))
    return {"ttft_s": float(np.mean([r["ttft_s"].mean() for r in runs])),
            "tpot_s": float(np.mean([r["tpot_s"].mean() for r in runs])),
            "output_tok_s": float(np.mean([concurrency * output / r["e2e_s"].mean() for r in runs]))}


def closed_loop_steady(d: Deployment, start: np.ndarray, prompt: int, output: int) -> pl.DataFrame:
    """The replayed requests of the steady rounds (module docstring), in round order: request
    r * C + k is client k's r-th, sent when its (r - 1)-th ends; `start` holds each client's
    first sending time. Found as the fixed point of replaying with the previous pass's endings."""
    clients = len(start)
    arrival = np.concatenate([start, np.zeros(clients * (CLOSED_LOOP_ROUNDS - 1))])
    for _ in range(MAX_PASSES):
        requests = _identical(arrival, prompt, output)
        done = pl.DataFrame({"request_id": requests["request_id"]}).join(
            replay(requests, d), on="request_id", how="left", maintain_order="left")
        ended = arrival + done["e2e_s"].to_numpy()
        following = np.concatenate([start, ended[:-clients]])
        if np.max(np.abs(following - arrival)) < 1e-9:
            return done[clients * WARM_UP_ROUNDS:clients * (CLOSED_LOOP_ROUNDS - 1)]
        arrival = following
    raise ValueError(f"closed loop of {clients} clients did not settle in {MAX_PASSES} replays")


def _at_client(d: Deployment, frontend_s: float) -> Deployment:
    """`d` seen from a benchmark client beside it: the front end's time reaches the client with
    the first token (the replay's one-way latency); streaming adds nothing."""
    return replace(d, network=Network(one_way_s=frontend_s, bytes_per_token=0.0))


def _identical(arrival: np.ndarray, prompt: int, output: int) -> pl.DataFrame:
    """Requests of one shape (a benchmark's fixed prompt and output lengths) at `arrival`."""
    n = len(arrival)
    return pl.DataFrame({"request_id": [str(i) for i in range(n)], "arrival_s": arrival,
                         "prompt_tokens": [prompt] * n, "output_tokens": [output] * n})


REQUIRED_COLUMNS = ("engine", "model", "gpu", "tp", "weight_dtype", "kv_dtype", "metric",
                    "prompt_tokens", "output_tokens", "measured", "measured_at")


# Columns mostly empty (a load applies to few rows, stated server limits to few sources), typed
# here rather than guessed by the reader.
LOAD_COLUMNS = {"batch": pl.Int64, "qps": pl.Float64, "concurrency": pl.Int64,
                "requests": pl.Int64}
SCHEDULER_COLUMNS = {"max_seqs": pl.Int64, "max_batched_tokens": pl.Int64,
                     "kv_memory_fraction": pl.Float64}
# The REQUIRED_COLUMNS that hold numbers, typed too: guessed, a "20,000" in `measured` or a
# "1,024" in `prompt_tokens` read as text and failed later, far from the cell.
NUMBER_COLUMNS = {"tp": pl.Int64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64,
                  "measured": pl.Float64}


def read_measurements(path) -> pl.DataFrame:
    """The measurement table (a CSV of REQUIRED_COLUMNS, the optional LOAD_COLUMNS and
    SCHEDULER_COLUMNS, source, url and notes); an optional column it lacks is read as empty, and
    a missing `source` as the file's name (the summaries count and group rows by source). A
    cell the typed columns (NUMBER_COLUMNS too) cannot parse (a thousands separator, a unit), or
    an empty file, is one ValueError naming the file, the line and the cell, not Polars' advice
    on reading CSVs."""
    optional = {**LOAD_COLUMNS, **SCHEDULER_COLUMNS}
    typed = {**NUMBER_COLUMNS, **optional}
    try:
        table = pl.read_csv(path, schema_overrides=typed)
        table = table if "source" in table.columns else table.with_columns(
            source=pl.lit(Path(path).name))
        return table.with_columns(pl.lit(None, dtype).alias(c) for c, dtype in optional.items()
                                  if c not in table.columns)
    except pl.exceptions.NoDataError:
        raise ValueError(f"{path} is empty: expected a header row of"
                         f" {', '.join(REQUIRED_COLUMNS)} and one row per measurement") from None
    except pl.exceptions.ComputeError as e:
        cell = _unreadable_cell(path, typed)
        if cell is None:  # the file's structure (a row of more fields than the header), not a cell
            raise ValueError(f"{path}: {str(e).splitlines()[0]}") from None
        whole, other = ([c for c, t in typed.items() if (t == pl.Int64) == integer]
                        for integer in (True, False))
        raise ValueError(f"{path}: {cell}; expected plain whole numbers in"
                         f" {', '.join(whole)} and plain numbers in {', '.join(other)} (no"
                         f" thousands separators or units)") from None


def _unreadable_cell(path, typed: dict) -> str | None:
    """"line N: cannot read 'value' in column" for the first cell of a typed column its type
    cannot read (Polars names the cell but gives only a byte offset), None if there is none."""
    try:
        raw = pl.read_csv(path, infer_schema=False).with_row_index("line", offset=2)
    except pl.exceptions.PolarsError:  # not a cell: the file's own structure (Polars says)
        return None
    cells = [raw.filter(pl.col(c).is_not_null() & pl.col(c).cast(dtype, strict=False).is_null())
             .select("line", pl.col(c).alias("value"), column=pl.lit(c))
             for c, dtype in typed.items() if c in raw.columns]
    found = pl.concat(cells).sort("line", maintain_order=True) if cells else pl.DataFrame()
    if found.is_empty():
        return None
    cell = found.row(0, named=True)
    return f"line {cell['line']}: cannot read {cell['value']!r} in {cell['column']}"


def validate(catalog: Catalog, measurements: pl.DataFrame) -> pl.DataFrame:
    """The measurements with `predicted` and `error` = predicted / measured - 1 per row."""
    missing = [c for c in REQUIRED_COLUMNS if c not in measurements.columns]
    if missing:
        raise ValueError(f"measurement table lacks column(s) {', '.join(missing)}: expected"
                         f" {', '.join(REQUIRED_COLUMNS)}")
    _check_filled(measurements)
    rows = list(measurements.iter_rows(named=True))
    deployments, problems = [], []
    for number, row in enumerate(rows, start=2):  # every row's cheap checks before any replay
        try:
            check_row(row)
            deployments.append(deployment_for(catalog, row))
        except ValueError as e:  # CatalogError included
            problems.append(f"row {number} (line {number} of the CSV, {row['model']} on"
                            f" {row['gpu']}, {row['metric']}): {e}")
    if problems:
        raise ValueError(f"{len(problems)} row(s) of the measurement table cannot be predicted:\n"
                         + "\n".join(problems))
    predicted = [_predict(d, row) for d, row in zip(deployments, rows, strict=True)]
    return measurements.with_columns(predicted=pl.Series(predicted, dtype=pl.Float64)).with_columns(
        error=pl.col("predicted") / pl.col("measured") - 1.0
    )


def _check_filled(measurements: pl.DataFrame) -> None:
    """A table with no rows, or a row with an empty required cell, is one ValueError naming the
    first such line before any row is predicted: the empty cell failed in int() with a
    traceback, and no rows printed an empty summary as if it were a result."""
    if measurements.is_empty():
        raise ValueError(f"measurement table has no rows: expected one row per measurement with"
                         f" {', '.join(REQUIRED_COLUMNS)}")
    blank = measurements.select(REQUIRED_COLUMNS).with_row_index("line", offset=2).filter(
        pl.any_horizontal(pl.col(REQUIRED_COLUMNS).is_null()))
    if not blank.is_empty():
        row = blank.row(0, named=True)
        empty = [c for c in REQUIRED_COLUMNS if row[c] is None]
        raise ValueError(f"row {row['line']} (line {row['line']} of the CSV) has no"
                         f" {', '.join(empty)}: every row needs {', '.join(REQUIRED_COLUMNS)}")


# Columns whose value, where given, must be above 0.
POSITIVE_COLUMNS = ("measured", "prompt_tokens", "output_tokens", "batch", "qps", "concurrency",
                    "requests")


def check_row(row: dict) -> None:
    """A ValueError for a row no prediction can answer, found without predicting anything (so
    that validate names every such row of a table at once): a metric, measured_at or load the
    table does not define, or a value no measurement can have, which failed deep in the
    replay as a ZeroDivisionError (a qps of 0, a tpot_s of one output token, which has no
    second token to time), a NumPy message (a concurrency of 0) or an infinite error (a
    measured 0)."""
    metric = row["metric"]
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")
    if row["measured_at"] not in MEASURED_AT:
        raise ValueError(f"measured_at {row['measured_at']!r}: expected one of"
                         f" {', '.join(MEASURED_AT)}")
    for column in POSITIVE_COLUMNS:
        if row.get(column) not in (None, "") and row[column] <= 0:
            raise ValueError(f"{column}={row[column]}: expected a number above 0 in"
                             f" {', '.join(POSITIVE_COLUMNS)}")
    if metric == "tpot_s" and row["output_tokens"] < 2:
        raise ValueError(f"output_tokens={row['output_tokens']}: a tpot_s row needs at least 2"
                         f" (the time per output token after the first)")
    qps, concurrency, requests = (row.get(c) not in (None, "")
                                  for c in ("qps", "concurrency", "requests"))
    if qps and concurrency:
        raise ValueError("a row has either a qps (open loop) or a concurrency (closed loop),"
                         " not both")
    if requests and metric != "max_throughput_tok_s":
        raise ValueError(f"requests (a finite max-load run) belongs to max_throughput_tok_s"
                         f" rows, not {metric!r}")
    if qps and metric not in SERVED_METRIC_COLUMN:
        raise ValueError(f"metric {metric!r} at a request rate: expected one of"
                         f" {', '.join(SERVED_METRIC_COLUMN)}")
    if concurrency and metric not in CLOSED_LOOP_METRICS:
        raise ValueError(f"metric {metric!r} at a concurrency: expected one of"
                         f" {', '.join(CLOSED_LOOP_METRICS)}")
    if metric == "output_tok_s" and not concurrency:
        raise ValueError("output_tok_s is the throughput of a closed-loop run: the row needs a"
                         " concurrency")


def validate_kv_capacity(catalog: Catalog, measurements: pl.DataFrame) -> pl.DataFrame:
    """Measured KV-cache capacities (bench/validation/trtllm_kv_capacity.csv: the most sequences
    of `tokens_per_sequence` tokens an engine held at once, with the max_batched_tokens and KV
    memory fraction it ran with, read as any row's stated limits) with `predicted` = kv_capacity_tokens // tokens_per_sequence and
    `error` = predicted / measured - 1: the check on the sizing that decides when a loaded
    replica starts to queue."""
    predicted = [
        deployment_for(catalog, row).kv_capacity_tokens // row["tokens_per_sequence"]
        for row in measurements.iter_rows(named=True)
    ]
    return measurements.with_columns(predicted=pl.Series(predicted, dtype=pl.Int64)).with_columns(
        error=pl.col("predicted") / pl.col("max_sequences") - 1.0
    )


def validate_vllm_kv_capacity(catalog: Catalog, logs: pl.DataFrame) -> pl.DataFrame:
    """vLLM startup logs (bench/validation/vllm_kv_capacity.csv: the KV pool vLLM sized with
    gpu_memory_utilization = kv_memory_fraction, and what it subtracted) with `predicted` =
    kv_capacity_tokens of the same deployment (vLLM's scheduler defaults, the row's fraction,
    max_batched_tokens and block size), `measured` = the logged token count, or where a log gives
    only the pool in GiB that pool over the KV bytes per token, and `error` = predicted /
    measured - 1: the check of the "total" memory basis, as validate_kv_capacity is of the
    "free" one."""
    predicted, measured = [], []
    for row in logs.iter_rows(named=True):
        d = catalog.build(model=row["model"], gpu=row["gpu"], tp=int(row["tp"]),
                          weights=row["weight_dtype"], kv_cache=row["kv_dtype"],
                          kv_memory_fraction=row["kv_memory_fraction"],
                          max_batched_tokens=row["max_batched_tokens"],
                          kv_block_tokens=row["kv_block_tokens"])
        predicted.append(d.kv_capacity_tokens)
        measured.append(row["kv_tokens"] if row["kv_tokens"] is not None
                        else round(row["kv_pool_gib"] * GIB / d.kv_bytes_per_token))
    return logs.with_columns(predicted=pl.Series(predicted, dtype=pl.Int64),
                             measured=pl.Series(measured, dtype=pl.Int64)).with_columns(
        error=pl.col("predicted") / pl.col("measured") - 1.0
    )


def validate_median_ttft(catalog: Catalog, measurements: pl.DataFrame,
                         medians: pl.DataFrame) -> pl.DataFrame:
    """InferenceX's median TTFT of its DeepSeek-R1 runs (bench/validation/
    inferencex_median_ttft.csv) against the model's TTFT of the same closed-loop run, each median
    on the run's time-per-output-token row of `measurements` (same source, GPU, engine, tp,
    shape and clients, `mean_tpot_s` = its `measured`), predicted as that row with metric ttft_s:
    `predicted`, `ratio` = measured median / predicted and `excess_s` = their difference.

    Medians, not the table's TTFT rows: the mean TTFT of these runs includes the burst of all
    clients sent at t = 0, which the replayed steady rounds leave out (module docstring), while
    the median, like those rounds, is the steady state's. A row without its TPOT row is a
    ValueError naming it: the medians are kept for the runs the table has."""
    keys = ["source", "gpu", "engine", "tp", "prompt_tokens", "output_tokens", "concurrency"]
    runs = medians.join(measurements.filter(pl.col("metric") == "tpot_s"),
                        left_on=[*keys, "mean_tpot_s"], right_on=[*keys, "measured"],
                        how="left", suffix="_tpot")
    unmatched = runs.filter(pl.col("url_tpot").is_null())
    if unmatched.height:
        raise ValueError(f"median TTFT of a run with no tpot_s row: {unmatched.row(0, named=True)}")
    predicted = [predict(catalog, {**row, "metric": "ttft_s", "measured": row["median_ttft_s"]})
                 for row in runs.iter_rows(named=True)]
    return runs.select(*keys, "url", measured="median_ttft_s").with_columns(
        predicted=pl.Series(predicted, dtype=pl.Float64)).with_columns(
        ratio=pl.col("measured") / pl.col("predicted"),
        excess_s=pl.col("measured") - pl.col("predicted"))


# The shapes bench/device/step_timing.py times, as the catalog deployment (model, tensor-parallel
# degree) whose one GPU they are: a tp-8 shard is one GPU's share of the tp-8 deployment, and an
# attention-only shape is one layer of its KV cache and query heads, 1 or 8 KV heads (step_terms
# scales the attention coefficients to the row's layers and heads).
STEP_TIMING_SHAPES = {
    "llama-3.1-8b": ("llama-3.1-8b", 1),
    "llama-3.1-70b-tp8-shard": ("llama-3.1-70b", 8),
    "attention-8q-1kv": ("llama-3.1-70b", 8),
    "attention-64q-8kv": ("llama-3.1-70b", 8),
}
STEP_TIMING_MODES = ("full", "gemm", "attn", "copy")


def step_terms(d: Deployment, row: dict) -> tuple[float, float]:
    """(gemm_s, attn_s) the step formula gives one GPU for a timed case: the GEMM roofline of
    the case's tokens and the attention roofline of its KV reads and writes, the attention
    coefficients scaled from the deployment's layers and heads per GPU to the row's."""
    m = d.model
    coef = d.coefficients.copy()
    coef[step.KV_BYTES_PER_TOKEN] *= row["layers"] * row["kv_heads"] / (m.layers * m.kv_heads / d.tp)
    coef[step.ATTN_FLOPS_PER_PAIR] *= row["layers"] * row["q_heads"] / (m.layers * m.q_heads / d.tp)
    batch, context = float(row["batch"]), float(row["context_tokens"])
    new = float(row["new_tokens"])
    tokens = batch * new
    pairs = batch * step.chunk_attn_pairs(context, new)
    gemm = max(step.step_cost(coef, tokens, batch, 0.0, 0.0, 0.0)[:2])
    whole = max(step.step_cost(coef, tokens, batch, pairs, batch * context, tokens)[:2])
    return gemm, whole - gemm


def validate_step_timings(catalog: Catalog, timings: pl.DataFrame, gpu: str) -> pl.DataFrame:
    """Steps timed on one `gpu` by bench/device/step_timing.py against the step formula, with
    `model_s` and `error` = model_s / median_s - 1 per row (rows the run skipped keep a null
    error; none is dropped). The timed steps run no scheduler and no all-reduce, so `model_s` is
    the formula's kernels alone: gemm_s + attn_s for a `full` step, one of them for a `gemm` or
    `attn` one, plus the catalog's per-layer overhead where the step runs whole layers (launch
    gaps, which CUDA graphs do not remove). `bandwidth_fraction` is the HBM bandwidth the row
    achieved on its KV bytes (attention) or copied bytes (copy: read + written) over the
    datasheet peak."""
    predicted, peaks = [], []
    for row in timings.iter_rows(named=True):
        if row["mode"] not in STEP_TIMING_MODES:
            raise ValueError(f"step timing case {row['case']}: mode {row['mode']!r}: expected"
                             f" one of {', '.join(STEP_TIMING_MODES)}")
        shape = "llama-3.1-8b" if row["mode"] == "copy" else row["shape"]  # any: the GPU's peak
        if shape not in STEP_TIMING_SHAPES:
            raise ValueError(f"step timing case {row['case']}: shape {shape!r} is not one the"
                             f" model can be set up for (a --tiny smoke run?): expected one of"
                             f" {', '.join(STEP_TIMING_SHAPES)}")
        model, tp = STEP_TIMING_SHAPES[shape]
        d = catalog.build(model=model, gpu=gpu, tp=tp, weights="bf16", kv_cache="bf16")
        peaks.append(d.gpu.hbm_bandwidth_gbs * 1e9)
        if row["mode"] == "copy":
            predicted.append(None)
            continue
        gemm, attn = step_terms(d, row)
        launches = row["layers"] * d.efficiency.layer_overhead_s
        predicted.append({"full": gemm + attn + launches, "gemm": gemm + launches,
                          "attn": attn}[row["mode"]])
    return timings.with_columns(
        model_s=pl.Series(predicted, dtype=pl.Float64),
        bandwidth_fraction=pl.when(pl.col("phase").is_in(["attention", "copy"]))
        .then(pl.col("kv_bytes") / pl.col("median_s") / pl.Series(peaks, dtype=pl.Float64)),
    ).with_columns(error=pl.col("model_s") / pl.col("median_s") - 1.0)


def summary(validated: pl.DataFrame, by: tuple[str, ...] = ("metric",)) -> pl.DataFrame:
    """Per metric (or per any grouping columns, e.g. source and metric): rows, median and worst
    absolute error."""
    return (
        validated.group_by(*by)
        .agg(rows=pl.len(), median_abs_error=pl.col("error").abs().median(),
             worst_abs_error=pl.col("error").abs().max())
        .sort(*by)
    )
