"""The cost of one engine step: the roofline formula shared by the API and the compiled replay.

A serving engine advances in *steps*. One step runs a forward pass over every scheduled token:
prefill chunks (many tokens of one prompt) and decodes (one token per running sequence) mixed.
Its dense layers (GEMMs, reading the weights) and its attention (reading the KV cache) are
separate kernels run one after the other, each limited by its own roofline, plus fixed costs:

    gemm_s  = soft(C_shared, M_shared) + soft(C_experts, M_experts),  soft(C, M) = (C^n + M^n)^(1/n)
              C_shared  = ((F_tok - F_exp) * tokens + F_seq * sequences) / P_eff,
              M_shared  = W_shared / B_eff,
              C_experts = F_exp * tokens / P_eff,  M_experts = (W(tokens) - W_shared) / B_eff
    attn_s  = max(F_attn * pairs / P_attn, K_tok * (kv_read + kv_written) / B_eff)
    fixed_s = O_step + sequences * O_seq + [tp > 1] * (A_lat + tokens * A_bytes / B_link)
    step_s  = gemm_s + attn_s + fixed_s

(A single roofline over the step's totals, max(all FLOPs, all bytes), would let a big batch's
compute-bound GEMMs hide its memory-bound attention; they do not overlap. Nor do a mixture's
shared GEMMs (attention projections, shared experts, dense layers, LM head) and its routed
experts, a fused-MoE kernel of their own in every engine, where each expert sees only
tokens * k / E of the tokens: the shared GEMMs turn compute-bound at a batch near the ridge
point, the experts only at ~E / k times it, and one roofline over their sums would hide the
first under the second's weight read. Dense models have F_exp = 0 and W = W_shared, so their
second term is 0.) step_cost returns
(compute_s, memory_s, fixed_s) with max(compute_s, memory_s) = gemm_s + attn_s, the larger being
the bound resource's side (see step_cost).

The GEMM roofline is softened (exponent 3, gemm_seconds, not a hard max): where a GEMM's
compute and weight-read times are close, as in large decode batches, the kernel does not hide
one entirely under the other. DeepGEMM's FP8 GEMMs on H800 at M = 128 (N x K = 4096 x 7168 and
7168 x 2048, C/M ~ 0.5; the table of its February 2025 README, quoted in charliedream1/ai_wiki)
take 1.04-1.07 x their memory time at 0.71 of the bandwidth: n = 2.5-3; n = 3 is the end
closest to a hard max (1.04 x at C/M = 0.5, 1.26 x at C = M, 1.2% at a factor of 3).

All quantities are *per GPU* of the tensor-parallel group (every GPU does 1/tp of the work in
lock-step, so the replica's step time is one GPU's step time):

- F_tok  = 2 * ((active_params - V - R) / tp + R)   FLOPs of the transformer blocks' GEMMs per
  token, R the parameters every GPU holds whole (MLA's latent down-projections), V the embedding
  table and LM head (the embedding is a lookup without FLOPs, deployment.py)
- F_exp  = 2 * k * P_expert / tp   of them, the routed experts' (k experts of P_expert
  parameters each per token; 0 for a dense model)
- F_seq  = 2 * H / tp * P_w / P_bf16   FLOPs of the LM head per *sequence* of the step: engines
  compute logits only at the last position each sequence has in the step (vLLM's
  `logits_indices = query_start_loc[1:] - 1`, one row per scheduled request, a partial prefill
  chunk's included; TensorRT-LLM's `gather_context_logits` is off by default; SGLang's
  `LogitsProcessor._get_pruned_states`: `last_index = cumsum(extend_seq_lens) - 1`), not at
  every prompt token. H is a bf16 GEMM in every checkpoint, counted in time at the weight GEMMs'
  peak P_w. A decode step has one sequence per token; a prefill chunk of n tokens one for all n.
- F_attn = 2 * layers * q_heads * (qk_dim + v_dim) / tp  FLOPs per (query token, key token)
  pair: QK^T costs 2 * qk_dim and AV 2 * v_dim per head (4 * head_dim for GQA / MHA; MLA adds
  its rotary dims to qk_dim, deployment.py). A prefill chunk of n new tokens after c cached
  tokens has n * (c + (n - 1) / 2) pairs (causal mask: on average it attends to half the chunk);
  a decode over a context of L tokens has L pairs.
- W(tokens) = W_shared + W_experts * (1 - (1 - k/E)^tokens)   weight bytes read once per step
  (W_shared counts R whole and the 16-bit LM head, not the embedding table, which a step only
  looks rows up in). Dense models have W_experts = 0. For a mixture of experts each
  token picks k of E experts, so the expected share of experts a step touches grows with its
  token count.
- K_tok  = KV-cache bytes per token per GPU (see deployment.py for GQA / MLA sizing)
- P_eff  = dense peak FLOP/s of the GEMMs' dtype * compute efficiency: the weight dtype's where
  the GPU has tensor cores for it (fp8 / fp4 weights run fp8 / fp4 GEMMs, so a lower precision
  raises the usable peak as well as cutting bytes), bf16's where it serves the weights
  weight-only (fp8 on an A100: the bytes drop, the peak does not; catalog._gemm_dtype)
- P_attn = dense peak FLOP/s of the attention dtype * compute efficiency: attention multiplies
  activations by the KV cache, never by weights, so it runs in fp8 when the KV cache is fp8 or
  fp4 (dequantized to fp8) and the GPU has fp8 tensor cores, otherwise in bf16 (an int8 KV cache
  too; fp4 weights do not make attention fp4)
- B_eff  = HBM bandwidth * bandwidth efficiency
- O_step = per-step overhead + layers * per-layer overhead (scheduling, launches)
- O_seq  = the engine's work per sequence of a step, whatever the model: sampling its next token
  (a top-k / top-p pass over the whole vocabulary), its slot in the batch's inputs, block
  tables and outputs. On today's engines it is a GPU kernel's share, ~1 us (FlashInfer's
  top-k / top-p sampling over 131,072 logits: 0.37-0.49 ms for 512 sequences, vLLM PR #40376;
  the 2023 stack's 110-200 us, fitted on SplitwiseSim's steps, is its Python per-sequence work
  on the host CPU); on an engine that does it in Python between steps it is the larger part of
  a small model's step: the
  BurstGPT replay's vLLM engine log (0.5 s throughput samples, docs/physics.md section 6) shows
  Llama-3.2-1B decode steps on one RTX 4090 growing by ~0.3 ms per running sequence, 44 ms at
  148 sequences where weights and KV cache take ~8 ms. Split equally among the step's
  sequences, as the rest of the fixed time is.
- A_lat  = 2 * layers * rounds(tp) * all-reduce latency per round (two all-reduces per layer,
  after attention and after the MLP; the catalog's latency is one round, all of a tp = 2
  all-reduce). rounds(tp) = ceil(log2(tp)) where every GPU reaches every peer at once (NVSwitch,
  Infinity Fabric mesh), as in recursive doubling, whose latency term is log2(p) messages
  (Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication Operations in
  MPICH"); tp - 1 over a ring (PCIe, and the 2023 stack). See deployment.ALLREDUCE_ROUNDS and
  docs/physics.md section 4. A_bytes = 2 * layers * hidden * 2 B * 2 (tp - 1) / tp per token (ring
  all-reduce of bf16 activations), over B_link = the all-reduce bus bandwidth NCCL achieves:
  one direction of the link rate the GPU reaches its group's peers at (all of it through a
  switch or PCIe; on a fully connected mesh, MI300X's, only the tp - 1 of its links to its own
  peers: Deployment.link_gbs_one_way) times a bus efficiency (0.82 on NVLink, protocol
  overhead; 0.48 measured on B200's NVLink 5; 0.55 over PCIe, limited by the CPU root complex;
  see gpu_efficiency.csv).

The step is *compute-bound* when compute_s >= memory_s (most of its core time is in
compute-bound kernels), else *memory-bound*; the bound resource decides how the step's
GPU-seconds are split among its requests (see pipelines/replay/engine.py).

The coefficient vector is a plain float64 array so that the numba-compiled replay loop and the
Python API evaluate literally the same function.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Indices into the coefficient vector built by Deployment.coefficients.
SHARED_WEIGHT_BYTES = 0
EXPERT_WEIGHT_BYTES = 1
EXPERTS = 2
EXPERTS_PER_TOKEN = 3
KV_BYTES_PER_TOKEN = 4
FLOPS_PER_TOKEN = 5
ATTN_FLOPS_PER_PAIR = 6
EFFECTIVE_FLOPS = 7
EFFECTIVE_BANDWIDTH = 8
STEP_OVERHEAD_S = 9
ALLREDUCE_LATENCY_S = 10
ALLREDUCE_BYTES_PER_TOKEN = 11
LINK_BANDWIDTH = 12
ATTN_EFFECTIVE_FLOPS = 13
FLOPS_PER_SEQUENCE = 14
SEQUENCE_OVERHEAD_S = 15
EXPERT_FLOPS_PER_TOKEN = 16
N_COEFFICIENTS = 17


@njit(cache=True)
def weight_bytes(coef: np.ndarray, tokens: float) -> float:
    """Weight bytes one GPU reads in a step of `tokens` tokens (MoE: only the experts touched)."""
    experts = coef[EXPERTS]
    if experts <= 1.0 or coef[EXPERT_WEIGHT_BYTES] == 0.0:
        return coef[SHARED_WEIGHT_BYTES] + coef[EXPERT_WEIGHT_BYTES]
    untouched = (1.0 - coef[EXPERTS_PER_TOKEN] / experts) ** tokens
    return coef[SHARED_WEIGHT_BYTES] + coef[EXPERT_WEIGHT_BYTES] * (1.0 - untouched)


@njit(cache=True)
def gemm_flops(coef: np.ndarray, tokens: float, sequences: float) -> float:
    """GEMM FLOPs one GPU does for `tokens` tokens of `sequences` sequences: the blocks per token
    (F_tok), the LM head once per sequence (F_seq). The step's compute time, and the share of it
    the replay charges each sequence where the GEMMs are compute-bound."""
    return coef[FLOPS_PER_TOKEN] * tokens + coef[FLOPS_PER_SEQUENCE] * sequences


@njit(cache=True)
def shared_gemm_flops(coef: np.ndarray, tokens: float, sequences: float) -> float:
    """The shared GEMMs' part of gemm_flops, a mixture's routed experts (F_exp * tokens) left
    out: their kernel's compute time (gemm_kernels), and the replay's split of it by own FLOPs
    (pipelines/replay/engine.py). All of gemm_flops for a dense model."""
    return gemm_flops(coef, tokens, sequences) - coef[EXPERT_FLOPS_PER_TOKEN] * tokens


@njit(cache=True)
def gemm_seconds(compute_s: float, memory_s: float) -> float:
    """The softened GEMM roofline (compute^3 + memory^3)^(1/3) (module docstring), written as
    larger * cbrt(1 + x) with x = (smaller / larger)^3. The replay evaluates it in its innermost
    loops, and most decode steps are far from the ridge (x < 1e-3, a ratio under 0.1): there
    cbrt(1 + x) = 1 + x/3 - x^2/9 to within 5 x^3 / 81 < 7e-11, at a quarter of a cube root's
    cost (a general power costs more still)."""
    larger = max(compute_s, memory_s)
    if larger <= 0.0:
        return 0.0
    ratio = min(compute_s, memory_s) / larger
    x = ratio * ratio * ratio
    if x < 1e-3:
        return larger * (1.0 + x * (1.0 / 3.0 - x / 9.0))
    return larger * np.cbrt(1.0 + x)


@njit(cache=True)
def gemm_kernels(coef: np.ndarray, tokens: float,
                 sequences: float) -> tuple[float, float, float, float]:
    """(C_shared, M_shared, C_experts, M_experts) of a step's two GEMM kernels (module
    docstring), each a roofline of its own: step_cost's GEMM time, and the replay's attribution of
    each kernel's time by its own bound (pipelines/replay/engine.py). The experts' pair is 0 for
    a dense model."""
    expert_compute = coef[EXPERT_FLOPS_PER_TOKEN] * tokens / coef[EFFECTIVE_FLOPS]
    shared_compute = shared_gemm_flops(coef, tokens, sequences) / coef[EFFECTIVE_FLOPS]
    shared_memory = coef[SHARED_WEIGHT_BYTES] / coef[EFFECTIVE_BANDWIDTH]
    expert_memory = weight_bytes(coef, tokens) / coef[EFFECTIVE_BANDWIDTH] - shared_memory
    return shared_compute, shared_memory, expert_compute, expert_memory


@njit(cache=True)
def attention_kernel(coef: np.ndarray, attn_pairs: float, kv_read: float,
                     kv_written: float) -> tuple[float, float]:
    """(C_attn, M_attn) of a step's attention (module docstring): step_cost's attention time
    is the larger, and the replay charges it by own pairs where C_attn is (engine.kernels)."""
    return (coef[ATTN_FLOPS_PER_PAIR] * attn_pairs / coef[ATTN_EFFECTIVE_FLOPS],
            coef[KV_BYTES_PER_TOKEN] * (kv_read + kv_written) / coef[EFFECTIVE_BANDWIDTH])


@njit(cache=True)
def allreduce_traffic_s(coef: np.ndarray, tokens: float) -> float:
    """Seconds the step's all-reduces spend sending its tokens' activations over the link
    (tokens * A_bytes / B_link; 0 at tp = 1, where A_bytes is 0): the part of the fixed time
    that grows with the step's tokens, which the replay charges each sequence by its own
    tokens, not equally (pipelines/replay/engine.py, cost attribution)."""
    if coef[ALLREDUCE_BYTES_PER_TOKEN] <= 0.0:
        return 0.0
    return tokens * coef[ALLREDUCE_BYTES_PER_TOKEN] / coef[LINK_BANDWIDTH]


@njit(cache=True)
def step_cost(
    coef: np.ndarray, tokens: float, sequences: float, attn_pairs: float, kv_read: float,
    kv_written: float
) -> tuple[float, float, float]:
    """(compute_s, memory_s, fixed_s) of one step of `tokens` tokens from `sequences` sequences
    (each gets one row of logits); its duration is max(compute, memory) + fixed.

    The shared GEMMs, a mixture's routed experts and the attention are separate kernels, each
    its own roofline, run one after the other: core = soft-max_n(C_shared, M_shared) +
    soft-max_n(C_experts, M_experts) + max(C_attn, M_attn). The larger of the returned pair is
    that core time; the smaller is the part of it spent in kernels bound by the other resource,
    so `compute_s >= memory_s` says most of the step's time is compute-bound."""
    shared_compute, shared_memory, expert_compute, expert_memory = gemm_kernels(coef, tokens,
                                                                                sequences)
    shared_gemm = gemm_seconds(shared_compute, shared_memory)
    expert_gemm = gemm_seconds(expert_compute, expert_memory)   # 0 for a dense model
    attn_compute, attn_memory = attention_kernel(coef, attn_pairs, kv_read, kv_written)
    core = shared_gemm + expert_gemm + max(attn_compute, attn_memory)
    compute_bound_part = 0.0
    if shared_compute >= shared_memory:
        compute_bound_part += shared_gemm
    if expert_compute >= expert_memory:
        compute_bound_part += expert_gemm
    if attn_compute >= attn_memory:
        compute_bound_part += attn_compute
    memory_bound_part = core - compute_bound_part
    fixed_s = coef[STEP_OVERHEAD_S] + sequences * coef[SEQUENCE_OVERHEAD_S]
    if coef[ALLREDUCE_BYTES_PER_TOKEN] > 0.0:   # tp > 1, whatever the latency (which may be 0)
        fixed_s += coef[ALLREDUCE_LATENCY_S] + allreduce_traffic_s(coef, tokens)
    if compute_bound_part >= memory_bound_part:
        return core, memory_bound_part, fixed_s
    return compute_bound_part, core, fixed_s


@njit(cache=True)
def step_seconds(coef: np.ndarray, tokens: np.ndarray, sequences: np.ndarray,
                 attn_pairs: np.ndarray, kv_read: np.ndarray, kv_written: np.ndarray) -> np.ndarray:
    """Durations max(compute, memory) + fixed of many independent steps (arrays of equal length)."""
    out = np.empty(tokens.shape[0])
    for i in range(tokens.shape[0]):
        compute_s, memory_s, fixed_s = step_cost(coef, tokens[i], sequences[i], attn_pairs[i],
                                                 kv_read[i], kv_written[i])
        out[i] = max(compute_s, memory_s) + fixed_s
    return out


@njit(cache=True)
def graph_batch(sizes: np.ndarray, batch: float) -> float:
    """The batch a decode-only step of `batch` sequences runs as under CUDA-graph padding to
    `sizes` (ascending int64, Scheduler.graph_sizes): the smallest size >= batch, or batch itself
    where there is none (no graphs, or a batch above the largest captured). Its GEMMs, all-reduce
    and per-sequence work run over that many; its attention over the real sequences
    (docs/physics.md section 1). One definition for the API, calibration and the replay loop."""
    for size in sizes:
        if size >= batch:
            return float(size)
    return batch


@njit(cache=True)
def graph_batches(sizes: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """graph_batch of each of many decode steps' batches."""
    out = np.empty(batches.shape[0])
    for i in range(batches.shape[0]):
        out[i] = graph_batch(sizes, batches[i])
    return out


@njit(cache=True)
def chunk_attn_pairs(cached: float, new: float) -> float:
    """Causal attention pairs of a prefill chunk of `new` tokens after `cached` tokens."""
    return new * (cached + (new - 1.0) / 2.0)
