"""The compiled replay loop: iteration-level continuous batching over a fleet of replicas.

Semantics (vLLM-like; one truth for everything downstream):

- Time advances by events: the next arrival, or the end of the step some replica is running.
  Arrivals at the same instant as a step end are handled first, so they can join the next step;
  an idle replica that receives a request schedules a step at that instant the same way.
- Router: each arrival goes to the replica with the fewest outstanding (waiting + running)
  requests, lowest index on ties. It never moves afterwards.
- Per replica, an FCFS waiting queue and a running set of at most `max_seqs` sequences.
  A step is formed whenever the replica is free and has work:
    1. every running sequence that has finished its prefill decodes one token; it needs a KV
       slot for that token, and when no KV block is free the most recently admitted running
       sequence is preempted (recompute: its KV is freed, it goes to the *front* of the queue
       and later re-prefills prompt + generated tokens; its preemption count grows);
    2. running sequences still in prefill take the next chunk from the step's token budget
       (`max_batched_tokens` minus the decodes), when chunked prefill is on;
    3. waiting sequences are admitted in FCFS order while a sequence slot is free, the token
       budget is not spent and KV blocks for the whole prompt can be reserved; the first
       sequence that does not fit stops admission (no overtaking). Without chunked prefill a
       prompt is prefilled whole, and only joins a step whose prefills leave room for it
       (or as the step's only prefill).
  The step's duration comes from the roofline (pipelines/roofline/step.py) over all its tokens.
  At its end, a sequence whose prefill completed emits a token (its first token the first time),
  each decode emits a token, and a sequence with all its output tokens finishes and frees its KV.
- Cached tokens (`cached_tokens`, known prefix hits) are in the KV cache on admission and are
  not prefilled, but they are attended to and read. A preempted sequence recomputes everything,
  its cached prefix included.
- A sequence keeps its first admission time: if it is preempted before its first token, its
  second wait in the queue counts as prefill time (it was admitted once already).

Cost attribution (DESIGN.md): a step's GPU-seconds (duration x GPUs per replica) are split
among the sequences in it. The roofline part max(compute, memory) goes by use of the bound
resource: memory-bound -> an equal share of the weight read plus each sequence's own KV bytes
(read and written); compute-bound -> each sequence's own FLOPs. The fixed part (per-step
overhead and all-reduce) is split equally. A sequence's GPU-seconds in a step count as prefill
when it was prefilling, as decode otherwise. Time a replica runs no step is idle.

Fleet timeline: per replica and time bin, the seconds a step was running (busy), and the
time-integrals of the batch size, the KV-cache fill and the waiting-queue length, each taken at
step start and held for the step (the engine only looks at the state at step boundaries).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipelines.roofline import step as roofline

NO_REPLICA = -1


@njit(cache=True)
def _blocks(tokens, block):
    return (tokens + block - 1) // block


@njit(cache=True)
def _accumulate(timeline, r, t0, t1, bin_s, batch, kv_fill, queue):
    """Spread [t0, t1) of one replica's step over the time bins it touches."""
    b = int(t0 // bin_s)
    while True:
        lo = max(t0, b * bin_s)
        hi = min(t1, (b + 1) * bin_s)
        if hi > lo:
            dt = hi - lo
            timeline[0, r, b] += dt
            timeline[1, r, b] += dt * batch
            timeline[2, r, b] += dt * kv_fill
            timeline[3, r, b] += dt * queue
        if (b + 1) * bin_s >= t1:
            return
        b += 1


@njit(cache=True)
def simulate(
    arrival, prompt, output, cached, coef, replicas, max_seqs, max_batched_tokens,
    chunked_prefill, kv_capacity_blocks, block_tokens, bin_s,
):
    """Replay requests (sorted by arrival) on `replicas` identical replicas.

    Returns per-request arrays (replica, admitted, first token, finished, preemptions,
    prefill GPU-s, decode GPU-s, compute-bound GPU-s) and the timeline array
    [4, replicas, bins] of busy seconds and batch / KV-fill / queue time-integrals.
    """
    n = arrival.shape[0]
    tp_gpus = 1.0  # coef is per GPU; the caller scales GPU-seconds by GPUs per replica
    replica = np.full(n, NO_REPLICA, np.int64)
    admitted = np.full(n, np.nan)
    first = np.full(n, np.nan)
    finished = np.full(n, np.nan)
    preemptions = np.zeros(n, np.int64)
    prefill_gpu = np.zeros(n)
    decode_gpu = np.zeros(n)
    compute_gpu = np.zeros(n)

    ctx = cached.copy()          # tokens whose KV is in the cache
    target = prompt.copy()       # tokens that must be in the cache before the next token
    generated = np.zeros(n, np.int64)
    reserved = np.zeros(n, np.int64)   # KV blocks held
    chunk = np.zeros(n, np.int64)      # tokens scheduled in the replica's current step
    queue_next = np.full(n, -1, np.int64)

    head = np.full(replicas, -1, np.int64)
    tail = np.full(replicas, -1, np.int64)
    waiting = np.zeros(replicas, np.int64)
    running = np.full((replicas, max_seqs), -1, np.int64)
    n_run = np.zeros(replicas, np.int64)
    used_blocks = np.zeros(replicas, np.int64)
    busy_until = np.full(replicas, np.inf)

    bins = int(arrival[n - 1] // bin_s) + 2 if n > 0 else 1
    timeline = np.zeros((4, replicas, bins))

    a = 0
    while True:
        # -- next event: an arrival, or the earliest step end -------------------------------
        r = -1
        t_end = np.inf
        for k in range(replicas):
            if busy_until[k] < t_end:
                t_end = busy_until[k]
                r = k
        t_arr = arrival[a] if a < n else np.inf
        if a >= n and r < 0:
            break

        if t_arr <= t_end:
            i = a
            a += 1
            best = 0
            for k in range(1, replicas):
                if waiting[k] + n_run[k] < waiting[best] + n_run[best]:
                    best = k
            replica[i] = best
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
            continue
        else:
            # -- the step on replica r ends: emit tokens, finish sequences ------------------
            t = t_end
            kept = 0
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
                    chunk[i] = 0
                if generated[i] >= output[i]:
                    finished[i] = t
                    used_blocks[r] -= reserved[i]
                    reserved[i] = 0
                else:
                    running[r, kept] = i
                    kept += 1
            n_run[r] = kept
            busy_until[r] = np.inf

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
            need = _blocks(ctx[i] + 1, block_tokens) - reserved[i]
            while need > free:
                v = running[r, n_run[r] - 1]
                n_run[r] -= 1
                free += reserved[v]
                used_blocks[r] -= reserved[v]
                reserved[v] = 0
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
            need = _blocks(target[h], block_tokens)
            if need > free:
                break
            remaining = target[h] - ctx[h]
            if not chunked_prefill and remaining > budget and prefill_in_step > 0:
                break
            head[r] = queue_next[h]
            queue_next[h] = -1
            if head[r] < 0:
                tail[r] = -1
            waiting[r] -= 1
            if np.isnan(admitted[h]):
                admitted[h] = t
            reserved[h] = need
            used_blocks[r] += need
            free -= need
            running[r, n_run[r]] = h
            n_run[r] += 1
            chunk[h] = min(remaining, budget) if chunked_prefill else remaining
            budget -= chunk[h]
            prefill_in_step += chunk[h]

        # -- the step's cost and its attribution --------------------------------------------
        tokens = 0.0
        pairs = 0.0
        kv_read = 0.0
        kv_written = 0.0
        in_step = 0
        for j in range(n_run[r]):
            i = running[r, j]
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
        compute_s, memory_s, fixed_s = roofline.step_cost(coef, tokens, pairs, kv_read, kv_written)
        compute_bound = compute_s >= memory_s
        core_s = max(compute_s, memory_s)
        duration = core_s + fixed_s
        weight = roofline.weight_bytes(coef, tokens)
        kv_bytes = coef[roofline.KV_BYTES_PER_TOKEN]
        total_bytes = weight + kv_bytes * (kv_read + kv_written)
        total_flops = coef[roofline.FLOPS_PER_TOKEN] * tokens + coef[roofline.ATTN_FLOPS_PER_PAIR] * pairs
        for j in range(n_run[r]):
            i = running[r, j]
            c = chunk[i]
            if c == 0:
                continue
            decoding = ctx[i] >= target[i]
            if compute_bound:
                own_pairs = ctx[i] if decoding else roofline.chunk_attn_pairs(float(ctx[i]), float(c))
                own = coef[roofline.FLOPS_PER_TOKEN] * c + coef[roofline.ATTN_FLOPS_PER_PAIR] * own_pairs
                share = own / total_flops
            else:
                share = (weight / in_step + kv_bytes * (ctx[i] + c)) / total_bytes
            gpu_s = (core_s * share + fixed_s / in_step) * tp_gpus
            if decoding:
                decode_gpu[i] += gpu_s
            else:
                prefill_gpu[i] += gpu_s
            if compute_bound:
                compute_gpu[i] += gpu_s

        t1 = t + duration
        last_bin = int(t1 // bin_s)
        if last_bin >= timeline.shape[2]:
            grown = np.zeros((4, replicas, 2 * last_bin + 2))
            grown[:, :, : timeline.shape[2]] = timeline
            timeline = grown
        _accumulate(timeline, r, t, t1, bin_s, float(in_step),
                    used_blocks[r] / kv_capacity_blocks, float(waiting[r]))
        busy_until[r] = t1

    return (replica, admitted, first, finished, preemptions, prefill_gpu, decode_gpu,
            compute_gpu, timeline)
