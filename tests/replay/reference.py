"""A plain-Python reference simulator of the replay semantics, written for clarity, step by step.

It implements the rules in the docstring of pipelines/replay/engine.py literally: one engine
step at a time, every sequence an object, no runs, no closed forms, no trees. It is slow and
used only by the tests, which check that the compiled engine gives the same per-request times,
preemptions and GPU-seconds (to 1e-9 relative) on random small traces.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from pipelines.replay import engine
from pipelines.roofline import step as roofline


@dataclass
class Sequence:
    index: int
    arrival: float
    prompt: int
    output: int
    ctx: int                 # tokens whose KV is in the cache
    target: int              # tokens that must be in the cache before the next token
    hashes: list             # prefix hashes, one per hash_tokens prompt tokens
    replica: int = -1
    generated: int = 0
    reserved: int = 0        # KV blocks held, its own (not counting shared cache entries)
    held: int = 0            # leading prefix-cache entries it uses
    hit: int = 0             # tokens in the cache at its first admission
    chunk: int = 0           # tokens scheduled in the current step (decode: 1)
    admitted: float = math.nan
    first: float = math.nan
    finished: float = math.nan
    preemptions: int = 0
    prefill_gpu: float = 0.0
    decode_gpu: float = 0.0
    compute_gpu: float = 0.0

    @property
    def decoding(self) -> bool:
        return self.ctx >= self.target


@dataclass
class Replica:
    index: int
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)   # in admission order
    used_blocks: int = 0                           # own blocks of sequences + cache entries
    users: dict = field(default_factory=dict)      # resident hash -> running sequences using it
    unused: OrderedDict = field(default_factory=OrderedDict)   # hashes nobody uses, LRU first
    evictions: int = 0
    step_end: float = math.inf                     # inf: idle
    in_step: list = field(default_factory=list)


@dataclass
class Outcome:
    sequences: list
    replicas: list
    step_log: list   # (replica, start, end, batch, kv) of every step, in the order they were
                     # formed; kv: the tokens in the KV cache of the replica's running sequences
                     # (an entry several of them use, once)


def blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


def simulate(arrival, prompt, output, cached, coef, replicas, max_seqs, max_batched_tokens,
             chunked_prefill, kv_capacity_blocks, block_tokens, router, hashes=None,
             hash_tokens=512, reserve_output=False, graph_sizes=()) -> Outcome:
    hashes = hashes if hashes is not None else [[] for _ in arrival]
    seqs = [Sequence(i, float(arrival[i]), int(prompt[i]), int(output[i]), int(cached[i]),
                     int(prompt[i]), list(hashes[i])) for i in range(len(arrival))]
    entry_blocks = hash_tokens // block_tokens
    fleet = [Replica(k) for k in range(replicas)]
    log: list = []
    pending = deque(seqs)

    def route(s: Sequence) -> Replica:
        if router == "round_robin":
            return fleet[s.index % replicas]
        if router == "least_outstanding":
            return min(fleet, key=lambda r: (len(r.waiting) + len(r.running), r.index))
        load = [sum(q.prompt for q in [*r.waiting, *r.running]) for r in fleet]
        return min(fleet, key=lambda r: (load[r.index], r.index))

    def free(r: Replica) -> int:
        return kv_capacity_blocks - r.used_blocks

    def evict_oldest(r: Replica) -> None:
        h, _ = r.unused.popitem(last=False)
        del r.users[h]
        r.used_blocks -= entry_blocks
        r.evictions += 1

    def use(r: Replica, h: int) -> None:
        r.unused.pop(h, None)
        r.users[h] += 1

    def release(r: Replica, s: Sequence) -> None:
        for h in reversed(s.hashes[: s.held]):
            r.users[h] -= 1
            if r.users[h] == 0:
                r.unused[h] = True
        s.held = 0

    def prefill_done(r: Replica, s: Sequence) -> None:
        full = min(len(s.hashes), s.prompt // hash_tokens)
        for h in s.hashes[s.held: full]:
            if h in r.users:            # someone put it there meanwhile: use theirs
                use(r, h)
                r.used_blocks -= entry_blocks
            else:                       # its own blocks become the cache entry
                r.users[h] = 1
            s.reserved -= entry_blocks
        s.held = max(s.held, full)

    def end_step(r: Replica, t: float) -> None:
        for s in r.in_step:
            if s.decoding:
                s.ctx += 1
                s.generated += 1
            else:
                s.ctx += s.chunk
                if s.decoding:
                    s.generated += 1
                    if math.isnan(s.first):
                        s.first = t
                    prefill_done(r, s)
            s.chunk = 0
        for s in list(r.running):
            if s.generated >= s.output:
                s.finished = t
                r.used_blocks -= s.reserved
                s.reserved = 0
                release(r, s)
                r.running.remove(s)
        r.in_step = []
        r.step_end = math.inf

    def preempt_newest(r: Replica) -> Sequence:
        v = r.running.pop()
        r.used_blocks -= v.reserved
        v.reserved = 0
        release(r, v)
        v.target = v.prompt + v.generated
        v.ctx = 0
        v.chunk = 0
        v.preemptions += 1
        r.waiting.appendleft(v)
        return v

    def form_step(r: Replica, t: float) -> None:
        budget = max_batched_tokens
        # 1. decodes
        for s in list(r.running):
            if s not in r.running or not s.decoding:
                continue
            need = blocks(s.ctx + 1, block_tokens) - s.reserved - s.held * entry_blocks
            while need > free(r):
                if r.unused:
                    evict_oldest(r)
                elif preempt_newest(r) is s:
                    break
            if s not in r.running:
                break
            if need > 0:   # a sequence admitted with its whole length already holds the block
                s.reserved += need
                r.used_blocks += need
            s.chunk = 1
            budget -= 1
        # 2. running prefills
        prefill = 0
        for s in r.running:
            if not s.decoding and budget > 0:
                s.chunk = min(s.target - s.ctx, budget)
                budget -= s.chunk
                prefill += s.chunk
        # 3. FCFS admissions
        while r.waiting and len(r.running) < max_seqs and budget > 0:
            h = r.waiting[0]
            matched = 0
            while (matched < min(len(h.hashes), (h.target - 1) // hash_tokens)
                   and h.hashes[matched] in r.users):
                matched += 1
            span = h.prompt + h.output - 1 if reserve_output else h.target
            need = blocks(span, block_tokens) - matched * entry_blocks
            droppable = [x for x in r.unused if x not in h.hashes[:matched]]
            if need > free(r) + len(droppable) * entry_blocks:
                break
            start = max(h.ctx, matched * hash_tokens)
            remaining = h.target - start
            if not chunked_prefill and remaining > budget and prefill > 0:
                break
            for x in h.hashes[:matched]:
                use(r, x)
            h.held = matched
            while need > free(r):
                evict_oldest(r)
            h.ctx = start
            r.waiting.popleft()
            if math.isnan(h.admitted):
                h.admitted = t
                h.hit = start
            h.reserved = need
            r.used_blocks += need
            r.running.append(h)
            h.chunk = min(remaining, budget) if chunked_prefill else remaining
            budget -= h.chunk
            prefill += h.chunk
        r.in_step = [s for s in r.running if s.chunk > 0]
        if not r.in_step:
            return
        # cost and attribution
        def pairs(s):
            return float(s.ctx) if s.decoding else roofline.chunk_attn_pairs(float(s.ctx), float(s.chunk))
        tokens = float(sum(s.chunk for s in r.in_step))
        all_pairs = sum(pairs(s) for s in r.in_step)
        kv_read = float(sum(s.ctx for s in r.in_step))
        # The step's kernels, as step_cost defines them (engine.kernels): the shared GEMMs, a
        # mixture's routed experts, then the attention, each with its own bound.
        batch = len(r.in_step)
        # a decode-only step (every running sequence decoding) runs as a CUDA graph of the
        # smallest captured size >= batch: GEMMs and fixed costs over the padding too
        if prefill == 0 and len(r.in_step) == len(r.running):
            gemm_tokens = gemm_sequences = roofline.graph_batch(
                np.asarray(graph_sizes, dtype=np.int64), float(batch))
        else:
            gemm_tokens, gemm_sequences = tokens, float(batch)
        (duration, shared_s, shared_compute_bound, experts_s, experts_compute_bound, attn_s,
         attn_compute_bound, fixed_s) = engine.kernels(coef, gemm_tokens, gemm_sequences,
                                                       all_pairs, kv_read, tokens)
        step_flops = roofline.shared_gemm_flops(coef, tokens, float(batch))
        for s in r.in_step:
            if shared_compute_bound:   # by own FLOPs: the blocks per token, the head per sequence
                own = roofline.shared_gemm_flops(coef, float(s.chunk), 1.0)
                shared = shared_s * own / step_flops
            else:
                shared = shared_s / batch                     # the weight read, shared equally
            if experts_compute_bound:   # by own FLOPs: the routed experts' per token
                experts = experts_s * s.chunk / tokens
            else:
                experts = experts_s / batch
            if attn_compute_bound:
                attn = attn_s * pairs(s) / all_pairs          # by own attention pairs
            else:
                attn = attn_s * (s.ctx + s.chunk) / (kv_read + tokens)   # by own KV bytes
            # the all-reduce's traffic (over the padding too) by own tokens, the rest equally
            traffic = roofline.allreduce_traffic_s(coef, gemm_tokens)
            gpu = shared + experts + attn + (fixed_s - traffic) / batch + traffic * s.chunk / tokens
            if s.decoding:
                s.decode_gpu += gpu
            else:
                s.prefill_gpu += gpu
            s.compute_gpu += ((shared if shared_compute_bound else 0.0)
                              + (experts if experts_compute_bound else 0.0)
                              + (attn if attn_compute_bound else 0.0))
        r.step_end = t + duration
        # the KV tokens held: each sequence's own, and each prefix-cache entry in use once
        log.append((r.index, t, r.step_end, batch,
                    sum(s.ctx - s.held * hash_tokens for s in r.running)
                    + hash_tokens * sum(1 for users in r.users.values() if users > 0)))

    while True:
        r = min(fleet, key=lambda q: (q.step_end, q.index))
        t_arr = pending[0].arrival if pending else math.inf
        if not pending and r.step_end == math.inf:
            break
        if t_arr <= r.step_end:
            s = pending.popleft()
            target = route(s)
            s.replica = target.index
            target.waiting.append(s)
            if target.step_end == math.inf and not target.in_step:
                target.step_end = t_arr   # start a step now, after simultaneous arrivals
            continue
        t = r.step_end
        end_step(r, t)
        form_step(r, t)
    return Outcome(seqs, fleet, log)
