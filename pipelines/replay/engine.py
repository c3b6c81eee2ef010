"""The compiled replay loop: iteration-level continuous batching over a fleet of replicas.

Semantics (vLLM-like; one truth for everything downstream, and for the plain-Python reference
simulator in tests/replay/reference.py, which must agree with this loop to 1e-9):

- Time advances by events: the next arrival, or the end of the step some replica is running.
  Arrivals at the same instant as a step end are handled first, so they can join the next step;
  an idle replica that receives a request schedules a step at that instant the same way.
  Several replicas ending a step at the same instant are served lowest index first.
- Router (`ROUTERS`), deciding once per request at its arrival; it never moves afterwards:
    - round robin: the i-th request (in arrival order) goes to replica i mod replicas;
    - least outstanding (default): the replica with the fewest outstanding (waiting + running)
      requests;
    - least KV load: the replica whose outstanding requests' prompts hold or will need the
      fewest KV tokens (the sum of their prompt tokens: what is known without looking into
      the future and without waiting for a step to end).
  Ties go to the lowest replica index.
- Per replica, an FCFS waiting queue and a running set of at most `max_seqs` sequences.
  A step is formed whenever the replica is free and has work:
    1. every running sequence that has finished its prefill decodes one token; it needs a KV
       slot for that token (KV is allocated in blocks of `block_tokens`), and when no block is
       free the most recently admitted running sequence is preempted (recompute: its KV is
       freed, it goes to the *front* of the queue and later re-prefills prompt + generated
       tokens; its preemption count grows);
    2. running sequences still in prefill take the next chunk from the step's token budget
       (`max_batched_tokens` minus the decodes), when chunked prefill is on;
    3. waiting sequences are admitted in FCFS order while a sequence slot is free, the token
       budget is not spent and KV blocks for the whole prompt can be reserved; the first
       sequence that does not fit stops admission (no overtaking). With `reserve_output`
       (TensorRT-LLM's default GUARANTEED_NO_EVICT capacity scheduler) admission reserves the
       blocks of the whole sequence, prompt + output - 1 tokens, so a decode never needs a block
       and nothing is preempted; a burst waits in the queue instead of thrashing. Without chunked prefill a
       prompt is prefilled whole, and only joins a step whose prefills leave room for it
       (or as the step's only prefill).
  The step's duration comes from the roofline (pipelines/roofline/step.py) over all its tokens;
  a decode-only step under CUDA-graph padding (`graph_sizes`, Scheduler.graph_batch_sizes) runs
  its GEMMs and fixed costs over the smallest captured batch >= its sequences, its attention
  over its own (docs/physics.md section 1), and its sequences share the padding's time.
  At its end, a sequence whose prefill completed emits a token (its first token the first time),
  each decode emits a token, and a sequence with all its output tokens finishes and frees its KV.
- Cached tokens (`cached_tokens`, known prefix hits) are in the KV cache on admission and are
  not prefilled, but they are attended to and read. A preempted sequence recomputes everything,
  its cached prefix included.
- Prefix cache (requests with prefix hashes, as in Mooncake traces: one hash per `hash_tokens`
  = 512 prompt tokens, equal hashes = equal token prefixes). Each replica keeps the KV of hash
  blocks in its KV pool, shared by the sequences that use them:
    - on admission, the leading hash blocks resident on the replica are used, not prefilled
      (at most prompt - 1 tokens: a step must compute one), and the sequence reserves blocks
      for the rest only; the admission test counts unused cache entries as free space;
    - when a sequence's prefill completes, its full prompt hash blocks join the cache (a
      block another sequence put there meanwhile is used instead, its own copy freed);
    - when a sequence finishes or is preempted it stops using its entries; entries nobody
      uses stay resident, in LRU order, and are evicted (least recently released first, and
      before any preemption) whenever blocks are needed.
  A preempted sequence matches the cache again when readmitted. The tokens found in the cache
  at a request's first admission (known cached tokens or resident hash blocks, whichever is
  more) are its `cached_hit_tokens`.
- A sequence keeps its first admission time: if it is preempted before its first token, its
  second wait in the queue counts as prefill time (it was admitted once already).

Cost attribution (DESIGN.md's rule, applied to each of the step's kernels, which step.py
times separately: the shared GEMMs, a mixture's routed experts, then the attention): a step's
GPU-seconds (duration x GPUs per replica) are split among the sequences in it by their use of
each kernel's bound resource.
GEMMs, each of the two kernels by its own bound: memory-bound (the weight read) -> equal shares;
compute-bound -> by own FLOPs (the shared GEMMs: own tokens through them plus one row of the LM
head; the routed experts: own tokens).
Attention: memory-bound -> by own KV bytes (context read + tokens written); compute-bound -> by
own attention pairs. The fixed part (per-step and per-sequence overhead, the all-reduce's
latency) is split equally; the all-reduce's traffic, which grows with the step's tokens
(step.allreduce_traffic_s), by own tokens, so that a decode beside a long prefill chunk does not
pay for the chunk's activations. A sequence's GPU-seconds in a step count as prefill when it was prefilling, as
decode otherwise; its `compute_gpu_s` are those of compute-bound kernels. Time a replica runs no step is idle.

Fleet timeline, per replica and time bin: [0] seconds a step was running (busy); time-integrals
of [1] the step's batch (sequences in the step) and [2] the KV tokens held at step start, each
held for the step (a prefix-cache entry that several running sequences use counted once, as it is
stored once: `_tokens_counted_twice`); and the exact time-integrals of [3] the waiting queue and [4] the running set
(admitted, not finished), which change at arrivals, admissions, preemptions and completions —
so that Little's law holds on the timeline: sum of [3] + [4] = sum of (finished - arrival).

How it is fast (the semantics above are those of a step-by-step loop; the speed-ups change no
result beyond floating-point rounding):

- Runs of identical decode steps. When a formed step is decodes only (no prefill chunk, no
  admission, every running sequence in it), the following steps are the same batch with every
  context one token longer, until the first sequence completes, a request arrives at this
  replica, or KV blocks could run short. Such a run of K steps is scheduled as one event.
  Within it, with S_k = S_0 + k * B the context tokens of step k over a batch of B sequences,
  the GEMM time is constant and the attention's compute and memory times are affine in k
  (step.py), so the attention's bound flips at most once and the step-time sum over each piece
  of constant bound is the arithmetic series n * (d_first + d_last) / 2, with d_first and
  d_last from step_cost itself. Attribution is closed-form too: the attention time is
  proportional to S_k + B (memory-bound) or S_k (compute-bound), so sequence i's part of it,
  rate * (ctx_i + k + 1) or rate * (ctx_i + k), is affine in k and sums in O(1) per sequence. An arrival routed to a replica in a run cuts the run after the step that
  is running at that instant (binary search over the closed-form step ends).
  KV safety: a run is at most 1 + block_tokens * floor(room / B) steps long (room: free blocks
  plus those of unused prefix-cache entries, which the run's end evicts in LRU order as the
  steps would have), since no sequence needs more than ceil((K - 1) / block_tokens) new blocks
  in K - 1 further steps.
- The next step end, and the router's least-loaded replica, come from min-trees over the
  replicas (O(log replicas) per change), so fleets of hundreds of replicas stay cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import numpy as np
from numba import njit, objmode, types
from numba.typed import Dict

from pipelines.roofline import step as roofline

NO_REPLICA = -1
_CACHE_KEY = types.UniTuple(types.int64, 2)   # (replica, prefix hash)
ROUND_ROBIN, LEAST_OUTSTANDING, LEAST_KV = 0, 1, 2
ROUTERS = {"round_robin": ROUND_ROBIN, "least_outstanding": LEAST_OUTSTANDING,
           "least_kv": LEAST_KV}
TIMELINE_SERIES = 5  # busy, batch, kv tokens, waiting, running (time-integrals)


_listeners: list[Callable[[int, int, float], None]] = []


@contextmanager
def progress_reporting(listener: Callable[[int, int, float], None]):
    """Call listener(requests routed, requests, simulated time) now and then from inside the
    compiled loop (every `progress_every` arrivals), while the block runs."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def _report(routed: int, total: int, now: float) -> None:
    for listener in _listeners:
        listener(routed, total, now)


@njit(cache=True)
def _blocks(tokens, block):
    return (tokens + block - 1) // block


@njit(cache=True)
def _grow(timeline, t1, bin_s):
    """The timeline array, grown so that time t1 has a bin."""
    last_bin = int(t1 // bin_s)
    if last_bin < timeline.shape[2]:
        return timeline
    grown = np.zeros((timeline.shape[0], timeline.shape[1], 2 * last_bin + 2))
    grown[:, :, : timeline.shape[2]] = timeline
    return grown


@njit(cache=True)
def _accumulate(timeline, r, t0, t1, bin_s, batch, kv_tokens):
    """Spread one step [t0, t1) of replica r over the time bins it touches."""
    b = int(t0 // bin_s)
    while True:
        lo = max(t0, b * bin_s)
        hi = min(t1, (b + 1) * bin_s)
        if hi > lo:
            dt = hi - lo
            timeline[0, r, b] += dt
            timeline[1, r, b] += dt * batch
            timeline[2, r, b] += dt * kv_tokens
        if (b + 1) * bin_s >= t1:
            return
        b += 1


@njit(cache=True)
def _hold(timeline, r, t0, t1, bin_s, waiting, running):
    """Add the waiting and running counts, constant over [t0, t1), to replica r's bins."""
    if t1 <= t0 or (waiting == 0 and running == 0):
        return
    b = int(t0 // bin_s)
    while True:
        lo = max(t0, b * bin_s)
        hi = min(t1, (b + 1) * bin_s)
        if hi > lo:
            timeline[3, r, b] += (hi - lo) * waiting
            timeline[4, r, b] += (hi - lo) * running
        if (b + 1) * bin_s >= t1:
            return
        b += 1


# ---- a step's two kernels --------------------------------------------------------------------

@njit(cache=True)
def kernels(coef, tokens, sequences, pairs, kv_read, kv_written):
    """(duration, shared_s, shared GEMMs compute-bound?, experts_s, routed experts
    compute-bound?, attn_s, attention compute-bound?, fixed_s) of a step of `tokens` tokens from
    `sequences` sequences, its kernels as step_cost times them: the shared GEMMs and a mixture's
    routed experts (step.gemm_kernels; experts_s is 0 for a dense model), each bound by its own
    resource (a mixture's shared GEMMs turn compute-bound at ~k / E of the batch its experts
    do), and the attention (step.attention_kernel), the rest of the core time, compute-bound
    where its compute time is not below its KV read and not 0 (a step without attention work
    has none to charge by pairs)."""
    compute_s, memory_s, fixed_s = roofline.step_cost(coef, tokens, sequences, pairs, kv_read,
                                                      kv_written)
    core = max(compute_s, memory_s)
    shared_c, shared_m, expert_c, expert_m = roofline.gemm_kernels(coef, tokens, sequences)
    shared_s = roofline.gemm_seconds(shared_c, shared_m)
    experts_s = roofline.gemm_seconds(expert_c, expert_m)
    attn_c, attn_m = roofline.attention_kernel(coef, pairs, kv_read, kv_written)
    return (core + fixed_s, shared_s, shared_c >= shared_m, experts_s, expert_c >= expert_m,
            core - (shared_s + experts_s), attn_c >= attn_m and attn_c > 0.0, fixed_s)


# ---- runs of identical decode steps ----------------------------------------------------------
# A run's steps are decode-only, so under CUDA-graph padding each runs as the graph of `padded`
# sequences (step.graph_batch): the GEMMs, all-reduce and per-sequence work over the padded
# batch, the attention over the B real sequences' contexts.

@njit(cache=True)
def _decode_step(coef, batch, padded, s0, k):
    """(duration, attention compute-bound?) of decode step k of a run: batch B (run as
    `padded`), contexts S_0 + k B."""
    ctx = s0 + k * batch
    duration, _, _, _, _, _, attn_bound, _ = kernels(coef, padded, padded, ctx, ctx, batch)
    return duration, attn_bound


@njit(cache=True)
def _decode_duration(coef, batch, padded, s0, k):
    """Duration of decode step k of a run (one step_cost call: the hot path of the sums)."""
    ctx = s0 + k * batch
    compute_s, memory_s, fixed_s = roofline.step_cost(coef, padded, padded, ctx, ctx, batch)
    return max(compute_s, memory_s) + fixed_s


@njit(cache=True)
def _flip(coef, batch, padded, s0, steps):
    """First step index of a run whose attention bound differs from step 0's (steps if none):
    attention compute minus memory time is affine in k, so it changes sign at most once (the
    GEMMs, the same B tokens every step, do not change)."""
    _, bound0 = _decode_step(coef, batch, padded, s0, 0.0)
    _, bound_last = _decode_step(coef, batch, padded, s0, float(steps - 1))
    if bound_last == bound0:
        return steps
    lo, hi = 1, steps - 1   # the flip is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if _decode_step(coef, batch, padded, s0, float(mid))[1] == bound0:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _series(coef, batch, padded, s0, k0, k1):
    """Sums over steps k0..k1 (one attention bound) of the duration d_k and of k * d_k (d is
    affine there)."""
    n = k1 - k0 + 1
    d0 = _decode_duration(coef, batch, padded, s0, float(k0))
    d1 = _decode_duration(coef, batch, padded, s0, float(k1))
    total = n * (d0 + d1) / 2.0
    slope = (d1 - d0) / (n - 1) if n > 1 else 0.0
    j_sum = n * (n - 1) / 2.0
    j2_sum = (n - 1) * n * (2 * n - 1) / 6.0
    k_weighted = k0 * total + d0 * j_sum + slope * j2_sum
    return total, k_weighted


@njit(cache=True)
def _run_sums(coef, batch, padded, s0, flip, k0, k1):
    """(sum d_k, sum k d_k) over steps k0..k1 of a run whose attention bound flips at `flip`."""
    total = 0.0
    weighted = 0.0
    if k0 < flip:
        a, b = _series(coef, batch, padded, s0, k0, min(k1, flip - 1))
        total += a
        weighted += b
    if k1 >= flip:
        a, b = _series(coef, batch, padded, s0, max(k0, flip), k1)
        total += a
        weighted += b
    return total, weighted


@njit(cache=True)
def _first_end_at_or_after(coef, batch, padded, s0, flip, t0, steps, t):
    """Index of the first step of a run (started at t0) that ends at or after time t."""
    lo, hi = 0, steps - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if t0 + _run_sums(coef, batch, padded, s0, flip, 0, mid)[0] >= t:
            hi = mid
        else:
            lo = mid + 1
    return lo


# ---- min-trees over replicas: the next step end, the least-loaded replica ---------------------

@njit(cache=True)
def _tree_set(tree, leaves, key, r):
    """Replica r's key changed: refresh the path to the root of its min-tree (ties: lowest
    index), so that tree[1] is the replica with the smallest key."""
    node = (leaves + r) // 2
    while node >= 1:
        a, b = tree[2 * node], tree[2 * node + 1]
        if b >= 0 and (a < 0 or key[b] < key[a]):
            tree[node] = b
        else:
            tree[node] = a
        node //= 2


# ---- the prefix cache of each replica --------------------------------------------------------
# Entries are hash blocks (hash_tokens tokens = hash_tokens / block_tokens KV blocks each),
# held in slots: REF counts the running sequences using an entry; entries nobody uses sit in
# the replica's LRU list (PREV / NEXT links, HEAD / TAIL ends), oldest release first.

HASH, REF, PREV, NEXT = 0, 1, 2, 3     # rows of the slot table
HEAD, TAIL, UNUSED = 0, 1, 2          # rows of the per-replica LRU table


@njit(cache=True)
def _lru_remove(slot, lru, r, s):
    p, q = slot[PREV, s], slot[NEXT, s]
    if p >= 0:
        slot[NEXT, p] = q
    else:
        lru[HEAD, r] = q
    if q >= 0:
        slot[PREV, q] = p
    else:
        lru[TAIL, r] = p
    slot[PREV, s] = -1
    slot[NEXT, s] = -1
    lru[UNUSED, r] -= 1


@njit(cache=True)
def _pin(slot, lru, r, s):
    """One more running sequence uses entry s."""
    if slot[REF, s] == 0:
        _lru_remove(slot, lru, r, s)
    slot[REF, s] += 1


@njit(cache=True)
def _release(slot, lru, index, hashes, first, count, r):
    """A sequence stops using its `count` leading entries; those nobody uses join the LRU
    list, the deepest first (so a shared head of a prefix is dropped last)."""
    for x in range(count - 1, -1, -1):
        s = index[(r, hashes[first + x])]
        slot[REF, s] -= 1
        if slot[REF, s] == 0:
            slot[PREV, s] = lru[TAIL, r]
            slot[NEXT, s] = -1
            if lru[TAIL, r] >= 0:
                slot[NEXT, lru[TAIL, r]] = s
            else:
                lru[HEAD, r] = s
            lru[TAIL, r] = s
            lru[UNUSED, r] += 1


@njit(cache=True)
def _drop_oldest(slot, lru, index, free_slots, r):
    """Evict replica r's least recently used unused entry; its slot goes back to the pool."""
    s = lru[HEAD, r]
    _lru_remove(slot, lru, r, s)
    del index[(r, slot[HASH, s])]
    free_slots[free_slots[-1]] = s
    free_slots[-1] += 1


@njit(cache=True)
def _tokens_counted_twice(used_blocks, own_blocks, unused_entries, held_entries, hash_blocks,
                          hash_tokens):
    """Tokens that the running sequences' contexts count more than once on one replica: each
    context includes its leading prefix-cache entries (`held_entries` in all), but an entry that
    several of them use is stored once. The replica's resident entries are its used blocks that
    are no sequence's own (`own_blocks`), the entries in use those less the unused ones. Without
    it the KV use of a Mooncake replay with shared prefixes read above 100% of the capacity."""
    if hash_blocks == 0:
        return 0.0
    in_use = (used_blocks - own_blocks) // hash_blocks - unused_entries
    return float((held_entries - in_use) * hash_tokens)


@njit(cache=True)
def simulate(
    arrival, prompt, output, cached, hash_offsets, hashes, hash_tokens, coef, replicas,
    max_seqs, max_batched_tokens, chunked_prefill, kv_capacity_blocks, block_tokens, bin_s,
    router, graph_sizes, reserve_output=False, progress_every=0,
):
    """Replay requests (sorted by arrival) on `replicas` identical replicas.

    `graph_sizes`: the CUDA-graph batch sizes a decode-only step is padded to (ascending int64;
    empty for none): Scheduler.graph_batch_sizes.

    Request i's prefix hashes are hashes[hash_offsets[i]:hash_offsets[i + 1]], one per
    hash_tokens tokens of its prompt (hash_tokens a multiple of block_tokens). With
    `reserve_output`, admission reserves KV blocks for the whole sequence (module docstring).

    Returns per-request arrays (replica, admitted, first token, finished, preemptions,
    prefill GPU-s, decode GPU-s, compute-bound GPU-s, cached tokens at first admission) and
    the timeline array
    [TIMELINE_SERIES, replicas, bins] (see the module docstring). GPU-seconds are per GPU.
    """
    n = arrival.shape[0]
    replica = np.full(n, NO_REPLICA, np.int32)
    admitted = np.full(n, np.nan)
    first = np.full(n, np.nan)
    finished = np.full(n, np.nan)
    preemptions = np.zeros(n, np.int32)
    prefill_gpu = np.zeros(n)
    decode_gpu = np.zeros(n)
    compute_gpu = np.zeros(n)

    # per-request state in 32 bits (a week of fleet traffic is tens of millions of requests)
    ctx = cached.astype(np.int32)      # tokens whose KV is in the cache
    target = prompt.astype(np.int32)   # tokens that must be in the cache before the next token
    generated = np.zeros(n, np.int32)
    reserved = np.zeros(n, np.int32)   # KV blocks held
    chunk = np.zeros(n, np.int32)      # tokens scheduled in the replica's current step
    queue_next = np.full(n, -1, np.int32)
    held = np.zeros(n, np.int32)       # leading prefix-cache entries the sequence uses
    hit = np.zeros(n, np.int32)        # tokens in the cache at its first admission

    hash_blocks = hash_tokens // block_tokens if hash_tokens > 0 else 0
    slots = replicas * (kv_capacity_blocks // max(hash_blocks, 1)) + 1 if hashes.shape[0] > 0 else 1
    slot = np.full((4, slots), -1, np.int64)      # HASH, REF, PREV, NEXT per entry
    slot[REF] = 0
    free_slots = np.arange(slots + 1)             # a stack of free slots; [-1]: its size
    free_slots[-1] = slots
    lru = np.full((3, replicas), -1, np.int64)    # HEAD, TAIL, UNUSED per replica
    lru[UNUSED] = 0
    index = Dict.empty(key_type=_CACHE_KEY, value_type=types.int64)   # (replica, hash) -> slot

    head = np.full(replicas, -1, np.int64)
    tail = np.full(replicas, -1, np.int64)
    waiting = np.zeros(replicas, np.int64)
    # the router's measure per replica: outstanding requests, or their prompt tokens
    load = np.zeros(replicas)
    running = np.full((replicas, max_seqs), -1, np.int64)
    n_run = np.zeros(replicas, np.int64)
    used_blocks = np.zeros(replicas, np.int64)
    busy_until = np.full(replicas, np.inf)
    held_since = np.zeros(replicas)              # last change of waiting / running counts
    # the replica's current run of decode steps (run_steps 0: a mixed step)
    run_steps = np.zeros(replicas, np.int64)
    run_t0 = np.zeros(replicas)
    run_s0 = np.zeros(replicas)
    run_twice = np.zeros(replicas)               # _tokens_counted_twice over the run
    run_flip = np.zeros(replicas, np.int64)

    leaves = 1
    while leaves < replicas:
        leaves *= 2
    tree = np.full(2 * leaves, -1, np.int64)     # min-tree of step ends
    tree[leaves: leaves + replicas] = np.arange(replicas)
    by_load = tree.copy()                        # min-tree of router loads
    for k in range(replicas):
        _tree_set(tree, leaves, busy_until, k)
        _tree_set(by_load, leaves, load, k)

    bins = int(arrival[n - 1] // bin_s) + 2 if n > 0 else 1
    timeline = np.zeros((TIMELINE_SERIES, replicas, bins))
    capacity_tokens = float(kv_capacity_blocks * block_tokens)

    a = 0
    while True:
        # -- next event: an arrival, or the earliest step end -------------------------------
        r = tree[1]
        t_end = busy_until[r]
        t_arr = arrival[a] if a < n else np.inf
        if a >= n and t_end == np.inf:
            break

        if t_arr <= t_end:
            i = a
            a += 1
            if progress_every > 0 and a % progress_every == 0:
                with objmode():
                    _report(a, n, t_arr)
            if router == ROUND_ROBIN:
                best = i % replicas
            else:
                best = by_load[1]
                load[best] += 1.0 if router == LEAST_OUTSTANDING else prompt[i]
                _tree_set(by_load, leaves, load, best)
            replica[i] = best
            timeline = _grow(timeline, t_arr, bin_s)
            _hold(timeline, best, held_since[best], t_arr, bin_s, waiting[best], n_run[best])
            held_since[best] = t_arr
            if tail[best] < 0:
                head[best] = i
            else:
                queue_next[tail[best]] = i
            tail[best] = i
            waiting[best] += 1
            if busy_until[best] == np.inf:
                # An idle replica starts its next step "now", but through the event queue, so
                # every request arriving at this same instant joins that first step.
                busy_until[best] = t_arr
                _tree_set(tree, leaves, busy_until, best)
            elif run_steps[best] > 1 and busy_until[best] > t_arr:
                # cut the run after the step running at t_arr: the request joins the next one
                batch = float(n_run[best])
                padded = roofline.graph_batch(graph_sizes, batch)
                last = _first_end_at_or_after(coef, batch, padded, run_s0[best], run_flip[best],
                                              run_t0[best], run_steps[best], t_arr)
                if last + 1 < run_steps[best]:
                    run_steps[best] = last + 1
                    run_flip[best] = min(run_flip[best], last + 1)
                    busy_until[best] = run_t0[best] + _run_sums(
                        coef, batch, padded, run_s0[best], run_flip[best], 0, last)[0]
                    _tree_set(tree, leaves, busy_until, best)
            continue

        t = t_end
        timeline = _grow(timeline, t, bin_s)
        if run_steps[r] > 0:
            # -- a run of decode steps ends: attribute it, emit its tokens -------------------
            steps = run_steps[r]
            batch = float(n_run[r])
            padded = roofline.graph_batch(graph_sizes, batch)
            s0 = run_s0[r]
            kv0 = s0 - run_twice[r]   # the KV tokens held at the run's start
            flip = run_flip[r]
            # Per step: the GEMM time and the fixed time, the same every step, split equally
            # (every sequence decodes one token, so the all-reduce's traffic too);
            # the attention time a_k splits by own KV bytes (memory-bound: a_k is proportional
            # to S_k + B, so sequence i's part is a_k / (S_k + B) * (ctx_i + k + 1)) or by own
            # pairs (compute-bound: a_k / S_k * (ctx_i + k)), affine in k within each piece. Under
            # CUDA-graph padding the real sequences share the padding's GEMM and fixed time too.
            _, shared_s, shared_bound, experts_s, experts_bound, _, _, fixed = kernels(
                coef, padded, padded, s0, s0, batch)
            per_seq = steps * (shared_s + experts_s + fixed) / batch   # same for every sequence
            per_seq_compute = steps * ((shared_s if shared_bound else 0.0)
                                       + (experts_s if experts_bound else 0.0)) / batch
            m_rate, m_n, m_k = 0.0, 0.0, 0.0     # memory-bound attention: rate, steps, sum of k
            c_rate, c_n, c_k = 0.0, 0.0, 0.0     # compute-bound attention
            for k0, k1 in ((0, flip - 1), (flip, steps - 1)):
                if k1 < k0:
                    continue
                ctx0 = s0 + k0 * batch
                _, _, _, _, _, attn0, attn_bound, _ = kernels(coef, padded, padded, ctx0, ctx0,
                                                              batch)
                n1 = float(k1 - k0 + 1)
                if attn_bound:
                    c_rate, c_n, c_k = attn0 / ctx0, n1, (k0 + k1) * n1 / 2.0
                else:
                    m_rate, m_n, m_k = attn0 / (ctx0 + batch), n1, (k0 + k1) * n1 / 2.0
            # timeline, bin by bin (a step straddling a bin edge is split by time)
            k = 0
            start = run_t0[r]
            while k < steps:
                b = int(start // bin_s)
                edge = (b + 1) * bin_s
                if t <= edge:
                    last = steps - 1
                else:
                    last = _first_end_at_or_after(coef, batch, padded, s0, flip, run_t0[r], steps,
                                                  edge)
                    if run_t0[r] + _run_sums(coef, batch, padded, s0, flip, 0, last)[0] > edge:
                        last -= 1   # step `last` straddles the edge: split it below
                if last >= k:
                    total, weighted = _run_sums(coef, batch, padded, s0, flip, k, last)
                    timeline[0, r, b] += total
                    timeline[1, r, b] += total * batch
                    timeline[2, r, b] += total * kv0 + weighted * batch
                    start += total
                    k = last + 1
                if k < steps and t > edge:
                    d = _decode_duration(coef, batch, padded, s0, float(k))
                    _accumulate(timeline, r, start, start + d, bin_s, batch, kv0 + k * batch)
                    start += d
                    k += 1
            _hold(timeline, r, held_since[r], t, bin_s, waiting[r], n_run[r])
            held_since[r] = t
            for j in range(n_run[r]):
                i = running[r, j]
                c0 = float(ctx[i])
                attn_memory = m_rate * (m_n * (c0 + 1.0) + m_k)
                attn_compute = c_rate * (c_n * c0 + c_k)
                decode_gpu[i] += per_seq + attn_memory + attn_compute
                compute_gpu[i] += per_seq_compute + attn_compute
                ctx[i] += steps
                generated[i] += steps
                chunk[i] = 0
                grown = _blocks(ctx[i], block_tokens) - held[i] * hash_blocks
                if grown > reserved[i]:
                    used_blocks[r] += grown - reserved[i]
                    reserved[i] = grown
            # the blocks the run's decodes took came from unused cache entries first
            while used_blocks[r] > kv_capacity_blocks:
                _drop_oldest(slot, lru, index, free_slots, r)
                used_blocks[r] -= hash_blocks
        else:
            # -- a mixed step ends: emit tokens ------------------------------------------------
            _hold(timeline, r, held_since[r], t, bin_s, waiting[r], n_run[r])
            held_since[r] = t
            for j in range(n_run[r]):
                i = running[r, j]
                if chunk[i] > 0:
                    if ctx[i] >= target[i]:
                        ctx[i] += 1
                        generated[i] += 1
                    else:
                        ctx[i] += chunk[i]
                        if ctx[i] >= target[i]:
                            generated[i] += 1
                            if np.isnan(first[i]):
                                first[i] = t
                            # its full prompt hash blocks join the cache (or, when another
                            # sequence put them there meanwhile, it uses those and frees its own)
                            full = min(hash_offsets[i + 1] - hash_offsets[i], prompt[i] // max(hash_tokens, 1))
                            for x in range(held[i], full):
                                key = (r, hashes[hash_offsets[i] + x])
                                if key in index:
                                    _pin(slot, lru, r, index[key])
                                    used_blocks[r] -= hash_blocks
                                else:
                                    free_slots[-1] -= 1
                                    s = free_slots[free_slots[-1]]
                                    slot[HASH, s] = key[1]
                                    slot[REF, s] = 1
                                    index[key] = s
                                reserved[i] -= hash_blocks
                            held[i] = max(held[i], full)
                    chunk[i] = 0
        # -- sequences with all their tokens finish and free their KV ----------------------
        kept = 0
        for j in range(n_run[r]):
            i = running[r, j]
            if generated[i] >= output[i]:
                finished[i] = t
                used_blocks[r] -= reserved[i]
                reserved[i] = 0
                _release(slot, lru, index, hashes, hash_offsets[i], held[i], r)
                held[i] = 0
                load[r] -= 1.0 if router == LEAST_OUTSTANDING else prompt[i]
            else:
                running[r, kept] = i
                kept += 1
        n_run[r] = kept
        busy_until[r] = np.inf
        _tree_set(tree, leaves, busy_until, r)
        if router != ROUND_ROBIN:
            _tree_set(by_load, leaves, load, r)
        run_steps[r] = 0

        # -- form the next step on replica r at time t --------------------------------------
        free = kv_capacity_blocks - used_blocks[r]
        budget = max_batched_tokens
        # 1. decodes, preempting the newest sequence when the KV cache is full
        j = 0
        while j < n_run[r]:
            i = running[r, j]
            if ctx[i] < target[i]:
                j += 1
                continue
            need = _blocks(ctx[i] + 1, block_tokens) - reserved[i] - held[i] * hash_blocks
            while need > free:
                if lru[UNUSED, r] > 0:   # drop the least recently used cache entry first
                    _drop_oldest(slot, lru, index, free_slots, r)
                    used_blocks[r] -= hash_blocks
                    free += hash_blocks
                    continue
                v = running[r, n_run[r] - 1]
                n_run[r] -= 1
                free += reserved[v]
                used_blocks[r] -= reserved[v]
                reserved[v] = 0
                _release(slot, lru, index, hashes, hash_offsets[v], held[v], r)
                held[v] = 0
                target[v] = prompt[v] + generated[v]
                ctx[v] = 0
                chunk[v] = 0
                preemptions[v] += 1
                queue_next[v] = head[r]
                head[r] = v
                if tail[r] < 0:
                    tail[r] = v
                waiting[r] += 1
                if v == i:
                    break
            if j >= n_run[r]:
                break
            if need > 0:
                reserved[i] += need
                used_blocks[r] += need
                free -= need
            chunk[i] = 1
            budget -= 1
            j += 1
        # 2. prefills already running (chunked prefill only: whole prompts finish in one step)
        prefill_in_step = 0
        for j in range(n_run[r]):
            i = running[r, j]
            if ctx[i] < target[i] and budget > 0:
                chunk[i] = min(target[i] - ctx[i], budget)
                budget -= chunk[i]
                prefill_in_step += chunk[i]
        # 3. admissions, FCFS, no overtaking
        while waiting[r] > 0 and n_run[r] < max_seqs and budget > 0:
            h = head[r]
            # leading hash blocks resident on this replica (at least one token is computed)
            matched = 0
            matched_unused = 0
            limit = min(hash_offsets[h + 1] - hash_offsets[h], (target[h] - 1) // max(hash_tokens, 1))
            while matched < limit:
                key = (r, hashes[hash_offsets[h] + matched])
                if key not in index:
                    break
                if slot[REF, index[key]] == 0:
                    matched_unused += 1
                matched += 1
            span = prompt[h] + output[h] - 1 if reserve_output else target[h]
            need = _blocks(span, block_tokens) - matched * hash_blocks
            if need > free + (lru[UNUSED, r] - matched_unused) * hash_blocks:
                break
            start_ctx = max(ctx[h], matched * hash_tokens)
            remaining = target[h] - start_ctx
            if not chunked_prefill and remaining > budget and prefill_in_step > 0:
                break
            for x in range(matched):
                _pin(slot, lru, r, index[(r, hashes[hash_offsets[h] + x])])
            held[h] = matched
            while need > free:
                _drop_oldest(slot, lru, index, free_slots, r)
                used_blocks[r] -= hash_blocks
                free += hash_blocks
            ctx[h] = start_ctx
            head[r] = queue_next[h]
            queue_next[h] = -1
            if head[r] < 0:
                tail[r] = -1
            waiting[r] -= 1
            if np.isnan(admitted[h]):
                admitted[h] = t
                hit[h] = start_ctx
            reserved[h] = need
            used_blocks[r] += need
            free -= need
            running[r, n_run[r]] = h
            n_run[r] += 1
            chunk[h] = min(remaining, budget) if chunked_prefill else remaining
            budget -= chunk[h]
            prefill_in_step += chunk[h]

        # -- the step: a run of decodes, or one mixed step ----------------------------------
        tokens = 0.0
        pairs = 0.0
        kv_read = 0.0
        kv_written = 0.0
        kv_held = 0.0
        own_blocks = 0
        held_entries = 0
        in_step = 0
        for j in range(n_run[r]):
            i = running[r, j]
            kv_held += ctx[i]
            own_blocks += reserved[i]
            held_entries += held[i]
            c = chunk[i]
            if c == 0:
                continue
            in_step += 1
            tokens += c
            kv_read += ctx[i]
            kv_written += c
            if ctx[i] >= target[i]:
                pairs += ctx[i]
            else:
                pairs += roofline.chunk_attn_pairs(float(ctx[i]), float(c))
        if in_step == 0:
            continue
        kv_held -= _tokens_counted_twice(used_blocks[r], own_blocks, lru[UNUSED, r], held_entries,
                                         hash_blocks, hash_tokens)
        if prefill_in_step == 0 and in_step == n_run[r]:
            remaining_steps = output[running[r, 0]] - generated[running[r, 0]]
            for j in range(1, n_run[r]):
                i = running[r, j]
                remaining_steps = min(remaining_steps, output[i] - generated[i])
            steps = remaining_steps
            if not reserve_output:   # reserved sequences never take another block
                room = free + lru[UNUSED, r] * hash_blocks   # unused cache entries can be dropped
                steps = min(steps, 1 + block_tokens * (room // n_run[r]))
            run_steps[r] = steps
            run_t0[r] = t
            run_s0[r] = kv_read
            run_twice[r] = kv_read - kv_held
            padded = roofline.graph_batch(graph_sizes, tokens)
            run_flip[r] = _flip(coef, tokens, padded, kv_read, steps)
            busy_until[r] = t + _run_sums(coef, tokens, padded, kv_read, run_flip[r], 0,
                                          steps - 1)[0]
            _tree_set(tree, leaves, busy_until, r)
            continue

        (duration, shared_s, shared_bound, experts_s, experts_bound, attn_s, attn_bound,
         fixed_s) = kernels(coef, tokens, float(in_step), pairs, kv_read, kv_written)
        # compute-bound GEMMs split by own FLOPs: the shared GEMMs by each sequence's tokens
        # through them plus its one row of the LM head, the routed experts by its tokens
        step_flops = roofline.shared_gemm_flops(coef, tokens, float(in_step))
        # the all-reduce's traffic by own tokens, the rest of the fixed time equally
        traffic_s = roofline.allreduce_traffic_s(coef, tokens)
        fixed_each = (fixed_s - traffic_s) / in_step
        for j in range(n_run[r]):
            i = running[r, j]
            c = chunk[i]
            if c == 0:
                continue
            decoding = ctx[i] >= target[i]
            own_flops = roofline.shared_gemm_flops(coef, float(c), 1.0)
            shared = shared_s * (own_flops / step_flops if shared_bound else 1.0 / in_step)
            experts = experts_s * (c / tokens if experts_bound else 1.0 / in_step)
            if attn_bound:
                own_pairs = ctx[i] if decoding else roofline.chunk_attn_pairs(float(ctx[i]), float(c))
                attn = attn_s * own_pairs / pairs
            else:
                attn = attn_s * (ctx[i] + c) / (kv_read + kv_written)
            gpu_s = shared + experts + attn + fixed_each + traffic_s * c / tokens
            if decoding:
                decode_gpu[i] += gpu_s
            else:
                prefill_gpu[i] += gpu_s
            compute_gpu[i] += ((shared if shared_bound else 0.0) + (experts if experts_bound else 0.0)
                               + (attn if attn_bound else 0.0))

        t1 = t + duration
        timeline = _grow(timeline, t1, bin_s)
        _accumulate(timeline, r, t, t1, bin_s, float(in_step), kv_held)
        busy_until[r] = t1
        _tree_set(tree, leaves, busy_until, r)

    return (replica, admitted, first, finished, preemptions, prefill_gpu, decode_gpu,
            compute_gpu, hit, timeline / np.array([1.0, 1.0, capacity_tokens, 1.0, 1.0]).reshape(
                TIMELINE_SERIES, 1, 1))
