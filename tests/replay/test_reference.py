"""Two implementations, one truth: the compiled engine (runs of decode steps in closed form,
min-tree of step ends) against the plain step-by-step reference simulator, on random small
traces and settings; plus the invariants every replay must satisfy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.replay import engine, replay_fleet
from pipelines.roofline import step as roofline
from pipelines.roofline import load_catalog
from tests.replay import reference
from tests.replay.test_engine import assert_invariants

_CATALOG = load_catalog()
# A dense model, a mixture of experts (weight bytes depend on the step's tokens) and a
# tensor-parallel deployment (all-reduce in the fixed cost): three shapes of the step formula.
DEPLOYMENTS = {
    "dense": _CATALOG.build(model="llama-3.1-8b", gpu="l40s"),
    "moe": _CATALOG.build(model="mixtral-8x7b", gpu="h100-sxm", tp=2),
    "tp4": _CATALOG.deployment("azure-2023-70b-h100"),
}
REL = 1e-9


def _slow_attention(coef: np.ndarray, factor: float) -> np.ndarray:
    """Coefficients whose attention FLOP rate makes decode attention compute-bound once the
    contexts reach (factor / (factor - 1)) tokens per sequence (real GPUs keep decode attention
    memory-bound; this exercises the compute-bound side and the flip within runs)."""
    out = coef.copy()
    memory_rate = out[roofline.KV_BYTES_PER_TOKEN] / out[roofline.EFFECTIVE_BANDWIDTH]
    out[roofline.ATTN_EFFECTIVE_FLOPS] = out[roofline.ATTN_FLOPS_PER_PAIR] / (factor * memory_rate)
    return out


COEFFICIENTS = {name: d.coefficients for name, d in DEPLOYMENTS.items()}
COEFFICIENTS["attention-flips"] = _slow_attention(COEFFICIENTS["dense"], 1.02)
COEFFICIENTS["attention-compute"] = _slow_attention(COEFFICIENTS["tp4"], 10.0)


@st.composite
def scenarios(draw):
    block = draw(st.sampled_from([1, 4, 16]))
    capacity_blocks = draw(st.integers(8, 400))
    capacity = capacity_blocks * block
    n = draw(st.integers(1, 40))
    burst = draw(st.floats(0.01, 30))
    arrival = sorted(draw(st.lists(st.floats(0, burst, allow_nan=False), min_size=n, max_size=n)))
    # simultaneous arrivals happen in real logs (second-resolution timestamps)
    if draw(st.booleans()):
        arrival = [round(a) for a in arrival]
    hash_tokens = block * draw(st.sampled_from([1, 4, 16]))
    with_hashes = draw(st.booleans())
    prompt, output, cached, hashes = [], [], [], []
    for _ in range(n):
        p = draw(st.integers(1, max(1, min(3000, capacity - 1))))
        o = draw(st.integers(1, max(1, min(300, capacity - p + 1))))
        c = draw(st.integers(0, p - 1)) if draw(st.booleans()) else 0
        prompt.append(p)
        output.append(o)
        cached.append(c)
        # Prefix hashes as in Mooncake: equal prefixes, equal hashes. Requests of the same
        # conversation share a prefix of their hash list, diverging after `split` blocks.
        conversation, split = draw(st.integers(0, 3)), draw(st.integers(0, 8))
        hashes.append([conversation * 10**9 + (j if j < split else 10**6 * (len(hashes) + 1) + j)
                       for j in range(-(-p // hash_tokens))] if with_hashes else [])
    offsets = np.zeros(n + 1, np.int64)
    offsets[1:] = np.cumsum([len(h) for h in hashes])
    return dict(
        arrival=np.array(arrival, dtype=np.float64),
        prompt=np.array(prompt, dtype=np.int64),
        output=np.array(output, dtype=np.int64),
        cached=np.array(cached, dtype=np.int64),
        hashes=hashes, hash_offsets=offsets,
        flat_hashes=np.array([x for h in hashes for x in h], dtype=np.int64),
        hash_tokens=hash_tokens,
        coef=COEFFICIENTS[draw(st.sampled_from(sorted(COEFFICIENTS)))],
        replicas=draw(st.integers(1, 3)),
        max_seqs=draw(st.sampled_from([1, 2, 5, 256])),
        max_batched_tokens=draw(st.sampled_from([64, 512, 2048, 8192])),
        chunked_prefill=draw(st.booleans()),
        kv_capacity_blocks=capacity_blocks,
        block_tokens=block,
        router=draw(st.sampled_from(sorted(engine.ROUTERS))),
        reserve_output=draw(st.booleans()),
        # CUDA-graph padding of decode-only steps: none, or a ladder with gaps and a top below
        # some batches (those run unpadded)
        graph_sizes=draw(st.sampled_from([(), (1, 2, 4), (3, 8, 16)])),
    )


def _close(a, b) -> bool:
    return bool(np.all(np.abs(np.asarray(a) - np.asarray(b))
                       <= REL * np.maximum(np.abs(np.asarray(b)), 1e-12)))


@settings(max_examples=300, deadline=None)
@given(case=scenarios())
def test_engine_agrees_with_the_reference(case):
    ref = reference.simulate(**{k: v for k, v in case.items()
                                if k not in ("hash_offsets", "flat_hashes")})
    bin_s = 0.37
    (replica, admitted, first, finished, preemptions, prefill_gpu, decode_gpu, compute_gpu,
     hit, timeline) = engine.simulate(
        case["arrival"], case["prompt"], case["output"], case["cached"], case["hash_offsets"],
        case["flat_hashes"], case["hash_tokens"], case["coef"],
        case["replicas"], case["max_seqs"], case["max_batched_tokens"], case["chunked_prefill"],
        case["kv_capacity_blocks"], case["block_tokens"], bin_s, engine.ROUTERS[case["router"]],
        np.asarray(case["graph_sizes"], dtype=np.int64), case["reserve_output"],
    )
    seqs = ref.sequences
    if case["reserve_output"]:
        assert not preemptions.any()   # a sequence admitted with its whole length never waits
    assert replica.tolist() == [s.replica for s in seqs]
    assert preemptions.tolist() == [s.preemptions for s in seqs]
    assert hit.tolist() == [s.hit for s in seqs]
    assert _close(admitted, [s.admitted for s in seqs])
    assert _close(first, [s.first for s in seqs])
    assert _close(finished, [s.finished for s in seqs])
    assert _close(prefill_gpu, [s.prefill_gpu for s in seqs])
    assert _close(decode_gpu, [s.decode_gpu for s in seqs])
    assert _close(compute_gpu, [s.compute_gpu for s in seqs])
    # the timeline: busy seconds, the batch integral and the KV-use integral (a share of the
    # replica's KV capacity) per replica
    capacity = case["kv_capacity_blocks"] * case["block_tokens"]
    for r in range(case["replicas"]):
        steps = [(end - start, batch, kv) for k, start, end, batch, kv in ref.step_log if k == r]
        assert timeline[0, r].sum() == pytest.approx(sum(d for d, _, _ in steps), rel=REL, abs=1e-12)
        assert timeline[1, r].sum() == pytest.approx(sum(d * b for d, b, _ in steps), rel=REL, abs=1e-12)
        assert timeline[2, r].sum() == pytest.approx(sum(d * kv for d, _, kv in steps) / capacity,
                                                     rel=REL, abs=1e-12)


def test_reference_agrees_on_a_long_decode_run_across_a_bound_flip():
    """A big batch of long outputs on a tensor-parallel deployment: runs of hundreds of decode
    steps, whose bound turns from memory to compute as the contexts grow."""
    d = DEPLOYMENTS["tp4"]
    n = 300
    case = dict(arrival=np.zeros(n), prompt=np.full(n, 2000), output=np.full(n, 1500),
                cached=np.zeros(n, np.int64), coef=d.coefficients, replicas=1, max_seqs=256,
                max_batched_tokens=8192, chunked_prefill=True,
                kv_capacity_blocks=d.kv_capacity_tokens // 16, block_tokens=16,
                router="least_outstanding")
    ref = reference.simulate(**case)
    out = engine.simulate(*(case[k] for k in ("arrival", "prompt", "output", "cached")),
                          np.zeros(n + 1, np.int64), np.zeros(0, np.int64), 512,
                          *(case[k] for k in ("coef",
                                              "replicas", "max_seqs", "max_batched_tokens",
                                              "chunked_prefill", "kv_capacity_blocks",
                                              "block_tokens")), 60.0, engine.LEAST_OUTSTANDING,
                          np.zeros(0, np.int64))
    assert _close(out[3], [s.finished for s in ref.sequences])
    assert _close(out[6], [s.decode_gpu for s in ref.sequences])
    assert _close(out[7], [s.compute_gpu for s in ref.sequences])
    compute = np.array([s.compute_gpu for s in ref.sequences])
    prefill = np.array([s.prefill_gpu for s in ref.sequences])
    decode = np.array([s.decode_gpu for s in ref.sequences])
    # the premise: a decode step of 256 sequences is compute-bound at the run's first contexts
    # (its GEMMs, compute-bound, hold most of its time) and memory-bound at its last (the KV
    # reads have grown past them); every sequence spends some of its time memory-bound
    def compute_bound(ctx):
        _, shared, shared_c, experts, experts_c, attn, attn_c, _ = engine.kernels(
            d.coefficients, 256.0, 256.0, 256.0 * ctx, 256.0 * ctx, 256.0)
        part = shared * shared_c + experts * experts_c + attn * attn_c
        return part >= shared + experts + attn - part
    assert compute_bound(2001) and not compute_bound(3499)
    assert (compute < prefill + decode).all()


# ---- invariants on the public API ---------------------------------------------------------------

@st.composite
def traces(draw):
    n = draw(st.integers(1, 40))
    arrival = sorted(draw(st.lists(st.floats(0, 20, allow_nan=False), min_size=n, max_size=n)))
    prompt = draw(st.lists(st.integers(1, 3000), min_size=n, max_size=n))
    output = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    return pl.DataFrame({"arrival_s": arrival, "prompt_tokens": prompt, "output_tokens": output})


@settings(max_examples=60, deadline=None)
@given(requests=traces(), replicas=st.integers(1, 3), chunked=st.booleans(),
       kv_fraction=st.sampled_from([0.4, 0.9]), block=st.sampled_from([16, 32]),
       router=st.sampled_from(sorted(engine.ROUTERS)), bin_s=st.sampled_from([0.5, 7.0]))
def test_invariants(requests, replicas, chunked, kv_fraction, block, router, bin_s):
    d = _CATALOG.build(model="llama-3.1-8b", gpu="l40s", replicas=replicas,
                       chunked_prefill=chunked, kv_memory_fraction=kv_fraction,
                       kv_block_tokens=block)
    if (requests["prompt_tokens"] + requests["output_tokens"] - 1).max() > d.kv_capacity_tokens:
        return
    result = replay_fleet(requests, d, bin_s=bin_s, router=router)
    s = result.stages
    assert s.height == requests.height
    # causality, stage definitions, conservation of GPU-seconds
    assert_invariants(result, d)
    # FCFS per replica when nothing was preempted there
    for (_,), part in s.group_by("replica"):
        if part["preemptions"].sum() == 0:
            assert part.sort("arrival_s", maintain_order=True)["admitted_s"].is_sorted()
    # Little's law: time-integral of requests in the system = sum of their times in it
    tl = result.timeline
    in_system = float(((tl["mean_queue"] + tl["mean_running"]) * tl["bin_s"]).sum())
    assert in_system == pytest.approx(float((s["finished_s"] - s["arrival_s"]).sum()),
                                      rel=1e-9, abs=1e-9)
    # ... and each side of it alone where no request went back to the queue: waiting is the
    # queue time (fleet_timeline_minute.queued), running the rest (their sum alone cannot tell
    # the two series apart)
    if s["preemptions"].sum() == 0:
        waited = float((tl["mean_queue"] * tl["bin_s"]).sum())
        assert waited == pytest.approx(float(s["queue_s"].sum()), rel=1e-9, abs=1e-9)
    assert (tl["mean_kv_use"] <= 1 + 1e-12).all()
    assert (tl["busy_share"] <= 1 + 1e-9).all()


@pytest.mark.parametrize("name", sorted(COEFFICIENTS))
@pytest.mark.parametrize(("tokens", "sequences", "pairs", "kv_read"),
                         [(1.0, 1.0, 100.0, 100.0), (64.0, 64.0, 64e3, 64e3),
                          (8192.0, 4.0, 3.3e7, 0.0), (4000.0, 3.0, 8e6, 2000.0),
                          (512.0, 512.0, 5e5, 5e5), (600.0, 3.0, 1.2e5, 200.0)])
def test_kernels_split_the_step(name, tokens, sequences, pairs, kv_read):
    """The GEMM and attention times of a step add up to step_cost's core time, and the
    compute-bound kernels' time is step_cost's compute-bound part: a mixture's shared GEMMs and
    routed experts each by its own bound (Mixtral on 2 x H100 at 512 or 600 tokens: the shared
    GEMMs compute-bound, the experts not)."""
    coef = COEFFICIENTS[name]
    compute_s, memory_s, fixed_s = roofline.step_cost(coef, tokens, sequences, pairs, kv_read,
                                                      tokens)
    duration, shared_s, shared_bound, experts_s, experts_bound, attn_s, attn_bound, fixed = (
        engine.kernels(coef, tokens, sequences, pairs, kv_read, tokens))
    assert duration == max(compute_s, memory_s) + fixed_s and fixed == fixed_s
    assert shared_s > 0 and attn_s >= 0
    assert (experts_s > 0) == (coef[roofline.EXPERT_FLOPS_PER_TOKEN] > 0)
    assert shared_s + experts_s + attn_s == pytest.approx(max(compute_s, memory_s), rel=1e-12)
    compute_part = ((shared_s if shared_bound else 0.0) + (experts_s if experts_bound else 0.0)
                    + (attn_s if attn_bound else 0.0))
    expected = compute_s - memory_s if compute_s >= memory_s else compute_s
    assert compute_part == pytest.approx(expected, rel=1e-9, abs=1e-15)
