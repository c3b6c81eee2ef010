"""Replay semantics: a lone request matches the roofline API, stage definitions hold exactly,
GPU-seconds are conserved, and batching, KV pressure, FCFS and limits behave as documented."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.formats import read_azure_csv
from pipelines.replay import ReplayError, by_trace, engine, replay, replay_fleet, replay_traces
from pipelines.replay.api import _prefix_hashes, _timeline_frame
from pipelines.roofline import load_catalog, step

ROOT = Path(__file__).resolve().parents[2]
CONV = ROOT / "data" / "samples" / "AzureLLMInferenceTrace_conv.csv"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def seed(catalog):
    return catalog.deployment("seed-example")


def _requests(arrival, prompt, output, cached=None) -> pl.DataFrame:
    frame = pl.DataFrame({
        "arrival_s": pl.Series(arrival, dtype=pl.Float64),
        "prompt_tokens": pl.Series(prompt, dtype=pl.Int64),
        "output_tokens": pl.Series(output, dtype=pl.Int64),
    })
    if cached is not None:
        frame = frame.with_columns(cached_tokens=pl.Series(cached, dtype=pl.Int64))
    return frame


def _burst(n: int, prompt: int, output: int, over_s: float = 0.0) -> pl.DataFrame:
    return _requests(np.linspace(0.0, over_s, n), [prompt] * n, [output] * n)


def assert_invariants(result, deployment) -> None:
    """(b) causality and stage definitions per request, (c) conservation of GPU-seconds."""
    s = result.stages
    assert s["finished_s"].null_count() == 0 and s["finished_s"].is_nan().sum() == 0
    assert (s["arrival_s"] <= s["admitted_s"]).all()
    assert (s["admitted_s"] <= s["first_token_s"]).all()
    assert (s["first_token_s"] <= s["finished_s"]).all()
    assert ((s["queue_s"] >= 0) & (s["prefill_s"] > 0) & (s["decode_s"] >= 0)).all()
    total = s["queue_s"] + s["prefill_s"] + s["decode_s"] + s["network_s"]
    assert ((s["e2e_s"] - total).abs() <= 1e-12 * s["e2e_s"].abs().clip(lower_bound=1.0)).all()
    assert (s["e2e_s"] - (s["finished_s"] - s["arrival_s"] + s["network_s"])).abs().max() < 1e-9
    assert (s["ttft_s"] >= s["prefill_s"]).all()
    assert ((s["tpot_s"].is_null()) == (s["output_tokens"] == 1)).all()
    multi = s.filter(pl.col("output_tokens") > 1)
    assert ((multi["tpot_s"] * (multi["output_tokens"] - 1) - multi["decode_s"]).abs() <= 1e-9).all()
    assert ((s["prefill_gpu_s"] > 0) & (s["decode_gpu_s"] >= 0)).all()
    assert s.filter((pl.col("output_tokens") == 1) & (pl.col("decode_gpu_s") > 0)).height == 0
    assert s["replica"].is_between(0, deployment.replicas - 1).all()
    assert result.span_s == float(s["finished_s"].max())
    fleet_gpu_s = deployment.replicas * deployment.gpus_per_replica * result.span_s
    accounted = float(s["gpu_s"].sum()) + result.idle_gpu_s
    assert accounted == pytest.approx(fleet_gpu_s, rel=1e-9)
    assert result.timeline["busy_gpu_s"].sum() == pytest.approx(float(s["gpu_s"].sum()), rel=1e-9)


# ---- (a) a lone request is the roofline API ---------------------------------------------------

@pytest.mark.parametrize(
    ("name", "prompt", "output", "cached"),
    [
        ("seed-example", 500, 500, 0),
        ("seed-example", 5000, 20, 0),
        ("seed-example", 37, 2, 0),
        ("seed-example", 3000, 40, 2048),
        ("azure-2023-70b-h100", 20_000, 30, 0),   # chunked: 8192 + 8192 + 3616
        ("azure-2023-70b-h100", 1, 1, 0),
    ],
)
def test_lone_request_matches_the_api(catalog, name, prompt, output, cached):
    d = catalog.deployment(name)
    row = replay(_requests([0.0], [prompt], [output], [cached]), d).row(0, named=True)
    assert row["queue_s"] == 0.0 and row["preemptions"] == 0
    assert row["prefill_s"] == pytest.approx(d.prefill_s(prompt, cached), rel=1e-9)
    expected_decode = sum(d.decode_step_s(1, ctx) for ctx in range(prompt, prompt + output - 1))
    assert row["decode_s"] == pytest.approx(expected_decode, rel=1e-9, abs=1e-15)
    assert row["network_s"] == pytest.approx(d.network.tail_s)
    assert row["ttft_s"] == pytest.approx(row["prefill_s"] + d.network.one_way_s, rel=1e-12)
    # alone, the replica's GPU-seconds are all this request's
    gpus = d.gpus_per_replica
    assert row["prefill_gpu_s"] == pytest.approx(row["prefill_s"] * gpus, rel=1e-9)
    assert row["decode_gpu_s"] == pytest.approx(row["decode_s"] * gpus, rel=1e-9, abs=1e-15)


def test_lone_request_later_in_the_trace(seed):
    early = replay(_requests([0.0], [800], [50]), seed).row(0, named=True)
    late = replay(_requests([12.5], [800], [50]), seed).row(0, named=True)
    assert late["admitted_s"] == 12.5
    for column in ("queue_s", "prefill_s", "decode_s", "e2e_s", "gpu_s"):
        assert late[column] == pytest.approx(early[column], rel=1e-9, abs=1e-12)


def test_result_has_the_request_stages_columns(seed):
    stages = replay(_requests([0.0, 0.5], [100, 200], [10, 1]), seed)
    assert stages.columns[:5] == ["request_id", "arrival_s", "prompt_tokens", "output_tokens",
                                  "cached_tokens"]
    for column in ("replica", "admitted_s", "first_token_s", "finished_s", "queue_s", "prefill_s",
                   "decode_s", "network_s", "ttft_s", "tpot_s", "e2e_s", "preemptions",
                   "prefill_gpu_s", "decode_gpu_s", "gpu_s", "bound"):
        assert column in stages.columns
    assert set(stages["bound"]) <= {"memory", "compute"}


def test_unsorted_input_keeps_request_ids(seed):
    """Requests given out of order are replayed in arrival order; ids follow the input rows."""
    shuffled = _requests([3.0, 0.0, 1.0], [100, 200, 300], [5, 6, 7])
    stages = replay(shuffled, seed).sort("request_id")
    assert stages["request_id"].to_list() == ["0", "1", "2"]
    assert stages["prompt_tokens"].to_list() == [100, 200, 300]
    in_order = replay(shuffled.sort("arrival_s"), seed)
    assert_frame_equal(
        stages.sort("arrival_s").drop("request_id"), in_order.drop("request_id"),
    )


def test_stage_batches_are_the_stages_a_slice_at_a_time(seed):
    """The replay asset and the what-if replays write a replay's rows a slice at a time: the
    slices are `stages`, ids included (a log without request ids numbers its rows; each slice
    numbers on from the one before, not from 0 again)."""
    result = replay_fleet(_requests([0.0, 0.5, 1.0, 1.5, 2.0], [100, 200, 300, 400, 500],
                                    [5, 6, 7, 8, 9]), seed)
    batches = list(result.stage_batches(2))
    assert [b.height for b in batches] == [2, 2, 1]
    assert_frame_equal(pl.concat(batches), result.stages)
    assert result.stages["request_id"].to_list() == ["0", "1", "2", "3", "4"]


# ---- (b) + (c) on a busy mixed trace -------------------------------------------------------------

def test_invariants_on_a_mixed_burst(catalog):
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", replicas=2, max_seqs=16,
                      max_batched_tokens=2048)
    rng = np.random.default_rng(7)
    n = 120
    requests = _requests(np.sort(rng.uniform(0, 5, n)), rng.integers(1, 4000, n),
                         rng.integers(1, 400, n))
    result = replay_fleet(requests, d, bin_s=0.5)
    assert_invariants(result, d)
    assert result.timeline.height == 2 * int(np.ceil(result.span_s / 0.5))
    assert (result.timeline["busy_share"] <= 1 + 1e-9).all()
    assert set(result.stages["replica"]) == {0, 1}


# ---- (d) saturation --------------------------------------------------------------------------

def test_one_replica_queues_where_four_do_not(seed):
    burst = _burst(200, 2000, 100, over_s=1.0)
    one = replay(burst, seed)
    four = replay(burst, dataclasses.replace(seed, replicas=4))
    q1, q4 = one["queue_s"].mean(), four["queue_s"].mean()
    assert q1 > 0
    assert q1 > 3 * q4
    assert one["e2e_s"].mean() > four["e2e_s"].mean()
    assert four["replica"].value_counts().height == 4


# ---- (e) KV pressure ---------------------------------------------------------------------------

def test_kv_pressure_preempts_and_everything_finishes(catalog):
    d = catalog.build(model="llama-2-7b", gpu="a100-80gb-sxm", kv_memory_fraction=0.2, max_seqs=256)
    assert 1000 < d.kv_capacity_tokens < 20_000
    burst = _burst(30, 1000, 800, over_s=0.5)
    result = replay_fleet(burst, d)
    s = result.stages
    assert s["preemptions"].sum() > 0
    assert_invariants(result, d)
    assert (result.timeline["mean_kv_use"] <= 1 + 1e-9).all()
    # a preempted request recomputes its prefill: it costs more prefill GPU time than the
    # same request alone
    alone = replay(_requests([0.0], [1000], [800]), d).row(0, named=True)
    preempted = s.filter(pl.col("preemptions") > 0)
    assert (preempted["prefill_gpu_s"] > alone["prefill_gpu_s"]).all()


def test_kv_use_counts_a_shared_prefix_once(catalog):
    """Eleven requests reuse the first one's 1,536-token prefix from the cache: it is stored
    once, but the timeline summed every running context, so the KV use read 465% of a cache
    that held every sequence without a preemption (a Mooncake log's peak KV use, 101.55%)."""
    d = catalog.build(model="llama-2-7b", gpu="a100-80gb-sxm", kv_memory_fraction=0.2, max_seqs=256)
    n = 12
    requests = pl.DataFrame({"arrival_s": [0.0] + [1.0] * (n - 1), "prompt_tokens": [2048] * n,
                             "output_tokens": [300] * n, "prefix_hashes": [[1, 2, 3, 4]] * n})
    result = replay_fleet(requests, d, bin_s=0.05)
    assert result.stages["preemptions"].sum() == 0
    assert result.stages["cached_hit_tokens"].to_list() == [0] + [1536] * (n - 1)
    assert 0.8 < result.timeline["mean_kv_use"].max() <= 1 + 1e-9


def test_full_reservation_never_preempts_and_reproduces_trtllm_bench(catalog):
    """TensorRT-LLM's default GUARANTEED_NO_EVICT admission (kv_reservation "full"): the perf
    overview's own run, 3,000 requests of 128 + 2,048 tokens queued at once on one H200 (FP8
    Llama-3.3-70B, trtllm-bench), replays with no preemption at 4,362 output tokens/s against
    the 4,336 measured; admitting on the prompt alone, as vLLM does, the same burst preempts
    thousands of times and runs a quarter slower."""
    from pipelines.roofline.validation import ENGINE_SCHEDULER

    d = catalog.build(model="llama-3.1-70b", gpu="h200-sxm", tp=1, weights="fp8", kv_cache="fp8",
                      **ENGINE_SCHEDULER["trtllm-bench"])
    assert d.scheduler.kv_reservation == "full"
    burst = _requests(np.zeros(3000), np.full(3000, 128), np.full(3000, 2048))
    full = replay_fleet(burst, d)
    prompt_only = replay(burst, dataclasses.replace(
        d, scheduler=dataclasses.replace(d.scheduler, kv_reservation="prompt")))
    assert full.stages["preemptions"].sum() == 0 and prompt_only["preemptions"].sum() > 1000
    assert_invariants(full, d)
    measured = 4336.0  # tensorrt-llm-perf-overview, H200 FP8 TP1 128/2048, published_measurements.csv
    throughput = 3000 * 2048 / full.stages["finished_s"].max()
    assert abs(throughput / measured - 1) < 0.03
    assert 3000 * 2048 / prompt_only["finished_s"].max() < 0.8 * measured


# ---- (f) FCFS ----------------------------------------------------------------------------------

def test_fcfs_admission_on_one_replica(seed):
    rng = np.random.default_rng(3)
    n = 150
    requests = _requests(np.sort(rng.uniform(0, 2, n)), rng.integers(1, 1000, n),
                         rng.integers(1, 200, n))
    s = replay(requests, seed)
    assert s["preemptions"].sum() == 0
    assert s["queue_s"].max() > 0   # the test is vacuous unless requests really wait
    by_arrival = s.sort("arrival_s", maintain_order=True)
    assert by_arrival["admitted_s"].is_sorted()
    by_admission = s.sort("admitted_s", "arrival_s", maintain_order=True)
    assert_frame_equal(by_admission, by_arrival)


# ---- (g) max_seqs --------------------------------------------------------------------------------

def test_max_seqs_is_respected(catalog):
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", max_seqs=8)
    result = replay_fleet(_burst(60, 300, 120, over_s=0.2), d, bin_s=0.25)
    s = result.stages
    assert s["preemptions"].sum() == 0
    assert (result.timeline["mean_batch"] <= 8 + 1e-9).all()
    assert result.timeline["mean_batch"].max() > 6  # the limit is actually reached
    # at any instant at most 8 requests sit between admission and finish
    events = sorted([(t, 1) for t in s["admitted_s"]] + [(t, -1) for t in s["finished_s"]],
                    key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak == 8


# ---- (h) errors ------------------------------------------------------------------------------------

def test_request_longer_than_the_kv_cache_is_refused(seed):
    too_long = seed.kv_capacity_tokens
    with pytest.raises(ReplayError, match=f"{seed.kv_capacity_tokens:,}"):
        replay(_requests([0.0, 1.0], [100, too_long], [10, 10]), seed)


def test_the_refusal_names_only_the_kv_cache_levers_the_deployment_has_left(catalog):
    """A request beyond the KV cache of a deployment already at its model's largest tp with an
    fp8 KV cache was told to use 'more GPUs per replica, fp8 KV cache', neither of which it has
    left (the replay asset's remedies named them apart since 77f53a1, this message did not)."""
    widest = catalog.build(model="llama-3.1-8b", gpu="l4", tp=8, kv_cache="fp8", kv_memory_fraction=0.12)
    with pytest.raises(ReplayError) as refused:
        replay(_requests([0.0], [widest.kv_capacity_tokens], [10]), widest)
    assert str(refused.value).endswith("; replay on a deployment with more KV memory (a GPU with"
                                       " more memory) or leave such requests out of the log")
    plain = catalog.build(model="llama-3.1-8b", gpu="l4")   # tp 1, a bf16 KV cache
    with pytest.raises(ReplayError, match=r"\(more GPUs per replica, an fp8 KV cache or a GPU with"
                                          r" more memory\)"):
        replay(_requests([0.0], [plain.kv_capacity_tokens], [10]), plain)


def test_a_request_that_fills_the_kv_cache_exactly_is_replayed(seed):
    """The last token's KV is never written: prompt + output - 1 tokens fill the cache, so a
    request of exactly that size replays (one token more is refused)."""
    capacity = seed.kv_capacity_tokens
    row = replay(_requests([0.0], [capacity - 9], [10]), seed).row(0, named=True)
    assert row["output_tokens"] == 10 and row["preemptions"] == 0
    with pytest.raises(ReplayError, match=f"{capacity:,}"):
        replay(_requests([0.0], [capacity - 8], [10]), seed)


def test_the_timeline_limit_counts_every_replica(seed, monkeypatch):
    """The fleet timeline has a row per replica and bin: ten replicas over 200 one-minute bins
    need 2,020 cells, over a limit of 1,000, though one replica's 202 are not."""
    monkeypatch.setattr("pipelines.replay.api.MAX_TIMELINE_CELLS", 1000)
    requests = _requests([0.0, 200 * 60.0], [100, 100], [5, 5])
    assert replay(requests, seed).height == 2
    with pytest.raises(ReplayError, match=r"10 replicas x 60-s bins would need a fleet timeline of"
                                          r" 2,020 cells, over the 1,000"):
        replay(requests, dataclasses.replace(seed, replicas=10))


def test_a_request_is_bound_by_the_resource_of_most_of_its_gpu_seconds(seed):
    """A long prompt with a short answer spends most (not all) of its GPU-seconds in its
    compute-bound prefill: compute; a short prompt with a long answer: memory."""
    stages = replay(_requests([0.0, 100.0], [5000, 100], [20, 500]), seed)
    share = stages["compute_gpu_s"] / stages["gpu_s"]
    assert 0.5 < share[0] < 0.95 and share[1] < 0.5
    assert stages["bound"].to_list() == ["compute", "memory"]


def test_a_mixture_s_compute_gpu_seconds_are_its_compute_bound_kernels(catalog):
    """400 identical requests on Mixtral-8x7B (2 x H100) arriving together: one prefill step,
    then decode steps of 400 sequences, whose shared GEMMs are compute-bound and routed experts
    memory-bound (docs/physics.md section 1). Each request's times and GPU-seconds are the steps
    summed by hand, and its compute_gpu_s the step's compute-bound part (step_cost) of them all,
    the shared GEMMs' time included, not the GEMMs counted all or nothing by their majority."""
    d = catalog.build(model="mixtral-8x7b", gpu="h100-sxm", tp=2, max_seqs=512,
                      max_batched_tokens=16384)
    n, prompt, output = 400, 20, 300
    coef = d.coefficients

    def compute_bound_part(*args):
        compute_s, memory_s, _ = step.step_cost(coef, *args)
        return compute_s - memory_s if compute_s >= memory_s else compute_s

    steps = [(n * prompt, n, n * step.chunk_attn_pairs(0.0, prompt), 0, n * prompt)]
    steps += [(n, n, n * (prompt + k), n * (prompt + k), n) for k in range(output - 1)]
    stages = replay(_requests([0.0] * n, [prompt] * n, [output] * n), d)
    total = d.prefill_batch_s(n, prompt) + sum(d.decode_step_s(n, n * (prompt + k))
                                               for k in range(output - 1))
    assert stages["finished_s"].to_numpy() == pytest.approx(np.full(n, total), rel=1e-12)
    assert stages["gpu_s"].to_numpy() == pytest.approx(np.full(n, total * d.tp / n), rel=1e-9)
    compute = sum(compute_bound_part(*s) for s in steps) * d.tp / n
    assert stages["compute_gpu_s"].to_numpy() == pytest.approx(np.full(n, compute), rel=1e-9)
    assert 0.05 < compute / stages["gpu_s"][0] < 0.1


@pytest.mark.parametrize(
    ("prompt", "output", "cached"),
    [(100, 0, 0), (0, 10, 0), (-5, 10, 0), (100, 10, 100), (100, 10, -1)],
    ids=["output0", "prompt0", "prompt-negative", "all-cached", "cached-negative"],
)
def test_invalid_requests_are_refused(seed, prompt, output, cached):
    with pytest.raises(ReplayError, match="invalid"):
        replay(_requests([0.0, 0.1], [50, prompt], [5, output], [0, cached]), seed)


@pytest.mark.parametrize(("column", "values"), [
    ("arrival_s", [float("nan"), 0.1]), ("arrival_s", [0.0, float("inf")]),
    ("prompt_tokens", [50, 5.5]), ("prompt_tokens", [None, 50]), ("output_tokens", [5, float("nan")]),
    ("cached_tokens", [0, 0.5]),
], ids=["nan-arrival", "inf-arrival", "fractional-prompt", "null-prompt", "nan-output", "fractional-cached"])
def test_missing_non_finite_and_fractional_fields_are_refused_naming_the_row(seed, column, values):
    """A NaN arrival failed deep in numpy ("negative dimensions"), a null count divided by zero,
    and 5.5 tokens were truncated to 5; each is the request's fault and is named as such."""
    frame = pl.DataFrame({"arrival_s": [0.0, 0.1], "prompt_tokens": [50, 50], "output_tokens": [5, 5],
                          "cached_tokens": [0, 0]}).with_columns(pl.Series(column, values, strict=False))
    with pytest.raises(ReplayError, match=r"^1 request\(s\) have invalid fields \(need whole prompt_tokens"):
        replay(frame, seed)


def test_columns_that_are_not_numbers_are_refused_by_name(seed):
    frame = pl.DataFrame({"arrival_s": [0.0], "prompt_tokens": ["5"], "output_tokens": [5]})
    with pytest.raises(ReplayError, match=r"\{'prompt_tokens': 'String'\} are not numbers"):
        replay(frame, seed)
    whole = pl.DataFrame({"arrival_s": [0.0], "prompt_tokens": [50.0], "output_tokens": [5],
                          "cached_tokens": [None]})
    assert replay(whole, seed).height == 1   # whole floats and an all-null cached column are fine


def test_a_span_beyond_any_timeline_is_refused_not_allocated(seed):
    """An arrival in milliseconds among seconds (here 1.7e12 s, year 55,800) would ask for a
    timeline of 2.8e10 bins; the replay says so before allocating anything."""
    with pytest.raises(ReplayError, match=r"span 1,700,000,000,000 s .* check the log's arrival"
                                          r" times"):
        replay(_requests([0.0, 1.7e12], [100, 100], [10, 10]), seed)


def test_missing_columns_and_empty_input_are_refused(seed):
    with pytest.raises(ReplayError, match="output_tokens"):
        replay(pl.DataFrame({"arrival_s": [0.0], "prompt_tokens": [10]}), seed)
    with pytest.raises(ReplayError):
        replay(_requests([], [], []), seed)


@pytest.mark.parametrize(("requests", "deployment", "named"), [
    (lambda: {"arrival_s": [0.0], "prompt_tokens": [10], "output_tokens": [5]}, None,
     "requests: expected a polars DataFrame, got dict"),
    (lambda: _requests([0.0], [10], [5]).lazy(), None, r"got LazyFrame \(call \.collect\(\) first\)"),
    (lambda: _requests([0.0], [10], [5]), "seed-example",
     "deployment='seed-example': expected a Deployment"),
], ids=["dict", "lazy-frame", "deployment-name"])
def test_arguments_of_the_wrong_kind_are_named(seed, requests, deployment, named):
    """Not an AttributeError from inside the validation: a notebook passes a dict, a LazyFrame
    or the deployment's name."""
    with pytest.raises(ReplayError, match=named):
        replay(requests(), deployment or seed)


# ---- (i) a real excerpt ----------------------------------------------------------------------------

def test_real_conv_excerpt_on_the_default_fleet(catalog):
    requests = read_azure_csv(CONV).requests.head(2000)
    d = catalog.deployment("azure-2023-70b-h100")
    result = replay_fleet(requests, d)
    s = result.stages
    assert s.height == 2000
    assert_invariants(result, d)
    assert set(s["request_id"]) == set(requests["request_id"])
    assert s["decode_gpu_s"].sum() > s["prefill_gpu_s"].sum()
    assert set(s["replica"]) == {0, 1, 2}


def test_simultaneous_arrivals_on_an_idle_replica_share_the_first_step():
    """Requests logged at the same instant are batched together, not queued behind the first."""
    d = load_catalog().deployment("seed-example")
    stages = replay(pl.DataFrame({"arrival_s": [0.0, 0.0, 0.0], "prompt_tokens": [500] * 3,
                                  "output_tokens": [10] * 3}), d)
    assert stages["admitted_s"].to_list() == [0.0, 0.0, 0.0]
    assert stages["queue_s"].max() == 0.0


# ---- prefix caching (Mooncake-style prefix hashes) ----------------------------------------------

def test_a_repeated_prefix_is_not_prefilled_twice(seed):
    """Two requests of one conversation: the second finds the first's 3 full 512-token hash
    blocks resident (the 4th is partial) and prefills only the rest."""
    requests = _requests([0.0, 5.0], [1800, 1900], [10, 10]).with_columns(
        prefix_hashes=pl.Series([[1, 2, 3, 4], [1, 2, 3, 9]], dtype=pl.List(pl.Int64)))
    result = replay_fleet(requests, seed)
    s = result.stages
    assert s["cached_hit_tokens"].to_list() == [0, 3 * 512]
    assert result.cache_hit_rate == pytest.approx(3 * 512 / 3700)
    alone = replay(_requests([0.0], [1900], [10], [3 * 512]), seed).row(0, named=True)
    assert s.row(1, named=True)["prefill_s"] == pytest.approx(alone["prefill_s"], rel=1e-12)
    # without hashes nothing is reused
    plain = replay_fleet(requests.drop("prefix_hashes"), seed)
    assert plain.stages["cached_hit_tokens"].to_list() == [0, 0]
    assert plain.cache_hit_rate == 0.0
    assert plain.stages["prefill_gpu_s"][1] > s["prefill_gpu_s"][1]


def test_replay_takes_the_tokens_per_prefix_hash(seed):
    """A log read with block_tokens=256 credits each resident hash 256 tokens, through replay()
    as through replay_fleet(); replay() used to have no way to say so and credited 512."""
    requests = _requests([0.0, 5.0], [1800, 1900], [10, 10]).with_columns(
        prefix_hashes=pl.Series([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 9]], dtype=pl.List(pl.Int64)))
    stages = replay(requests, seed, hash_tokens=256)
    assert stages["cached_hit_tokens"].to_list() == [0, 3 * 256]
    assert_frame_equal(stages, replay_fleet(requests, seed, hash_tokens=256).stages)


def test_prefix_blocks_are_per_replica(catalog):
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", replicas=2)
    requests = _requests([0.0, 5.0, 10.0], [1100, 1100, 1100], [5, 5, 5]).with_columns(
        prefix_hashes=pl.Series([[7, 8, 0], [7, 8, 1], [7, 8, 2]], dtype=pl.List(pl.Int64)))
    s = replay_fleet(requests, d, router="round_robin").stages
    assert s["replica"].to_list() == [0, 1, 0]
    assert s["cached_hit_tokens"].to_list() == [0, 0, 1024]


def test_hash_tokens_must_be_whole_kv_blocks(seed):
    """Where the log has prefix hashes; a log without them never reads the size (a deployment
    whose KV block does not divide Mooncake's 512 still replays it)."""
    hashed = _requests([0.0], [100], [5]).with_columns(
        prefix_hashes=pl.Series([[7]], dtype=pl.List(pl.Int64)))
    with pytest.raises(ReplayError, match="hash_tokens=500"):
        replay_fleet(hashed, seed, hash_tokens=500)
    assert replay_fleet(_requests([0.0], [100], [5]), seed, hash_tokens=500).stages.height == 1
    with pytest.raises(ReplayError, match="router"):
        replay_fleet(_requests([0.0], [100], [5]), seed, router="random")


def test_long_replays_report_progress(seed, monkeypatch):
    monkeypatch.setattr("pipelines.replay.api.PROGRESS_EVERY", 10)
    calls = []
    replay_fleet(_burst(35, 100, 5, over_s=3.0), seed,
                 progress=lambda routed, total, now: calls.append((routed, total, now)))
    assert [(routed, total) for routed, total, _ in calls] == [(10, 35), (20, 35), (30, 35)]
    assert [now for _, _, now in calls] == sorted(now for _, _, now in calls)


MOONCAKE = ROOT / "tests" / "fixtures" / "mooncake" / "conversation_trace_excerpt.jsonl"


def test_real_mooncake_excerpt_reuses_prefixes(catalog):
    """600 real Kimi conversation requests (prefix hashes per 512 tokens): no request finds more
    in the cache than earlier requests' full blocks could have put there; with one replica and
    ample KV nearly all of that is found; the default fleet (3 replicas, KV pressure) finds less
    but still saves prefill GPU time."""
    log = pl.read_ndjson(MOONCAKE)
    requests = log.select(
        arrival_s=pl.col("timestamp") / 1000.0, prompt_tokens="input_length",
        output_tokens="output_length", prefix_hashes=pl.col("hash_ids").cast(pl.List(pl.Int64)))
    # the upper bound by arrival order: leading hashes that earlier requests held as full
    # 512-token blocks (a replay may find fewer: another replica, not yet prefilled, evicted)
    seen: set[int] = set()
    bound = []
    for hashes, prompt in zip(requests["prefix_hashes"].to_list(), requests["prompt_tokens"]):
        k = 0
        while k < min(len(hashes), (prompt - 1) // 512) and hashes[k] in seen:
            k += 1
        bound.append(512 * k)
        seen.update(hashes[: prompt // 512])
    bound_rate = sum(bound) / requests["prompt_tokens"].sum()
    assert 0.1 < bound_rate < 0.5

    # one replica whose KV cache never fills (10 M tokens): nothing is evicted
    d = catalog.deployment("azure-2023-70b-h100")
    offsets, hashes = _prefix_hashes(requests)
    n = requests.height
    hit = engine.simulate(
        requests["arrival_s"].to_numpy(), requests["prompt_tokens"].to_numpy(),
        requests["output_tokens"].to_numpy(), np.zeros(n, np.int64), offsets, hashes, 512,
        d.coefficients, 1, 256, 8192, True, 10_000_000 // 16, 16, 60.0, engine.LEAST_OUTSTANDING,
        np.zeros(0, np.int64),
    )[8]
    assert (hit <= np.array(bound)).all()
    assert hit.sum() / requests["prompt_tokens"].sum() > 0.95 * bound_rate

    result = replay_fleet(requests, d)
    s = result.stages
    assert_invariants(result, d)
    assert 0.01 < result.cache_hit_rate < bound_rate
    assert (s["cached_hit_tokens"] % 512 == 0).all()
    assert (s["cached_hit_tokens"] <= pl.Series(bound)).all()
    plain = replay_fleet(requests.drop("prefix_hashes"), d)
    assert plain.cache_hit_rate == 0.0
    assert s["prefill_gpu_s"].sum() < plain.stages["prefill_gpu_s"].sum()


def test_replay_traces_replays_each_trace_on_its_own_fleet_lazily(seed):
    """The first trace's result comes before the second is replayed (one held at a time), and
    a trace that cannot be replayed is named."""
    requests = pl.concat([
        _requests([0.0, 0.1], [100, 200], [5, 5]).with_columns(trace=pl.lit("a")),
        _requests([0.0], [seed.kv_capacity_tokens], [5]).with_columns(trace=pl.lit("b")),
    ])
    replays = replay_traces(by_trace(requests), seed)
    trace, frame, result = next(replays)
    assert trace == "a" and frame.height == 2 and result.stages.height == 2
    with pytest.raises(ReplayError, match=r"^trace b: 1 request\(s\) need more KV cache"):
        next(replays)


def test_decimal_token_counts_replay_as_the_numbers_they_are(seed):
    """DuckDB's sums arrive in Polars as Decimal: they were a raw 'is_finite not supported for
    decimal' error."""
    plain = _requests([0.0, 0.5], [500, 600], [5, 6])
    decimal = plain.with_columns(pl.col("prompt_tokens").cast(pl.Decimal(38, 0)))
    assert replay(decimal, seed)["e2e_s"].to_list() == replay(plain, seed)["e2e_s"].to_list()


@pytest.mark.parametrize("bin_s", ["60", True, 0])
def test_a_bin_that_is_not_a_positive_number_is_named(seed, bin_s):
    with pytest.raises(ReplayError, match=rf"bin_s={bin_s!r}: expected a positive number"):
        replay_fleet(_requests([0.0], [10], [5]), seed, bin_s=bin_s)


def test_tokens_per_prefix_hash_is_a_whole_number(seed):
    """replay() now takes hash_tokens: a whole float (a pandas column with a gap, a sweep) is
    the count it says, as Catalog.build takes 32.0; it was a numba TypingError from inside the
    compiled replay, and text a bare TypeError."""
    requests = _requests([0.0, 5.0], [1800, 1900], [10, 10]).with_columns(
        prefix_hashes=pl.Series([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 9]], dtype=pl.List(pl.Int64)))
    assert_frame_equal(replay(requests, seed, hash_tokens=256.0),
                       replay(requests, seed, hash_tokens=256))
    assert_frame_equal(replay(requests.drop("prefix_hashes"), seed, hash_tokens=np.float64(512)),
                       replay(requests.drop("prefix_hashes"), seed))
    for wrong in ("256", True, math.nan):
        with pytest.raises(ReplayError, match=rf"hash_tokens={re.escape(repr(wrong))}: expected a"
                                              r" whole number"):
            replay(requests, seed, hash_tokens=wrong)


def test_decode_steps_under_cuda_graph_padding_run_at_the_captured_batch(catalog):
    """Ten identical requests prefilled together, then 49 decode-only steps of 10 sequences:
    padded to the captured 64 each such step costs Deployment.decode_step_s(10, ...), which pads
    too, so their decode stage is the sum of those; the prefill step, which carries prompts, is
    not padded; and the padding's GPU time is the requests' (conservation holds)."""
    plain = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", max_seqs=64)
    padded = dataclasses.replace(plain, scheduler=dataclasses.replace(
        plain.scheduler, graph_batch_sizes=(8, 64)))
    requests = _burst(10, 100, 50)
    before, after = replay_fleet(requests, plain), replay_fleet(requests, padded)
    assert_invariants(after, padded)
    s, p = before.stages, after.stages
    assert (p["prefill_s"] - s["prefill_s"]).abs().max() < 1e-12
    steps = sum(padded.decode_step_s(10, 10 * (100 + k)) for k in range(49))
    assert p["decode_s"].to_numpy() == pytest.approx(np.full(10, steps), rel=1e-3)
    # memory-bound at 10 sequences: the weight read does not grow with the padding, the
    # padding's FLOPs, all-reduce and sampling do
    assert (p["decode_s"] > s["decode_s"]).all()
    assert float(p["gpu_s"].sum()) > float(s["gpu_s"].sum())


def test_the_allreduce_traffic_of_a_step_is_charged_by_own_tokens(catalog):
    """Two prompts prefilled in one step on 4 x H100 (tp 4): a 1-token prompt and a 4,000-token
    one, each done at its first token. The step's GEMMs are compute-bound (4,001 tokens), so
    split by own FLOPs (tokens through the blocks, one LM-head row each); its attention by own
    pairs or KV bytes; the step and per-sequence overheads and the all-reduce's latency equally;
    the all-reduce's traffic, tokens x A_bytes / B_link, by own tokens (engine docstring), not
    equally: the short prompt does not pay for the long one's activations."""
    d = dataclasses.replace(catalog.deployment("azure-2023-70b-h100"), replicas=1)
    coef = d.coefficients
    s = replay_fleet(_requests([0.0, 0.0], [1, 4000], [1, 1]), d).stages.sort("prompt_tokens")
    assert s["first_token_s"][0] == s["first_token_s"][1]   # one step
    tokens = 4001.0
    (duration, shared_s, shared_c, experts_s, _, attn_s, attn_c, fixed_s) = engine.kernels(
        coef, tokens, 2.0, step.chunk_attn_pairs(0.0, 1.0) + step.chunk_attn_pairs(0.0, 4000.0),
        0.0, tokens)
    assert shared_c and experts_s == 0.0
    traffic = step.allreduce_traffic_s(coef, tokens)
    assert 0.0 < traffic < fixed_s
    short_pairs, long_pairs = step.chunk_attn_pairs(0.0, 1.0), step.chunk_attn_pairs(0.0, 4000.0)
    attn_short = attn_s * (short_pairs / (short_pairs + long_pairs) if attn_c else 1.0 / tokens)
    gemm_short = shared_s * step.gemm_flops(coef, 1.0, 1.0) / step.gemm_flops(coef, tokens, 2.0)
    expected = (gemm_short + attn_short + (fixed_s - traffic) / 2.0 + traffic / tokens) * 4
    assert s["prefill_gpu_s"][0] == pytest.approx(expected, rel=1e-9)
    assert s["prefill_gpu_s"].sum() == pytest.approx(duration * 4, rel=1e-12)
    # the equal split it replaced would have charged the short prompt half the traffic
    assert s["prefill_gpu_s"][0] < expected + (traffic / 2.0 - traffic / tokens) * 4 * 0.9


def test_a_bin_busy_from_end_to_end_has_no_idle_residue():
    """A bin's busy time is summed from its steps' pieces and lands a few ulps either side of the
    bin; a fleet busy all the time read "idle 0.0% = $0.0000000000000024" and a busy share of
    1.0000000000000007. Within BUSY_SNAP of the bin it is the bin; a real gap (a microsecond) is
    kept."""
    timeline = np.zeros((5, 1, 3))
    timeline[0, 0] = [60.0 * (1 - 3e-16), 60.0 * (1 + 2e-16), 60.0 - 1e-6]
    frame = _timeline_frame(timeline, 60.0, 180.0, 8.0)
    assert frame["idle_gpu_s"].to_list() == [0.0, 0.0, pytest.approx(8e-6)]
    assert frame["busy_share"].to_list()[:2] == [1.0, 1.0]
    assert (frame["busy_gpu_s"] + frame["idle_gpu_s"]).to_list() == [480.0, 480.0, 480.0]


def test_bins_of_a_width_no_binary_fraction_cover_the_span_the_engine_binned():
    """A bin's covered seconds were its start plus timeline_bin_s less its start, but the engine
    bins [b x bin_s, (b + 1) x bin_s): at 0.1 s, which no binary fraction is, each start rounds
    off, and two days of bins covered 3e-11 more than the span. Per fleet that is 3e-11 of the
    capacity, but the what-if check's busy seconds are the capacity less the idle ones: a correct
    replay of four requests read 3e-4 over its attributed seconds and failed the run. Bins of the
    engine's edges cover the span to its last ulps."""
    span_s = 172_800.02047210876
    frame = _timeline_frame(np.zeros((5, 1, int(np.ceil(span_s / 0.1)))), 0.1, span_s, 1.0)
    assert math.fsum(frame["bin_s"]) == pytest.approx(span_s, rel=1e-15, abs=0)
    assert math.fsum(frame["idle_gpu_s"]) == pytest.approx(span_s, rel=1e-15, abs=0)
