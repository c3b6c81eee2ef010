"""A deployment: one model served on a tensor-parallel group of GPUs, times a number of replicas.

The deployment turns catalog facts (model shape, GPU datasheet, efficiency factors) into the
per-GPU coefficients of the step formula in step.py, and answers the two questions the rest of
the project asks of the physics: how long does a prompt take to prefill alone, and how long does
one decode step over a batch take.

Sizing formulas (per GPU of a tensor-parallel group of `tp` GPUs):

- weights:  ((total_params - V - R) / tp + R) * bytes(weight dtype) + V / tp * VOCAB_BYTES, bytes
  with block scales (DTYPE_BYTES: fp4 is NVFP4, 4.5 bits a value); V = the vocabulary matrices
  (below). R = the replicated parameters, which every GPU
  of the group holds whole: MLA's down-projections of each layer's input to the query and KV
  latents, hidden * (q_lora_rank + kv_lora_rank + qk_rope_head_dim) per layer (DeepSeek-V3:
  7168 * 2112, 0.92 B parameters over 61 layers), which vLLM and SGLang build as ReplicatedLinear
  layers (vllm-project/vllm and sgl-project/sglang, model_executor/models/deepseek_v2.py and
  srt/models/deepseek_v2.py: q_a_proj / kv_a_proj_with_mqa, fused_qkv_a_proj_with_mqa) because
  every GPU needs the whole latent; InferenceX's kernel profile of DeepSeek-R1 on 8 x H200
  (SemiAnalysisAI/InferenceX#1004) shows the 2112 x 7168 GEMM on every rank. Every other weight
  is split. The MoE router (hidden * experts per MoE layer, kept in bf16, 0.2 GB for
  DeepSeek-V3) is replicated too and left out. The vocabulary matrices, the input embedding
  table and the LM head (vocab_size * hidden each; one matrix where the model ties them), are
  not transformer-block weights: quantized checkpoints keep them 16-bit (NVIDIA's ModelOpt FP8
  and NVFP4 checkpoints: "Only the weights and activations of the linear operators within
  transformers blocks are quantized", model card of nvidia/Llama-3.1-405B-Instruct-FP8, and
  ModelOpt's export writes "exclude_modules": ["lm_head"]; DeepSeek-V3 keeps "the embedding
  module, the output head" in BF16, technical report section 3.3, its FP8 framework), so they
  are held at VOCAB_BYTES whatever the weight dtype. Both are split by vocabulary rows over the
  group (VocabParallelEmbedding / ParallelLMHead). For a mixture of experts the expert share is
  derived from the catalog's total and active counts: with E experts, k per token,
  per_expert = (total - active) / (E - k) and shared = total - E * per_expert.
- KV cache per token: GQA/MHA: 2 (K and V) * layers * ceil(kv_heads / tp) * head_dim * bytes(kv
  dtype) — a KV head cannot be split, so with tp > kv_heads every GPU keeps one head.
  MLA: layers * (kv_lora_rank + qk_rope_head_dim) * bytes(kv dtype), the compressed latent, which
  every GPU of the group holds whole.
- KV capacity in tokens: the KV pool / KV per token, in whole blocks. Engines size the pool in
  one of two ways (the scheduler's `kv_memory_basis`):
  - "total" (vLLM `gpu_memory_utilization`, SGLang `mem_fraction_static`): the fraction caps the
    whole footprint, so pool = memory * kv_memory_fraction - weights - activations;
  - "free" (TensorRT-LLM `free_gpu_memory_fraction`, "allocate 90% of free GPU memory for KV
    cache", TensorRT-LLM docs "How to Change KV Cache Behavior"): the fraction applies to what is
    left once the engine is loaded, pool = kv_memory_fraction * (memory - weights - activations
    - runtime - NCCL buffers) * (1 - block-pool reserve). The NCCL buffers per tensor-parallel
    degree (TRTLLM_NCCL_BYTES_TP2, TRTLLM_NCCL_BYTES_TP4_UP) and the 1.5% reserve for the
    block allocator are the assumptions of NVIDIA's AIConfigurator memory model
    (ai-dynamo/aiconfigurator, src/aiconfigurator/sdk/backends/trtllm_backend.py and
    systems/*.yaml `misc`). The runtime (CUDA context, cuBLAS and runtime buffers,
    TRTLLM_RUNTIME_BYTES) is fitted to NVIDIA's twelve measured TensorRT-LLM maximum batch
    sizes for Llama-3.1-8B on H100 (tp 1/2/4, 2K/4K in and out, 0.8 of free memory;
    tests/integration/test_trtllm_kv_cache_capacity.py of the same repository, copied to
    bench/validation/trtllm_kv_capacity.csv): every value from 2.0 to 3.4 GiB reproduces all
    twelve within 2.3%, 2.5-2.7 GiB within 1.8% (the smallest worst error), so 2.6 GiB;
    AIConfigurator's own 3.5 GiB `other_mem` ("increase from 551MB to 3.5GB for safer
    deployment") misses one by 3.6% in this formula.
  activations ~ max_batched_tokens * (4 * hidden + 2 * ffn / tp) * 2 B is the peak workspace of
  one step (an estimate: attention and MLP intermediates of the largest step; for Llama-3.1-8B
  at tp 1 it equals AIConfigurator's 2 * tokens * hidden * 11 B).
- ridge point: effective FLOP/s / effective bandwidth, in FLOPs per byte. A decode step over a
  batch of b sequences does ~(F_tok + F_seq) * b FLOPs for W(b) bytes of weights, a mixture's
  routed experts F_exp * b of them for W(b) - W_shared bytes (see the compute-bound batch
  below).
- memory: gpus.csv keeps the marketed `memory_gb` (decimal GB, for people) and `memory_gib`, the
  device memory the driver reports (nvidia-smi / rocm-smi total, in GiB = 2^30 bytes); capacity
  uses memory_gib. The two differ by up to 7%: an "80 GB" H100 has 79.65 GiB, a "48 GB" L40S
  44.99 GiB, a "141 GB" H200 140.4 GiB.
- weights read and GEMM FLOPs per step: the LM head is read whole every step and multiplies
  one hidden state per sequence of the step, the last it has there (2 * vocab_size * hidden / tp
  FLOPs per sequence, at the bf16 peak: it is a 16-bit GEMM): engines compute logits only where
  they may sample, not at every prompt token (step.py, F_seq); the input embedding is a row
  lookup, neither read whole nor multiplied (Kaplan et al. 2020 count a forward pass as 2N FLOPs
  per token with N the non-embedding parameters), so it only takes memory.
- attention FLOPs per (query, key) pair: QK^T costs 2 * qk_dim and AV 2 * v_dim per head, so
  F_attn = 2 * layers * q_heads * (qk_dim + v_dim) / tp. GQA/MHA: qk_dim = v_dim = head_dim.
  MLA (DeepSeek-V3) as run in prefill (latent expanded per head): qk_dim = qk_nope_head_dim +
  qk_rope_head_dim = 128 + 64, v_dim = 128. Decode runs the absorbed form (attends over the
  512 + 64 latent, 2 * (2 * 512 + 64) FLOPs per head and pair) but decode is memory-bound, so the
  prefill form is the one whose FLOPs decide step times.
- decode turns compute-bound at the smallest batch b whose GEMMs spend at least as long in
  compute-bound kernels as in memory-bound ones (step.step_cost, the replay's rule; a decode
  step's b tokens are b sequences, one LM-head row each), found by bisection; KV reads are left
  out (they push b further). For a dense model that is where (F_tok + F_seq) * b / P_eff reaches
  W / B_eff; for a mixture, whose routed experts are a kernel of their own, where F_exp * b /
  P_eff reaches (W(b) - W_shared) / B_eff, the read of the experts a step of b tokens touches
  (W grows with b, as more experts are touched), ~E / k times its shared layers' batch.
- max-load throughput (`max_throughput_tok_s`): the replica admits a request only when the KV
  cache can hold its whole prompt + output (no eviction, as TensorRT-LLM's default
  GUARANTEED_NO_EVICT policy and a vLLM that never preempts), so B = min(max_seqs, KV blocks //
  blocks of prompt + output - 1 tokens) requests run together (max_concurrency, as the replay
  reserves a sequence with kv_reservation "full"). In steady state each of them costs one
  prefill (its prompt tokens packed into steps of max_batched_tokens tokens), whose last step
  emits its first token, and output - 1 decode steps over the batch, for tokens 2..output (as
  prefill_s and the replay count them), step j reading a context of the prompt + j - 1 tokens
  already cached and writing token j's KV; output tokens/s = B * output / (prefill time of B
  prompts + sum over those decode steps of decode_step_s(B, B * context)).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from pipelines.roofline import step
from pipelines.roofline.caveats import caveat_column

# Bytes per stored value, block scales included. fp4 is NVFP4 (Blackwell's native format, also
# what TensorRT-LLM's fp4 KV cache and vLLM's FP4 Marlin read): 4-bit E2M1 values in blocks of
# 16 sharing one FP8 E4M3 scale, 72 bits per 16 values = 4.5 bits (plus one FP32 scale per
# tensor, negligible); NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
# Inference" (developer blog, June 2025); modal.com/llm-almanac/block-quants. The other scales
# are negligible: fp8 per-tensor or DeepSeek's one FP32 per 128 x 128 block (4 B per 16,384
# values), int8 one per output channel.
DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5 + 1.0 / 16.0}
ACTIVATION_BYTES = 2.0  # activations and all-reduce payloads stay in bf16
# The embedding table and the LM head stay 16-bit whatever the weight dtype (module docstring).
VOCAB_BYTES = 2.0
GIB = 2.0**30
# How an engine's KV memory fraction is read (module docstring, KV capacity).
KV_MEMORY_BASES = ("total", "free")
# What a sequence reserves in the KV cache on admission: its prompt, taking blocks as it decodes
# and preempting the newest sequence when none is free (vLLM, SGLang), or its whole length,
# prompt + output, so that nothing is ever preempted (TensorRT-LLM's default capacity
# scheduler, GUARANTEED_NO_EVICT). pipelines/replay/engine.py applies it.
KV_RESERVATIONS = ("prompt", "full")
# How the latency of a small all-reduce grows with the tensor-parallel degree (step.py, A_lat):
# "log2": ceil(log2(tp)) rounds, GPUs that reach every peer at once (NVSwitch, Infinity Fabric
# mesh), as recursive doubling takes (a tp that is not a power of two needs the next one's);
# "ring": tp - 1 rounds, a ring of neighbours (PCIe; the 2023 stack's NCCL rings).
ALLREDUCE_ROUNDS = {"log2": lambda tp: float(math.ceil(math.log2(tp))), "ring": lambda tp: tp - 1.0}
TRTLLM_RUNTIME_BYTES = 2.6 * GIB
# NCCL communicator buffers per GPU (AIConfigurator systems/*.yaml misc.nccl_mem: none alone,
# 342 MiB at tp 2, 392 MiB from tp 4 up).
TRTLLM_NCCL_BYTES_TP2 = 358612992.0
TRTLLM_NCCL_BYTES_TP4_UP = 411041792.0
TRTLLM_BLOCK_POOL_OVERHEAD = 0.015  # AIConfigurator's assumed KV_CACHE_MEMORY_RESERVED_FRACTION


def whole_number(name: str, value, minimum: int) -> int:
    """`value` as an int when it is a whole number >= `minimum` (5 or 5.0), else a ValueError
    naming the argument: a negative, fractional or boolean token count or batch would otherwise
    come back as a plausible-looking duration."""
    whole = (isinstance(value, (int, np.integer)) and not isinstance(value, bool)) or (
        isinstance(value, (float, np.floating)) and float(value).is_integer())
    if not whole or value < minimum:
        raise ValueError(f"{name}={value!r}: expected a whole number >= {minimum}")
    return int(value)


@dataclass(frozen=True)
class ModelSpec:
    model: str
    layers: int
    hidden_size: int
    q_heads: int
    kv_heads: int
    head_dim: int
    ffn_size: int
    total_params_b: float
    active_params_b: float
    experts: int
    experts_per_token: int
    attention: str
    q_lora_rank: int | None
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    # the longest sequence (prompt + output) the model serves (its max_position_embeddings);
    # None where the catalog does not say. Not physics: the replay asset sets aside requests
    # beyond it, as an engine refuses them (vLLM's max_model_len).
    max_context: int | None = None
    # rows of the embedding table and the LM head; None where the catalog does not say (every
    # parameter is then taken for a transformer-block weight)
    vocab_size: int | None = None
    # one matrix serves as both the embedding table and the LM head (Llama-3.2-1B)
    tied_embeddings: bool | None = None


@dataclass(frozen=True)
class GpuSpec:
    gpu: str
    family: str
    memory_gb: float  # marketed, decimal GB
    memory_gib: float  # reported by the driver, GiB
    hbm_bandwidth_gbs: float
    peak_tflops: float  # dense, for the dtype the weight GEMMs compute in (gemm_dtype)
    bf16_peak_tflops: float  # dense bf16: the LM head's GEMM, 16-bit in every checkpoint
    attention_peak_tflops: float  # dense, for the attention dtype (fp8 with an fp8 or fp4 KV cache, else bf16)
    interconnect_gbs: float  # both directions summed, as datasheets quote it
    # the point-to-point links interconnect_gbs is the sum of, one to each peer of a fully
    # connected mesh (MI300X's Infinity Fabric: 7); None for a switch (NVSwitch) or PCIe, whose
    # bandwidth a tensor-parallel group of any size gets whole (Deployment.link_gbs_one_way)
    interconnect_peer_links: int | None
    gemm_dtype: str  # the weights' dtype, or bf16 where they are served weight-only


@dataclass(frozen=True)
class Efficiency:
    compute_efficiency: float
    bandwidth_efficiency: float
    step_overhead_s: float
    layer_overhead_s: float
    sequence_overhead_s: float  # per sequence of a step (step.py, O_seq)
    allreduce_latency_s: float  # one round of a small all-reduce (the whole of it at tp = 2)
    allreduce_rounds: str  # how the latency grows with tp: ALLREDUCE_ROUNDS
    allreduce_bus_efficiency: float  # achieved all-reduce bus bandwidth / one-way link rate


@dataclass(frozen=True)
class Scheduler:
    max_seqs: int = 256
    max_batched_tokens: int = 8192
    chunked_prefill: bool = True
    kv_memory_fraction: float = 0.9
    kv_block_tokens: int = 16
    kv_memory_basis: str = "total"  # "total" (vLLM, SGLang) or "free" (TensorRT-LLM)
    kv_reservation: str = "prompt"  # "prompt" (vLLM, SGLang) or "full" (TensorRT-LLM): KV_RESERVATIONS
    # CUDA-graph batch sizes with padding (ascending; empty: none): a decode-only step of B
    # sequences runs as the graph of the smallest captured size >= B, its GEMMs, all-reduces, LM
    # head and sampling over the padding too (the attention reads only the real sequences' KV);
    # above the largest it runs as it is (eager). step.graph_batch, docs/physics.md section 1.
    graph_batch_sizes: tuple[int, ...] = ()

    @property
    def graph_sizes(self) -> np.ndarray:
        """graph_batch_sizes as the int64 array step.graph_batch and the replay loop take."""
        return np.asarray(self.graph_batch_sizes, dtype=np.int64)


@dataclass(frozen=True)
class Network:
    """Client-side network: first byte arrives one_way_s after it is produced; streaming the
    last token's bytes adds bytes_per_token / bandwidth."""

    one_way_s: float = 0.025
    bytes_per_token: float = 150.0
    bandwidth_bytes_per_s: float = 12.5e6

    @property
    def tail_s(self) -> float:
        """What the client waits beyond the last token: network_s of every request."""
        return self.one_way_s + self.bytes_per_token / self.bandwidth_bytes_per_s


@dataclass(frozen=True)
class Deployment:
    name: str
    model: ModelSpec
    gpu: GpuSpec
    tp: int
    weight_dtype: str
    kv_dtype: str
    replicas: int
    scheduler: Scheduler
    efficiency: Efficiency
    network: Network
    price_provider: str
    price_plan: str
    stack: str = "current"

    # ---- sizing -------------------------------------------------------------------------
    @property
    def gpus_per_replica(self) -> int:
        return self.tp

    @property
    def _expert_split_params(self) -> tuple[float, float]:
        """(shared, all-experts) parameter counts, in parameters."""
        m = self.model
        total, active = m.total_params_b * 1e9, m.active_params_b * 1e9
        if m.experts <= 1 or m.experts == m.experts_per_token:
            return total, 0.0
        per_expert = (total - active) / (m.experts - m.experts_per_token)
        return total - m.experts * per_expert, m.experts * per_expert

    @property
    def replicated_params(self) -> float:
        """Parameters every GPU of the group holds whole (module docstring, weights): MLA's
        down-projections to the query and KV latents, hidden * (q_lora_rank + kv_lora_rank +
        qk_rope_head_dim) per layer; a model without a query latent (q_lora_rank empty, as in
        DeepSeek-V2-Lite) has only the KV one."""
        m = self.model
        if m.attention != "MLA":
            return 0.0
        latent = (m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim
        return float(m.layers * m.hidden_size * latent)

    @property
    def vocab_params(self) -> tuple[float, float]:
        """(embedding table, LM head) parameters, both inside the total and active counts
        (module docstring, weights); a tied model's one matrix is its LM head."""
        m = self.model
        if not m.vocab_size:
            return 0.0, 0.0
        matrix = float(m.vocab_size * m.hidden_size)
        return (0.0 if m.tied_embeddings else matrix), matrix

    def _per_gpu_params(self, params: float) -> float:
        """One GPU's share of `params` transformer-block parameters that include all the
        replicated ones."""
        return (params - self.replicated_params) / self.tp + self.replicated_params

    def _held_bytes(self, params: float) -> float:
        """Bytes one GPU holds of `params` parameters, a count that includes both vocabulary
        matrices (the model's total, or a MoE's shared part): its share of the transformer
        blocks at the weight dtype *plus* its share of the embedding table and LM head at
        VOCAB_BYTES (16-bit whatever the weight dtype), not the blocks alone."""
        vocab = sum(self.vocab_params)
        return (self._per_gpu_params(params - vocab) * DTYPE_BYTES[self.weight_dtype]
                + vocab / self.tp * VOCAB_BYTES)

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Bytes of weights one GPU holds (the embedding table included)."""
        return self._held_bytes(self.model.total_params_b * 1e9)

    @property
    def embedding_bytes_per_gpu(self) -> float:
        """Bytes of one GPU's share of the embedding table: held, but looked up row by row,
        so no step reads it whole."""
        return self.vocab_params[0] / self.tp * VOCAB_BYTES

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes per token per GPU."""
        m, kv = self.model, DTYPE_BYTES[self.kv_dtype]
        if m.attention == "MLA":
            return m.layers * (m.kv_lora_rank + m.qk_rope_head_dim) * kv
        return 2.0 * m.layers * math.ceil(m.kv_heads / self.tp) * m.head_dim * kv

    @property
    def flops_per_token(self) -> float:
        """GEMM FLOPs per token per GPU of the transformer blocks (F_tok): not the embedding
        lookup, which does none, nor the LM head, which runs once per sequence of a step
        (flops_per_sequence)."""
        embedding, head = self.vocab_params
        return 2.0 * self._per_gpu_params(self.model.active_params_b * 1e9 - embedding - head)

    @property
    def flops_per_sequence(self) -> float:
        """The LM head's FLOPs per GPU for one sequence of a step, its last position there
        (F_seq, step.py), counted at the weight GEMMs' peak (its bf16 FLOPs scaled by that peak
        over bf16's), so that F_seq / P_eff is their time."""
        head = self.vocab_params[1]
        return 2.0 * head / self.tp * self.gpu.peak_tflops / self.gpu.bf16_peak_tflops

    @property
    def attn_flops_per_pair(self) -> float:
        m = self.model
        qk_dim = m.head_dim + (m.qk_rope_head_dim if m.attention == "MLA" else 0)
        return 2.0 * m.layers * m.q_heads * (qk_dim + m.head_dim) / self.tp

    @property
    def effective_flops(self) -> float:
        return self.gpu.peak_tflops * 1e12 * self.efficiency.compute_efficiency

    @property
    def attention_effective_flops(self) -> float:
        return self.gpu.attention_peak_tflops * 1e12 * self.efficiency.compute_efficiency

    @property
    def effective_bandwidth(self) -> float:
        return self.gpu.hbm_bandwidth_gbs * 1e9 * self.efficiency.bandwidth_efficiency

    @property
    def activation_bytes_per_gpu(self) -> float:
        m = self.model
        per_token = (4.0 * m.hidden_size + 2.0 * m.ffn_size / self.tp) * ACTIVATION_BYTES
        return self.scheduler.max_batched_tokens * per_token

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache one replica holds, rounded down to whole blocks (may be <= 0:
        the catalog rejects such deployments)."""
        sched = self.scheduler
        memory = self.gpu.memory_gib * GIB
        loaded = self.weight_bytes_per_gpu + self.activation_bytes_per_gpu
        if sched.kv_memory_basis == "free":
            nccl = (0.0 if self.tp == 1 else TRTLLM_NCCL_BYTES_TP2 if self.tp == 2
                    else TRTLLM_NCCL_BYTES_TP4_UP)
            runtime = TRTLLM_RUNTIME_BYTES + nccl
            pool = (sched.kv_memory_fraction * (memory - loaded - runtime)
                    * (1.0 - TRTLLM_BLOCK_POOL_OVERHEAD))
        else:
            pool = memory * sched.kv_memory_fraction - loaded
        block = sched.kv_block_tokens
        return int(pool // self.kv_bytes_per_token) // block * block

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.effective_flops / self.effective_bandwidth

    @property
    def decode_compute_bound_batch(self) -> float:
        """Smallest decode batch b whose GEMMs (no KV) spend at least as long in compute-bound
        kernels as in memory-bound ones, the rule by which the replay calls a step
        compute-bound (step.step_cost). For a dense model that is where (F_tok + F_seq) * b /
        P_eff reaches W / B_eff (a decode step's b tokens are b sequences). A mixture's routed
        experts are a kernel of their own, each expert seeing only b * k / E of the tokens, so
        they turn compute-bound at ~E / k times the batch of the shared layers; until then the
        batch turns compute-bound where the shared GEMMs' time reaches the experts' read of the
        experts b tokens touch."""
        coef = self.coefficients

        def excess(b: float) -> float:
            compute_s, memory_s, _ = step.step_cost(coef, b, b, 0.0, 0.0, 0.0)
            return compute_s - memory_s

        low, high = 0.0, 1.0
        while excess(high) < 0.0:
            low, high = high, high * 2.0
        for _ in range(100):
            mid = 0.5 * (low + high)
            low, high = (mid, high) if excess(mid) < 0.0 else (low, mid)
        return high

    @property
    def coefficients(self) -> np.ndarray:
        """The float64 vector step.step_cost evaluates (indices named in step.py)."""
        shared, experts = self._expert_split_params
        wbytes = DTYPE_BYTES[self.weight_dtype]
        m, e = self.model, self.efficiency
        c = np.zeros(step.N_COEFFICIENTS)
        # read every step: the shared blocks and the LM head, not the embedding table
        c[step.SHARED_WEIGHT_BYTES] = self._held_bytes(shared) - self.embedding_bytes_per_gpu
        c[step.EXPERT_WEIGHT_BYTES] = experts / self.tp * wbytes
        c[step.EXPERTS] = m.experts
        c[step.EXPERTS_PER_TOKEN] = m.experts_per_token
        c[step.KV_BYTES_PER_TOKEN] = self.kv_bytes_per_token
        c[step.FLOPS_PER_TOKEN] = self.flops_per_token
        c[step.EXPERT_FLOPS_PER_TOKEN] = 2.0 * experts * m.experts_per_token / max(m.experts, 1) / self.tp
        c[step.FLOPS_PER_SEQUENCE] = self.flops_per_sequence
        c[step.ATTN_FLOPS_PER_PAIR] = self.attn_flops_per_pair
        c[step.EFFECTIVE_FLOPS] = self.effective_flops
        c[step.EFFECTIVE_BANDWIDTH] = self.effective_bandwidth
        c[step.ATTN_EFFECTIVE_FLOPS] = self.attention_effective_flops
        c[step.STEP_OVERHEAD_S] = e.step_overhead_s + m.layers * e.layer_overhead_s
        c[step.SEQUENCE_OVERHEAD_S] = e.sequence_overhead_s
        if self.tp > 1:
            # two all-reduces per layer, each the catalog's latency per round (all of it at
            # tp = 2) times its rounds at this tp (step.py)
            rounds = ALLREDUCE_ROUNDS[e.allreduce_rounds](float(self.tp))
            c[step.ALLREDUCE_LATENCY_S] = 2.0 * m.layers * e.allreduce_latency_s * rounds
            ring = 2.0 * (self.tp - 1) / self.tp
            c[step.ALLREDUCE_BYTES_PER_TOKEN] = 2.0 * m.layers * m.hidden_size * ACTIVATION_BYTES * ring
        # a ring step sends one way, at the bus bandwidth NCCL achieves on the group's links
        # (protocol overhead on NVLink; CPU root-complex limits on PCIe), not the line rate
        c[step.LINK_BANDWIDTH] = self.link_gbs_one_way * 1e9 * e.allreduce_bus_efficiency
        return c

    @property
    def link_gbs_one_way(self) -> float:
        """GB/s one way over the links a GPU reaches the rest of its tensor-parallel group by.
        Datasheets quote NVLink / Infinity Fabric / PCIe with both directions summed, so half. A
        switch's port (NVSwitch) or a PCIe slot carries it whole to any peer, whatever the
        group's size; a fully connected mesh's figure is the sum of one link per peer (MI300X:
        7 x 128 GB/s), and a group of tp GPUs has only the tp - 1 links to its own peers (64 GB/s
        at tp 2, all 448 only at tp 8; none at tp 1, which all-reduces nothing)."""
        one_way = self.gpu.interconnect_gbs / 2.0
        links = self.gpu.interconnect_peer_links
        return one_way if links is None else one_way * (self.tp - 1) / links

    # ---- the two questions ----------------------------------------------------------------
    def prefill_s(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        """Seconds to prefill one prompt alone on an idle replica (in chunks when chunked
        prefill is on), up to and including the step that emits the first token."""
        prompt_tokens = whole_number("prompt_tokens", prompt_tokens, 1)
        cached_tokens = whole_number("cached_tokens", cached_tokens, 0)
        if cached_tokens >= prompt_tokens:
            raise ValueError(f"cached_tokens={cached_tokens} with prompt_tokens={prompt_tokens}: expected"
                             f" fewer cached than prompt tokens (the last prompt token is always computed)")
        if prompt_tokens > self.kv_capacity_tokens:
            raise ValueError(f"prompt_tokens={prompt_tokens}: expected at most the"
                             f" {self.kv_capacity_tokens} tokens the KV cache of deployment"
                             f" {self.name!r} holds (the replay refuses such a request too)")
        coef = self.coefficients
        done, total = float(cached_tokens), float(prompt_tokens)
        budget = self.scheduler.max_batched_tokens if self.scheduler.chunked_prefill else math.inf
        seconds = 0.0
        while True:
            n = min(total - done, budget)
            compute_s, memory_s, fixed_s = step.step_cost(
                coef, n, 1.0, step.chunk_attn_pairs(done, n), done, n
            )
            seconds += max(compute_s, memory_s) + fixed_s
            done += n
            if done >= total:
                return seconds

    def prefill_batch_s(self, batch_size: int, prompt_tokens: int) -> float:
        """Seconds of one step prefilling `batch_size` prompts of `prompt_tokens` together (a
        static batch, as offline benchmarks run it)."""
        batch_size = whole_number("batch_size", batch_size, 1)
        prompt_tokens = whole_number("prompt_tokens", prompt_tokens, 1)
        tokens = float(batch_size * prompt_tokens)
        compute_s, memory_s, fixed_s = step.step_cost(
            self.coefficients, tokens, float(batch_size),
            batch_size * step.chunk_attn_pairs(0.0, float(prompt_tokens)), 0.0, tokens,
        )
        return max(compute_s, memory_s) + fixed_s

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        """Seconds of one decode step over `batch_size` sequences holding `context_tokens` KV
        tokens in total (each sequence reads its context and writes one new token; each holds
        at least one token, so the context is at least the batch). Under CUDA-graph padding
        (Scheduler.graph_batch_sizes) the GEMMs, all-reduce and per-sequence work run over the
        padded batch."""
        batch_size = whole_number("batch_size", batch_size, 1)
        context_tokens = whole_number("context_tokens", context_tokens, batch_size)
        padded = step.graph_batch(self.scheduler.graph_sizes, float(batch_size))
        compute_s, memory_s, fixed_s = step.step_cost(
            self.coefficients, padded, padded, float(context_tokens), float(context_tokens),
            float(batch_size),
        )
        return max(compute_s, memory_s) + fixed_s

    @property
    def decode_step_s_batch1_ctx1k(self) -> float:
        """A batch-1 decode step at a 1k-token context: the roofline row's figure for scale, and
        the shortest-step bound the busy balances divide the replay clock's resolution by
        (sql/replica_gpu_balance.sql, and scenario_fleets' for a what-if deployment, which has
        no roofline row): one figure for both, so the two balances bound alike."""
        return self.decode_step_s(1, 1024)

    def max_concurrency(self, prompt_tokens: int, output_tokens: int) -> int:
        """Requests of this shape that run together at full load: the KV cache must hold each
        one's whole sequence, and the scheduler caps the count at max_seqs. A sequence holds the
        KV of prompt + output - 1 tokens (the last token's is never written) in whole blocks, as
        the replay reserves it with kv_reservation "full": counted in tokens, a 500 + 2,000
        request would take 2,500 where it holds 157 blocks of 16, 2,512."""
        prompt_tokens = whole_number("prompt_tokens", prompt_tokens, 1)
        output_tokens = whole_number("output_tokens", output_tokens, 1)
        block = self.scheduler.kv_block_tokens
        per_request = -(-(prompt_tokens + output_tokens - 1) // block)
        fits = self.kv_capacity_tokens // block // per_request
        return int(min(self.scheduler.max_seqs, fits))

    def max_throughput_tok_s(self, prompt_tokens: int, output_tokens: int) -> float:
        """Output tokens per second of one replica under unbounded load of identical requests
        (formula in the module docstring)."""
        batch = self.max_concurrency(prompt_tokens, output_tokens)
        if batch < 1:
            raise ValueError(
                f"deployment {self.name!r}: a {prompt_tokens}+{output_tokens}-token request does"
                f" not fit its KV cache of {self.kv_capacity_tokens} tokens"
            )
        coef = self.coefficients
        # prefill: B prompts' tokens packed into steps of at most max_batched_tokens tokens
        budget = float(self.scheduler.max_batched_tokens)
        prefill_tokens = float(batch * prompt_tokens)
        steps = math.ceil(prefill_tokens / budget)
        per_step = prefill_tokens / steps
        pairs_per_step = batch * step.chunk_attn_pairs(0.0, float(prompt_tokens)) / steps
        # each step's sequences (one LM-head row each): the B prompts cut into `steps` equal runs
        # of tokens, a prompt split across a step boundary counting twice. Boundary k (of
        # steps - 1) falls between two prompts when k * B / steps is whole, which it is for
        # gcd(B, steps) - 1 of them, so the pieces are B + steps - gcd(B, steps)
        sequences_per_step = (batch + steps - math.gcd(batch, steps)) / steps
        compute_s, memory_s, fixed_s = step.step_cost(coef, per_step, sequences_per_step,
                                                      pairs_per_step, 0.0, per_step)
        seconds = steps * (max(compute_s, memory_s) + fixed_s)
        # decode: the prefill emitted each request's first token; output - 1 steps over the whole
        # batch make the rest, step j (1..output - 1) reading the prompt + j - 1 tokens whose KV
        # is cached and writing token j's (the replay's decode), summed at the midpoints of up to
        # 16 equal runs of steps
        decode_steps = output_tokens - 1
        samples = min(decode_steps, 16)
        for i in range(samples):
            context = prompt_tokens - 0.5 + (i + 0.5) * decode_steps / samples
            seconds += decode_steps / samples * self.decode_step_s(batch, int(batch * context))
        return batch * output_tokens / seconds

    def as_row(self) -> dict:
        """The `roofline` table row: every coefficient the replay uses, readable in SQL, and the
        physics caveats of this class of deployment (caveats.py; one per line, empty where none
        applies)."""
        return {
            "deployment": self.name,
            "model": self.model.model,
            "gpu": self.gpu.gpu,
            "stack": self.stack,
            "tp": self.tp,
            "gpus_per_replica": self.gpus_per_replica,
            "replicas": self.replicas,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
            # what a step reads of them (W(tokens), step.py): not the held embedding table
            "shared_weight_bytes_read_per_gpu": float(self.coefficients[step.SHARED_WEIGHT_BYTES]),
            "expert_weight_bytes_per_gpu": float(self.coefficients[step.EXPERT_WEIGHT_BYTES]),
            "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token,
            "flops_per_token_per_gpu": self.flops_per_token,
            "expert_flops_per_token_per_gpu": float(self.coefficients[step.EXPERT_FLOPS_PER_TOKEN]),
            "lm_head_flops_per_sequence_per_gpu": self.flops_per_sequence,
            "attn_flops_per_pair_per_gpu": self.attn_flops_per_pair,
            "gemm_dtype": self.gpu.gemm_dtype,
            "peak_tflops": self.gpu.peak_tflops,
            "effective_tflops": self.effective_flops / 1e12,
            "attention_effective_tflops": self.attention_effective_flops / 1e12,
            "memory_gib": self.gpu.memory_gib,
            "hbm_bandwidth_gbs": self.gpu.hbm_bandwidth_gbs,
            "effective_bandwidth_gbs": self.effective_bandwidth / 1e9,
            **asdict(self.efficiency),
            "fixed_step_s": float(self.coefficients[step.STEP_OVERHEAD_S]),
            "allreduce_s_per_step": float(self.coefficients[step.ALLREDUCE_LATENCY_S]),
            "allreduce_bytes_per_token": float(self.coefficients[step.ALLREDUCE_BYTES_PER_TOKEN]),
            "link_gbs_one_way": self.link_gbs_one_way,
            "allreduce_busbw_gbs": float(self.coefficients[step.LINK_BANDWIDTH]) / 1e9,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "ridge_flops_per_byte": self.ridge_flops_per_byte,
            "decode_compute_bound_batch": self.decode_compute_bound_batch,
            "decode_step_s_batch1_ctx1k": self.decode_step_s_batch1_ctx1k,
            "prefill_s_1k": self.prefill_s(1024) if self.kv_capacity_tokens >= 1024 else None,
            **asdict(self.scheduler),
            # a list in SQL terms, written out: "" where the engine pads to no graph sizes
            "graph_batch_sizes": ",".join(map(str, self.scheduler.graph_batch_sizes)),
            "net_one_way_s": self.network.one_way_s,
            "net_tail_s": self.network.tail_s,
            "price_provider": self.price_provider,
            "price_plan": self.price_plan,
            "caveat": caveat_column(self),
        }
