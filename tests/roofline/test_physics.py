"""The physics added on top of the plain roofline: MLA FLOPs, attention precision, ring
all-reduce, MoE ridge, max-load throughput, parallelism and memory errors, serving stacks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from pipelines.replay import replay
from pipelines.roofline import CatalogError, load_catalog
from pipelines.roofline import step
from pipelines.roofline.catalog import valid_tensor_parallel
from pipelines.roofline.deployment import ALLREDUCE_ROUNDS


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_mla_attention_flops_use_the_expanded_query_key_dims(catalog):
    d = catalog.build(model="deepseek-v3", gpu="h200-sxm", tp=8, weights="fp8")
    # QK^T over 128 + 64 dims and AV over 128, 2 FLOPs per multiply-add, 128 heads, 61 layers
    assert d.attn_flops_per_pair == pytest.approx(2 * 61 * 128 * (128 + 64 + 128) / 8)
    gqa = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    assert gqa.attn_flops_per_pair == pytest.approx(4 * 80 * 64 * 128 / 4)


def test_attention_runs_in_the_kv_dtype_not_the_weight_dtype(catalog):
    fp4 = catalog.build(model="llama-3.1-70b", gpu="b200", weights="fp4", kv_cache="fp8")
    assert fp4.gpu.peak_tflops == 9000 and fp4.gpu.attention_peak_tflops == 4500
    bf16_kv = catalog.build(model="llama-3.1-70b", gpu="b200", weights="fp4", kv_cache="bf16")
    assert bf16_kv.gpu.attention_peak_tflops == 2250
    # A100 has no fp8 tensor cores: an fp8 KV cache still attends in bf16
    a100 = catalog.build(model="llama-3.1-8b", gpu="a100-80gb-sxm", kv_cache="fp8")
    assert a100.gpu.attention_peak_tflops == 312
    # an fp4 (NVFP4) KV cache is dequantized to fp8 and attends at the fp8 peak; an int8 one at
    # the bf16 peak, though the GPU has int8 tensor cores (docs/physics.md, P_attn)
    fp4_kv = catalog.build(model="llama-3.1-70b", gpu="b200", weights="fp4", kv_cache="fp4")
    assert fp4_kv.gpu.attention_peak_tflops == 4500
    int8_kv = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", kv_cache="int8")
    assert int8_kv.gpu.attention_peak_tflops == 989.5


def test_fp4_weights_and_kv_count_their_block_scales(catalog):
    """NVFP4 stores one FP8 scale per 16 four-bit values: 4.5 bits a value, not 4, in the weights
    read and held and in an fp4 KV cache (an fp8 one has no per-block scale worth counting)."""
    fp4 = catalog.build(model="llama-3.1-70b", gpu="b200", tp=2, weights="fp4", kv_cache="fp4")
    fp8 = catalog.build(model="llama-3.1-70b", gpu="b200", tp=2, weights="fp8", kv_cache="fp8")
    vocab = sum(fp8.vocab_params) / 2 * 2.0  # the 16-bit embedding table and LM head
    assert fp4.weight_bytes_per_gpu - vocab == pytest.approx(
        (fp8.weight_bytes_per_gpu - vocab) * 4.5 / 8)
    assert fp4.kv_bytes_per_token == pytest.approx(fp8.kv_bytes_per_token * 4.5 / 8)


def test_vocabulary_matrices_are_16_bit_and_the_embedding_is_a_lookup(catalog):
    """The embedding table and the LM head (vocab_size x hidden each) are not transformer-block
    weights: fp8 / fp4 checkpoints keep them 16-bit (ModelOpt quantizes "only the linear
    operators within transformers blocks"), so they are held at 2 B a value whatever the weight
    dtype. The LM head is a GEMM read whole every step, its FLOPs at the bf16 peak, once per
    sequence of the step (logits only where a token may be sampled), not per token; the
    embedding is a row lookup: held, never read whole, no FLOPs. A tied model's one matrix is
    its LM head."""
    vocab = 128256 * 4096
    bf16 = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="bf16")
    assert bf16.vocab_params == (vocab, vocab)
    assert bf16.weight_bytes_per_gpu == pytest.approx(8.03e9 * 2)
    assert bf16.coefficients[step.SHARED_WEIGHT_BYTES] == pytest.approx((8.03e9 - vocab) * 2)
    assert bf16.flops_per_token == pytest.approx(2 * (8.03e9 - 2 * vocab))
    assert bf16.flops_per_sequence == pytest.approx(2 * vocab)
    # a 1,024-token prefill chunk of one prompt: the blocks for every token, the head once (the
    # weight read made free, so that the GEMM time is its compute alone)
    coef = bf16.coefficients.copy()
    coef[step.EFFECTIVE_BANDWIDTH] = 1e30
    chunk, _, _ = step.step_cost(coef, 1024.0, 1.0, 0.0, 0.0, 0.0)
    assert chunk == pytest.approx((1024 * 2 * (8.03e9 - 2 * vocab) + 2 * vocab)
                                  / bf16.effective_flops)
    fp8 = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8")
    blocks = 8.03e9 - 2 * vocab
    assert fp8.weight_bytes_per_gpu == pytest.approx(blocks + 2 * vocab * 2)
    assert fp8.coefficients[step.SHARED_WEIGHT_BYTES] == pytest.approx(blocks + vocab * 2)
    # the head's bf16 GEMM at half the fp8 peak (989.5 of 1978.9 TFLOPS): twice its FLOPs in
    # fp8 time
    assert fp8.flops_per_token == pytest.approx(2 * blocks)
    assert fp8.flops_per_sequence == pytest.approx(2 * vocab * 1978.9 / 989.5)
    tp2 = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", tp=2, weights="fp8")
    assert tp2.coefficients[step.SHARED_WEIGHT_BYTES] == pytest.approx((blocks + vocab * 2) / 2)
    tied = catalog.build(model="llama-3.2-1b", gpu="rtx-4090")
    assert tied.vocab_params == (0.0, 128256 * 2048)
    assert tied.coefficients[step.SHARED_WEIGHT_BYTES] == pytest.approx(tied.weight_bytes_per_gpu)


def test_mla_latent_projections_are_replicated_not_split(catalog):
    """Every GPU of a DeepSeek-V3 group holds the whole down-projections to the query and KV
    latents (7168 x (1536 + 512 + 64) per layer, vLLM's and SGLang's ReplicatedLinear): they are
    read and computed in full on each GPU, the rest 1/tp. Dense GQA models replicate nothing."""
    tp8 = catalog.build(model="deepseek-v3", gpu="b200", tp=8, weights="fp8", kv_cache="fp8")
    replicated = 61 * 7168 * (1536 + 512 + 64)
    vocab = 129280 * 7168  # the embedding table and the LM head, 16-bit, split by tp
    assert tp8.replicated_params == replicated
    assert tp8.weight_bytes_per_gpu == pytest.approx(
        (671e9 - 2 * vocab - replicated) / 8 + replicated + 2 * vocab / 8 * 2)
    assert tp8.flops_per_token == pytest.approx(
        2 * ((37e9 - 2 * vocab - replicated) / 8 + replicated))
    # the LM head's bf16 GEMM at half the fp8 peak: twice its FLOPs in fp8 time
    assert tp8.flops_per_sequence == pytest.approx(2 * vocab / 8 * 2)
    assert tp8.coefficients[step.SHARED_WEIGHT_BYTES] + tp8.coefficients[
        step.EXPERT_WEIGHT_BYTES] == pytest.approx(
            tp8.weight_bytes_per_gpu - tp8.embedding_bytes_per_gpu)
    dense = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=8, weights="fp8")
    assert dense.replicated_params == 0
    vocab = 128256 * 8192
    assert dense.weight_bytes_per_gpu == pytest.approx((70.6e9 - 2 * vocab) / 8 + 2 * vocab / 8 * 2)



def test_the_documents_state_what_the_replicated_latents_add_at_tp8(catalog):
    """docs/physics.md section 2 gives what MLA's replicated down-projections add at tp 8 (GB of
    fp8 weights a step reads, share of a prefill token's GEMM FLOPs) against the model with them
    split like every other weight; the base is F_tok as the code has it, the active parameters
    less the two 16-bit vocabulary matrices (the doc had said 17%, of 2 x 37 B / 8, the base
    before they came out)."""
    tp8 = catalog.build(model="deepseek-v3", gpu="h200-sxm", tp=8, weights="fp8", kv_cache="fp8")
    split = replace(tp8.model, attention="GQA")   # no replicated parameters: all split 1/tp
    flat = replace(tp8, model=split)
    assert flat.replicated_params == 0
    added_gb = (tp8.coefficients[step.SHARED_WEIGHT_BYTES]
                - flat.coefficients[step.SHARED_WEIGHT_BYTES]) / 1e9
    added_share = tp8.flops_per_token / flat.flops_per_token - 1
    physics = " ".join((Path(__file__).parents[2] / "docs" / "physics.md").read_text().split())
    assert (f"At tp 8 they add {added_gb:.2f} GB of FP8 weights to each GPU's step and"
            f" {100 * added_share:.0f}% to a DeepSeek-V3 prefill token's FLOPs on each GPU") in physics

def test_weights_without_tensor_cores_are_served_weight_only(catalog):
    """fp8 weights on an A100 (no fp8 tensor cores) run as vLLM's W8A16 Marlin: half the weight
    bytes of bf16, the GEMMs at the bf16 peak. So a batch-1 decode step (weight reads) is nearly
    twice as fast as bf16, while a long prefill (compute) is no faster. An MI300X has no
    weight-only fp4 kernel (Marlin is CUDA) and says so."""
    bf16 = catalog.build(model="llama-3.1-8b", gpu="a100-80gb-sxm", kv_cache="bf16")
    fp8 = catalog.build(model="llama-3.1-8b", gpu="a100-80gb-sxm", weights="fp8", kv_cache="bf16")
    assert (fp8.gpu.gemm_dtype, fp8.gpu.peak_tflops) == ("bf16", bf16.gpu.peak_tflops)
    vocab = sum(bf16.vocab_params) * 2.0  # the embedding table and LM head stay 16-bit
    assert fp8.weight_bytes_per_gpu - vocab == pytest.approx((bf16.weight_bytes_per_gpu - vocab) / 2)
    assert 1.6 < bf16.decode_step_s(1, 1024) / fp8.decode_step_s(1, 1024) < 2.0
    assert fp8.prefill_s(8192) == pytest.approx(bf16.prefill_s(8192), rel=0.02)
    assert fp8.as_row()["gemm_dtype"] == "bf16"
    native = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8")
    assert (native.gpu.gemm_dtype, native.gpu.peak_tflops) == ("fp8", 1978.9)
    with pytest.raises(CatalogError, match="'mi300x' has no fp4 tensor throughput and no weight-only"
                                           r" fp4 kernel in .*gpus.csv; expected weights of bf16,"
                                           r" fp16, fp8, int8$"):
        catalog.build(model="llama-3.1-8b", gpu="mi300x", weights="fp4")


def test_allreduce_latency_grows_with_the_rounds_of_the_fabric(catalog):
    """On NVSwitch every GPU reaches every peer at once: ceil(log2(tp)) rounds (1, 2, 3 at tp
    2, 4, 8). Over PCIe, and on the 2023 stack, a ring: tp - 1 rounds (1, 3, 7)."""
    def per_step(gpu, tp, **options):
        return catalog.build(model="llama-3.1-70b", gpu=gpu, tp=tp, weights="fp8",
                             **options).coefficients[step.ALLREDUCE_LATENCY_S]

    single = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", tp=1)
    assert single.coefficients[step.ALLREDUCE_LATENCY_S] == 0.0
    switched = {tp: per_step("h100-sxm", tp) for tp in (2, 4, 8)}
    assert switched[2] == pytest.approx(2 * 80 * 12e-6)
    assert switched[4] == pytest.approx(2 * switched[2]) and switched[8] == pytest.approx(3 * switched[2])
    # recursive doubling over 5 or 6 GPUs takes as many rounds as over 8
    assert ALLREDUCE_ROUNDS["log2"](5.0) == ALLREDUCE_ROUNDS["log2"](6.0) == 3.0
    for gpu, options in (("l40s", {}), ("h100-sxm", {"stack": "vllm-2023"})):
        ring = {tp: per_step(gpu, tp, **options) for tp in (2, 4, 8)}
        assert ring[4] == pytest.approx(3 * ring[2]) and ring[8] == pytest.approx(7 * ring[2])
    d = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=2)
    # 900 GB/s both ways; NCCL reaches 370 of the 450 GB/s one way (protocol overhead)
    assert d.coefficients[step.LINK_BANDWIDTH] == pytest.approx(450e9 * 0.82)


def test_a_mesh_gpu_all_reduces_over_the_links_to_its_group_only(catalog):
    """MI300X's 896 GB/s is 7 Infinity Fabric links of 128 GB/s (64 each way), one to each peer
    of a fully connected 8-GPU mesh (gpus.csv interconnect_peer_links): a tensor-parallel group
    of tp GPUs sends over the tp - 1 links to its peers, 64 GB/s one way at tp 2, not the 448 of
    all seven (7x / 2.3x too little all-reduce byte time at tp 2 / 4 before). A switch's GPU
    (NVSwitch H100) reaches it at its full rate whatever the group's size."""
    for tp, links in ((2, 1), (4, 3), (8, 7)):
        d = catalog.build(model="llama-3.1-70b", gpu="mi300x", tp=tp, weights="fp8")
        bus = d.efficiency.allreduce_bus_efficiency
        assert d.coefficients[step.LINK_BANDWIDTH] == pytest.approx(64e9 * links * bus)
        row = d.as_row()
        assert row["link_gbs_one_way"] == pytest.approx(64 * links)
        assert row["allreduce_busbw_gbs"] == pytest.approx(64 * links * bus)
    # a single GPU has no peer in its group: none of the mesh's links is its group's
    single = catalog.build(model="llama-3.1-8b", gpu="mi300x", tp=1)
    assert single.as_row()["link_gbs_one_way"] == 0.0
    for tp in (1, 2, 4, 8):
        d = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=tp, weights="fp8")
        assert d.coefficients[step.LINK_BANDWIDTH] == pytest.approx(450e9 * 0.82)
        assert d.as_row()["link_gbs_one_way"] == 450.0


def test_the_documents_state_what_the_mesh_links_move(catalog):
    """docs/physics.md section 4 gives Llama-3.1-70B FP8 on 2 x MI300X before (all seven links
    at every tp: the GPU taken as a switch's) and after the mesh's tp - 1 links."""
    mesh = catalog.build(model="llama-3.1-70b", gpu="mi300x", tp=2, weights="fp8")
    whole = replace(mesh, gpu=replace(mesh.gpu, interconnect_peer_links=None))
    context = 256 * 2048
    physics = " ".join((Path(__file__).parents[2] / "docs" / "physics.md").read_text().split())
    assert (f"prefilled 8,192 tokens in {whole.prefill_s(8192):.3f} s (now"
            f" {mesh.prefill_s(8192):.2f} s) and took {1e3 * whole.decode_step_s(256, context):.1f} ms"
            f" (now {1e3 * mesh.decode_step_s(256, context):.1f} ms) for a decode step of 256"
            f" sequences holding 2,048 tokens each") in physics


def test_a_pcie_card_of_an_nvlink_family_all_reduces_over_pcie(catalog):
    """The A10 is an Ampere chip on PCIe Gen4 x16, with no NVLink: its all-reduce is the PCIe
    Ada cards' (ring rounds of 6 us, 0.55 of the line rate), not the NVSwitch A100's (log2 rounds
    of 12 us, 0.82) that its family row describes; its compute factors stay the A100's."""
    a10 = {tp: catalog.build(model="deepseek-coder-6.7b", gpu="a10", tp=tp) for tp in (2, 4)}
    l4 = {tp: catalog.build(model="deepseek-coder-6.7b", gpu="l4", tp=tp) for tp in (2, 4)}
    for tp in (2, 4):
        assert a10[tp].coefficients[step.ALLREDUCE_LATENCY_S] == pytest.approx(
            l4[tp].coefficients[step.ALLREDUCE_LATENCY_S])
        assert a10[tp].coefficients[step.LINK_BANDWIDTH] == pytest.approx(32e9 * 0.55)
    a100 = catalog.build(model="deepseek-coder-6.7b", gpu="a100-80gb-sxm", tp=2).efficiency
    assert a10[2].efficiency.compute_efficiency == a100.compute_efficiency
    assert a10[2].efficiency.bandwidth_efficiency == a100.bandwidth_efficiency
    assert a10[2].efficiency.allreduce_rounds == "ring" != a100.allreduce_rounds


def test_gemm_roofline_is_softened_where_compute_and_weight_reads_meet(catalog):
    """A GEMM whose compute and weight-read times are equal takes 2^(1/3) = 1.26 x either;
    far from the ridge the hard roofline holds within a percent."""
    d = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=2, weights="fp8")
    coef = d.coefficients

    def gemm(tokens):
        compute_s, memory_s, _ = step.step_cost(coef, tokens, tokens, 0.0, 0.0, 0.0)  # a decode
        per_token = d.flops_per_token + d.flops_per_sequence
        return max(compute_s, memory_s), tokens * per_token / d.effective_flops, \
            step.weight_bytes(coef, tokens) / d.effective_bandwidth

    ridge = d.decode_compute_bound_batch
    at_ridge, compute_s, memory_s = gemm(ridge)
    assert compute_s == pytest.approx(memory_s)
    assert at_ridge == pytest.approx(2 ** (1 / 3) * memory_s)
    for tokens in (ridge / 4, ridge * 4):
        time_s, compute_s, memory_s = gemm(tokens)
        assert max(compute_s, memory_s) < time_s < 1.01 * max(compute_s, memory_s)


def test_pcie_allreduce_runs_at_the_achieved_bus_bandwidth(catalog):
    """Without NVLink the ring runs over PCIe through the CPU root complex: 0.55 of the 32 GB/s
    one-way Gen4 rate, and its all-reduce bytes dominate a 70B step on 4 x L40S."""
    d = catalog.build(model="llama-3.1-70b", gpu="l40s", tp=4, weights="fp8", kv_cache="fp8")
    coef = d.coefficients
    assert coef[step.LINK_BANDWIDTH] == pytest.approx(32e9 * 0.55)
    per_token_allreduce = coef[step.ALLREDUCE_BYTES_PER_TOKEN] / coef[step.LINK_BANDWIDTH]
    per_token_gemm = coef[step.FLOPS_PER_TOKEN] / coef[step.EFFECTIVE_FLOPS]
    assert per_token_allreduce > 2 * per_token_gemm


@pytest.mark.parametrize(("model", "options", "partial"), [
    ("mixtral-8x7b", {"tp": 2}, False),
    ("deepseek-v3", {"tp": 8, "weights": "fp8", "compute_efficiency": 0.01}, True),
])
def test_moe_compute_bound_batch_counts_only_touched_experts(catalog, model, options, partial):
    """A mixture's routed experts are a kernel of their own (step.step_cost), so a decode step
    turns compute-bound where the experts' FLOPs take as long as reading the experts the batch
    touches; the shared layers cross long before (at k / E of that batch when every expert is
    touched). With real factors that batch touches every expert; with a ridge point of a few
    FLOPs per byte (compute efficiency forced to 1%) DeepSeek-V3's crossing comes at ~90 tokens,
    which touch only part of its 256 experts, so it comes earlier than the all-experts
    estimate."""
    d = catalog.build(model=model, gpu="h200-sxm", **options)
    b = d.decode_compute_bound_batch
    coef = d.coefficients
    expert_flops = coef[step.EXPERT_FLOPS_PER_TOKEN]
    shared = coef[step.SHARED_WEIGHT_BYTES]
    assert b * expert_flops / d.effective_flops == pytest.approx(
        (step.weight_bytes(coef, b) - shared) / d.effective_bandwidth, rel=1e-6)
    shared_flops = d.flops_per_token - expert_flops + d.flops_per_sequence  # a token a sequence
    assert b > 2 * d.ridge_flops_per_byte * shared / shared_flops
    all_experts = d.ridge_flops_per_byte * coef[step.EXPERT_WEIGHT_BYTES] / expert_flops
    if partial:
        assert b < 0.95 * all_experts
    else:
        m = d.model
        assert b == pytest.approx(all_experts, rel=1e-6)
        assert b == pytest.approx(m.experts / m.experts_per_token * d.ridge_flops_per_byte
                                  * shared / shared_flops, rel=1e-6)


def test_moe_shared_layers_and_experts_are_separate_rooflines(catalog):
    """Between the shared layers' crossing and the experts' the shared GEMMs are compute-bound
    and the experts memory-bound; one roofline over their sums would let the first hide under
    the second's weight read (as GEMMs and attention, docs/physics.md section 1). DeepSeek-V3 on
    8 x H200 at 2,048 sequences: the step's GEMMs take the two kernels' times added."""
    d = catalog.build(model="deepseek-v3", gpu="h200-sxm", tp=8, weights="fp8", kv_cache="fp8")
    coef = d.coefficients
    b = 2048.0
    expert_compute = coef[step.EXPERT_FLOPS_PER_TOKEN] * b / d.effective_flops
    shared_compute = step.gemm_flops(coef, b, b) / d.effective_flops - expert_compute
    shared_memory = coef[step.SHARED_WEIGHT_BYTES] / d.effective_bandwidth
    expert_memory = step.weight_bytes(coef, b) / d.effective_bandwidth - shared_memory
    assert shared_compute > 3 * shared_memory and expert_memory > 1.5 * expert_compute
    compute_s, memory_s, _ = step.step_cost(coef, b, b, 0.0, 0.0, 0.0)
    separate = (step.gemm_seconds(shared_compute, shared_memory)
                + step.gemm_seconds(expert_compute, expert_memory))
    assert max(compute_s, memory_s) == pytest.approx(separate, rel=1e-12)
    one_roofline = step.gemm_seconds(shared_compute + expert_compute, shared_memory + expert_memory)
    assert separate > 1.15 * one_roofline
    # the memory-bound experts hold most of the GEMMs' time, so the step is memory-bound, and
    # the shared layers' compute-bound time is the smaller side
    assert memory_s == max(compute_s, memory_s)
    assert compute_s == pytest.approx(step.gemm_seconds(shared_compute, shared_memory), rel=1e-12)


def test_the_documents_state_the_moe_compute_bound_batches(catalog):
    """docs/physics.md sections 1 and 3 give where a mixture's shared layers and its routed
    experts turn compute-bound, the latter being decode_compute_bound_batch (section 3 had kept
    the definition of one roofline over all the GEMMs, which put DeepSeek-V3's at 2,489)."""
    physics = " ".join((Path(__file__).parents[2] / "docs" / "physics.md").read_text().split())
    figures = []
    for options in ({"model": "deepseek-v3", "gpu": "h200-sxm", "tp": 8, "weights": "fp8",
                     "kv_cache": "fp8"},
                    {"model": "mixtral-8x7b", "gpu": "h100-sxm", "tp": 2}):
        d = catalog.build(**options)
        coef = d.coefficients
        shared_flops = (d.flops_per_token - coef[step.EXPERT_FLOPS_PER_TOKEN]
                        + d.flops_per_sequence)   # a decode token is a sequence
        shared = d.ridge_flops_per_byte * coef[step.SHARED_WEIGHT_BYTES] / shared_flops
        figures.append((f"{d.decode_compute_bound_batch:,.0f}", f"{shared:,.0f}"))
    (v3_experts, v3_shared), (mixtral_experts, mixtral_shared) = figures
    assert f"DeepSeek-V3 on 8 × H200 fp8: {v3_shared} and {v3_experts} sequences" in physics
    assert (f"(DeepSeek-V3 on 8 × H200 fp8: {v3_experts} sequences, its shared layers"
            f" {v3_shared}; Mixtral-8x7B on 2 × H100: {mixtral_experts} and {mixtral_shared})"
            in physics)
    assert "the smallest b with (F_tok + F_seq) × b / P_eff ≥ W(b) / B_eff" not in physics


def test_max_throughput_is_batched_and_bounded_by_kv(catalog):
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", max_seqs=2048)
    batch = d.max_concurrency(128, 2048)
    assert batch == d.kv_capacity_tokens // (128 + 2048)
    lone = 1.0 / d.decode_step_s(1, 1000)
    assert d.max_throughput_tok_s(128, 2048) > 50 * lone
    # long prompts cost prefill FLOPs: fewer output tokens per second
    assert d.max_throughput_tok_s(2048, 128) < d.max_throughput_tok_s(128, 128)
    capped = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", max_seqs=8)
    assert capped.max_concurrency(128, 128) == 8


def test_max_concurrency_is_what_the_replay_admits_at_once(catalog):
    """The formula's batch is the replay's with the whole sequence reserved (kv_reservation
    "full"): prompt + output - 1 tokens a sequence, in whole KV blocks. On one L4 (37,648 tokens,
    2,353 blocks) a 500 + 2,000 request holds 157 blocks, so 14 run together; counted as 2,500
    tokens it was 15, one the replay never admits."""
    d = catalog.build(model="llama-3.1-8b", gpu="l4", kv_reservation="full")
    burst = replay(pl.DataFrame({"arrival_s": [0.0] * 20, "prompt_tokens": [500] * 20,
                                 "output_tokens": [2000] * 20}), d)
    assert d.max_concurrency(500, 2000) == (burst["admitted_s"] == 0.0).sum() == 14


def test_max_throughput_decodes_output_minus_one_steps(catalog):
    """The last prefill step emits each request's first token (prefill_s, the replay), so a
    request of `output` tokens takes output - 1 decode steps, step j reading the prompt + j - 1
    tokens already cached, as the replay's decode does: with two output tokens a generation is
    the batch's prefill and one decode step over the prompts (it read prompt + 1 per sequence
    until 2026-12-02, one token more than the replay)."""
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", max_seqs=64,
                      max_batched_tokens=64 * 128)
    prefill = d.prefill_batch_s(64, 128)  # one step of 64 prompts of 128 tokens
    decode = d.decode_step_s(64, 64 * 128)
    assert d.max_throughput_tok_s(128, 2) == pytest.approx(64 * 2 / (prefill + decode),
                                                           rel=1e-12)
    # the replay's one decode step of a lone 128 + 2 request is the same step over one sequence
    lone = replay(pl.DataFrame({"arrival_s": [0.0], "prompt_tokens": [128], "output_tokens": [2]}),
                  d)
    assert lone["decode_s"][0] == pytest.approx(d.decode_step_s(1, 128), rel=1e-12)
    # with a single output token there is no decode step at all
    assert d.max_throughput_tok_s(128, 1) == pytest.approx(64 / prefill)


def test_max_throughput_prefill_steps_of_whole_prompts_pay_one_head_row_each(catalog):
    """The LM head runs once per sequence of a step (F_seq): 64 prompts of 128 tokens in steps
    of 32 x 128 tokens are two steps of 32 whole prompts, 32 head rows each, as two static
    batches of 32. The analytic prefill counted B + steps - 1 pieces, as if every step boundary
    cut a prompt in two: 32.5 rows a step."""
    d = catalog.build(model="llama-3.2-1b", gpu="h100-sxm", max_seqs=64,
                      max_batched_tokens=32 * 128)
    assert d.max_throughput_tok_s(128, 1) == pytest.approx(64 / (2 * d.prefill_batch_s(32, 128)),
                                                           rel=1e-12)


def test_request_larger_than_the_kv_cache_is_refused(catalog):
    d = catalog.build(model="llama-3.1-8b", gpu="l4")
    with pytest.raises(ValueError, match="does not fit"):
        d.max_throughput_tok_s(d.kv_capacity_tokens, 10)


@pytest.mark.parametrize(("model", "tp", "named"), [
    ("llama-3.1-70b", 3, "valid tp: 1, 2, 4, 8"),
    ("llama-3.1-8b", 5, "32 query heads, 8 KV heads"),
    ("deepseek-v3", 6, "valid tp: 1, 2, 4, 8"),
])
def test_uneven_tensor_parallelism_names_valid_degrees(catalog, model, tp, named):
    with pytest.raises(CatalogError) as info:
        catalog.build(model=model, gpu="h100-sxm", tp=tp)
    assert f"tp={tp}" in str(info.value) and named in str(info.value)



@pytest.mark.parametrize("tp", [16, 0])
def test_tensor_parallelism_out_of_range_names_the_model_s_valid_degrees(catalog, tp):
    """A tp outside one node's [1, 8] said only the range, so a user who asked for 16 tried 6
    next and met a second refusal: the message names the degrees that split the model, as an
    uneven tp's does."""
    with pytest.raises(CatalogError, match=rf"tp={tp}: expected a whole number in \[1, 8\];"
                                           rf" valid tp for llama-3.1-70b: 1, 2, 4, 8$"):
        catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=tp)

def test_valid_tensor_parallel_allows_replicated_kv_heads(catalog):
    llama1b = catalog.models.filter(catalog.models["model"] == "llama-3.2-1b").row(0, named=True)
    assert valid_tensor_parallel(llama1b, 16) == [1, 2, 4, 8, 16]


def test_tp_must_split_the_ffn_as_well_as_the_heads(catalog):
    """Llama-2-13B's 40 heads split five ways, its 13824-wide FFN does not: vLLM's
    MergedColumnParallelLinear asserts every output size divisible by tp, so no engine serves it
    at tp 5 (nor does one split a mixture's per-expert FFN unevenly)."""
    llama13b = catalog.models.filter(catalog.models["model"] == "llama-2-13b").row(0, named=True)
    assert valid_tensor_parallel(llama13b) == [1, 2, 4, 8]
    with pytest.raises(CatalogError, match=r"tp=5 cannot split llama-2-13b \(40 query heads, 40 KV"
                                           r" heads, FFN 13824\) evenly; valid tp: 1, 2, 4, 8"):
        catalog.build(model="llama-2-13b", gpu="h100-sxm", tp=5)


def test_weights_larger_than_memory_name_what_fits(catalog):
    with pytest.raises(CatalogError) as info:
        catalog.build(model="llama-3.1-405b", gpu="h100-sxm", tp=4)
    message = str(info.value)
    assert "GiB" in message and "tp=8 weights=fp8" in message
    with pytest.raises(CatalogError) as info:   # docs/physics.md section 2's example
        catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=1)
    assert str(info.value).endswith(
        "choices that fit: tp=2 weights=bf16, tp=1 weights=fp8, tp=1 weights=fp4 kv_cache=bf16")
    with pytest.raises(CatalogError, match="none on this GPU"):
        catalog.build(model="deepseek-v3", gpu="l4")


def test_no_room_for_kv_names_the_activations_of_max_batched_tokens(catalog):
    """Llama-3.1-70B at tp 2 on H100s fits at the default 8,192-token step, not at 131,072 (a
    non-chunked engine's whole context): the message must say that the step's activations, not
    the weights alone, leave no room, or a user is sent to change the tp or dtype instead."""
    catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=2)
    with pytest.raises(CatalogError) as info:
        catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=2, max_batched_tokens=131072)
    assert "and activations (15.0 GiB for max_batched_tokens=131072) leave no room" in str(
        info.value)


def test_capacity_uses_driver_reported_gib(catalog):
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm")
    assert d.gpu.memory_gb == 80 and d.gpu.memory_gib == pytest.approx(79.65)
    usable = 79.65 * 2**30 * 0.9 - d.weight_bytes_per_gpu - d.activation_bytes_per_gpu
    assert d.kv_capacity_tokens == int(usable // d.kv_bytes_per_token) // 16 * 16


def test_serving_stack_selects_its_efficiency_row(catalog):
    current = catalog.build(model="llama-2-70b", gpu="h100-sxm", tp=2)
    old = catalog.build(model="llama-2-70b", gpu="h100-sxm", tp=2, stack="vllm-2023")
    assert (current.stack, old.stack) == ("current", "vllm-2023")
    assert old.efficiency.step_overhead_s > current.efficiency.step_overhead_s
    assert old.decode_step_s(1, 512) > current.decode_step_s(1, 512)
    with pytest.raises(CatalogError, match="vllm-2023"):
        catalog.build(model="llama-3.1-8b", gpu="b200", stack="vllm-2023")


def test_static_batch_prefill_is_one_step(catalog):
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm")
    assert d.prefill_batch_s(1, 1000) == pytest.approx(d.prefill_s(1000))
    # eight prompts together: 8x the GEMM work, 8x the attention pairs, one fixed overhead
    assert d.prefill_batch_s(8, 1000) < 8 * d.prefill_s(1000)
    assert d.prefill_batch_s(8, 1000) > 4 * d.prefill_s(1000)


def test_every_sequence_of_a_step_adds_the_per_sequence_overhead(catalog):
    """O_seq (step.py) is charged per sequence of the step, whatever the tokens: a decode step
    of b sequences pays b of it; a prefill chunk of 2,048 tokens of one prompt pays one. The
    2023 stack did its per-sequence work in Python on the host, today's engines sample with
    FlashInfer's kernel (gpu_efficiency.csv sources)."""
    current = catalog.build(model="llama-3.1-8b", gpu="h100-sxm")
    free = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", sequence_overhead_s=0.0)
    costly = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", sequence_overhead_s=3e-4)
    assert current.efficiency.sequence_overhead_s == 1e-6
    assert catalog.build(model="llama-3.1-8b", gpu="h100-sxm", stack="vllm-2023"
                         ).efficiency.sequence_overhead_s == 1.1e-4
    for batch in (1, 64, 512):
        added = costly.decode_step_s(batch, batch * 1024) - free.decode_step_s(batch, batch * 1024)
        assert added == pytest.approx(batch * 3e-4, rel=1e-9)
    assert costly.prefill_s(2048) - free.prefill_s(2048) == pytest.approx(3e-4, rel=1e-9)
    fixed = step.step_cost(costly.coefficients, 512.0, 512.0, 0.0, 0.0, 512.0)[2]
    assert fixed == pytest.approx(step.step_cost(free.coefficients, 512.0, 512.0, 0.0, 0.0,
                                                 512.0)[2] + 512 * 3e-4, rel=1e-9)


def test_cuda_graph_padding_runs_a_decode_step_at_the_next_captured_batch(catalog):
    """Under CUDA-graph padding (Scheduler.graph_batch_sizes) a decode step of B sequences runs
    its GEMMs, all-reduce and per-sequence work over the smallest captured size >= B; its
    attention reads only the B sequences' KV; above the largest size it runs unpadded. A
    prefill is never padded."""
    sizes = (1, 2, 4, 512, 1024)
    limits = {"max_seqs": 4096, "max_batched_tokens": 8192}
    plain = catalog.build(model="llama-3.1-70b", gpu="h200-sxm", tp=8, weights="fp8",
                          kv_cache="fp8", **limits)
    padded = catalog.build(model="llama-3.1-70b", gpu="h200-sxm", tp=8, weights="fp8",
                           kv_cache="fp8", graph_batch_sizes=(1024, 512, 4, 2, 1, 512), **limits)
    assert padded.scheduler.graph_batch_sizes == sizes   # sorted, each once
    ladder = padded.scheduler.graph_sizes
    assert step.graph_batch(ladder, 600.0) == 1024 and step.graph_batch(ladder, 512.0) == 512
    assert step.graph_batch(ladder, 3000.0) == 3000
    assert step.graph_batch(plain.scheduler.graph_sizes, 7.0) == 7
    context = 600 * 2000
    gemm_and_fixed = step.step_cost(plain.coefficients, 1024.0, 1024.0, 0.0, 0.0, 0.0)
    attention = step.step_cost(plain.coefficients, 600.0, 600.0, context, context, 600.0)
    alone = step.step_cost(plain.coefficients, 600.0, 600.0, 0.0, 0.0, 0.0)
    expected = (max(gemm_and_fixed[:2]) + gemm_and_fixed[2]
                + max(attention[:2]) - max(alone[:2]))
    assert padded.decode_step_s(600, context) == pytest.approx(expected, rel=1e-9)
    assert padded.decode_step_s(600, context) > 1.2 * plain.decode_step_s(600, context)
    assert padded.decode_step_s(512, 512 * 2000) == plain.decode_step_s(512, 512 * 2000)
    assert padded.decode_step_s(3000, 3000 * 100) == plain.decode_step_s(3000, 3000 * 100)
    assert padded.prefill_s(4000) == plain.prefill_s(4000)
    assert padded.as_row()["graph_batch_sizes"] == "1,2,4,512,1024"
    assert plain.as_row()["graph_batch_sizes"] == ""


@pytest.mark.parametrize("sizes", ["8,16", (0, 8), (8, 2.5), (True,), 64])
def test_graph_batch_sizes_must_be_whole_positive_numbers(catalog, sizes):
    with pytest.raises(CatalogError, match="graph_batch_sizes=.*CUDA-graph batch sizes"):
        catalog.build(model="llama-3.1-8b", gpu="h100-sxm", graph_batch_sizes=sizes)


def test_graph_sizes_stop_at_the_largest_batch_a_decode_step_can_have(catalog):
    """A decode step holds at most min(max_seqs, max_batched_tokens) sequences, and an engine
    pads no further than that: sizes above it are cut to it (TensorRT-LLM's
    _filter_cuda_graph_batch_sizes); a list within it stays as it is."""
    ladder = (1, 2, 4, 8, 256, 512, 1024)
    def kept(**limits):
        return catalog.build(model="llama-3.1-8b", gpu="h100-sxm", graph_batch_sizes=ladder,
                             **limits).scheduler.graph_batch_sizes
    assert kept(max_seqs=300) == (1, 2, 4, 8, 256, 300)
    assert kept(max_seqs=512) == (1, 2, 4, 8, 256, 512)
    assert kept(max_seqs=4096, max_batched_tokens=600) == (1, 2, 4, 8, 256, 512, 600)
    assert kept(max_seqs=2048) == ladder
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", graph_batch_sizes=ladder,
                      max_seqs=300)
    assert d.decode_step_s(290, 290 * 1000) < catalog.build(
        model="llama-3.1-8b", gpu="h100-sxm", graph_batch_sizes=ladder, max_seqs=4096
    ).decode_step_s(290, 290 * 1000)   # 290 runs as 300, not as 512


def _step_from_row(row: dict, experts: int, per_token: int, tokens: float, sequences: float,
                   pairs: float, kv_read: float, kv_written: float) -> float:
    """One step by docs/physics.md section 1, from `roofline` table columns only (plus the
    model's expert counts for W(t))."""
    touched = 1.0 - (1.0 - per_token / experts) ** tokens if experts > 1 else 1.0
    bandwidth = row["effective_bandwidth_gbs"] * 1e9
    flops = row["effective_tflops"] * 1e12
    expert_flops = row["expert_flops_per_token_per_gpu"] * tokens
    shared_flops = (row["flops_per_token_per_gpu"] * tokens - expert_flops
                    + row["lm_head_flops_per_sequence_per_gpu"] * sequences)
    shared = ((shared_flops / flops) ** 3
              + (row["shared_weight_bytes_read_per_gpu"] / bandwidth) ** 3) ** (1 / 3)
    routed = ((expert_flops / flops) ** 3
              + (row["expert_weight_bytes_per_gpu"] * touched / bandwidth) ** 3) ** (1 / 3)
    gemm = shared + routed
    attn = max(row["attn_flops_per_pair_per_gpu"] * pairs / (row["attention_effective_tflops"] * 1e12),
               row["kv_bytes_per_token_per_gpu"] * (kv_read + kv_written) / bandwidth)
    fixed = row["fixed_step_s"] + sequences * row["sequence_overhead_s"]
    if row["tp"] > 1:
        fixed += (row["allreduce_s_per_step"]
                  + tokens * row["allreduce_bytes_per_token"] / (row["allreduce_busbw_gbs"] * 1e9))
    return gemm + attn + fixed


@pytest.mark.parametrize("model, tp", [("llama-3.1-8b", 1), ("mixtral-8x7b", 2)])
def test_roofline_row_reproduces_the_steps_by_the_documented_formula(catalog, model, tp):
    """The `roofline` table holds the coefficients the replay uses (README): its columns, put
    into docs/physics.md section 1, give decode_step_s and prefill_s. The step reads the weights
    less the embedding table (6.5% of Llama-3.1-8B's bytes), and a mixture's experts only as far
    as its tokens touch them, so `weight_bytes_per_gpu`, what a GPU holds, is not what it reads."""
    d = catalog.build(model=model, gpu="h100-sxm", tp=tp)
    row, m = d.as_row(), d.model
    decode = _step_from_row(row, m.experts, m.experts_per_token, 1, 1, 1024, 1024, 1)
    assert decode == pytest.approx(row["decode_step_s_batch1_ctx1k"], rel=1e-9)
    assert decode == pytest.approx(d.decode_step_s(1, 1024), rel=1e-9)
    prefill = _step_from_row(row, m.experts, m.experts_per_token, 1024, 1, 1024 * 1023 / 2, 0, 1024)
    assert prefill == pytest.approx(row["prefill_s_1k"], rel=1e-9)


def test_allreduce_bytes_are_charged_without_a_latency(catalog):
    """fixed_s = ... + [tp > 1] * (A_lat + tokens * A_bytes / B_link) (docs/physics.md section 1):
    a catalog whose gpu_efficiency.csv row sets allreduce_latency_s = 0 (which its checks allow)
    still sends the activations over the links. The step tested the latency for tp > 1, so a
    tp 8 Llama-3.1-70B prefill of 8,000 tokens lost its 0.1 s of all-reduce transfer."""
    d = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=8)
    free = replace(d, efficiency=replace(d.efficiency, allreduce_latency_s=0.0))
    coef = d.coefficients
    transfer = 8000 * coef[step.ALLREDUCE_BYTES_PER_TOKEN] / coef[step.LINK_BANDWIDTH]
    assert transfer > 0.05
    assert d.prefill_s(8000) - free.prefill_s(8000) == pytest.approx(
        coef[step.ALLREDUCE_LATENCY_S], rel=1e-9)


def test_the_documented_symbols_by_hand(catalog):
    """docs/physics.md section 1 and step.py's docstring, worked by hand from the catalog's rows
    (models.csv: Llama-3.1-8B has 32 layers, hidden 4096, 32 query / 8 KV heads of 128, a
    vocabulary of 128,256 untied, 8.03 B parameters; gpus.csv: H100 SXM 989.5 / 1978.9 TFLOP/s
    bf16 / fp8, 3,350 GB/s, 900 GB/s NVLink; A100 312 TFLOP/s bf16 and no fp8; MI300X 896 GB/s
    over 7 peer links; gpu_efficiency.csv: hopper 0.55 / 0.71, ampere 0.65, NVLink bus 0.82,
    12 us a round), not from the code's own properties."""
    vocab = 128_256 * 4096                                          # V: two matrices of this
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", tp=2, weights="fp8", kv_cache="bf16")
    coef = d.coefficients
    # K_tok = 2 x layers x ceil(kv_heads / tp) x head_dim x bytes(kv)
    assert coef[step.KV_BYTES_PER_TOKEN] == 2 * 32 * 4 * 128 * 2
    # F_tok = 2 x ((active - V - R) / tp + R), R = 0 without MLA
    assert coef[step.FLOPS_PER_TOKEN] == pytest.approx(2 * (8.03e9 - 2 * vocab) / 2, rel=1e-12)
    # F_seq = 2 x H / tp x P_w / P_bf16: the 16-bit LM head in the time of fp8 GEMMs
    assert coef[step.FLOPS_PER_SEQUENCE] == pytest.approx(2 * vocab / 2 * 1978.9 / 989.5, rel=1e-12)
    # F_attn = 2 x layers x q_heads x (qk_dim + v_dim) / tp
    assert coef[step.ATTN_FLOPS_PER_PAIR] == 2 * 32 * 32 * (128 + 128) / 2
    # A_bytes = 2 x layers x hidden x 2 B x 2 (tp - 1) / tp; B_link = 900 / 2 GB/s x 0.82
    assert coef[step.ALLREDUCE_BYTES_PER_TOKEN] == 2 * 32 * 4096 * 2 * 2 * 1 / 2
    assert coef[step.LINK_BANDWIDTH] == pytest.approx(450e9 * 0.82, rel=1e-12)
    # A_lat = 2 x layers x ceil(log2(tp)) x 12 us: 2 rounds at tp 4
    tp4 = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", tp=4)
    assert tp4.coefficients[step.ALLREDUCE_LATENCY_S] == pytest.approx(2 * 32 * 2 * 12e-6, rel=1e-12)
    # B_link on a mesh of 7 links: the tp - 1 to the group's peers
    mesh = catalog.build(model="llama-3.1-8b", gpu="mi300x", tp=2)
    assert mesh.coefficients[step.LINK_BANDWIDTH] == pytest.approx(896e9 / 2 / 7 * 0.82, rel=1e-12)
    # P_eff: the fp8 peak where the GPU has fp8 tensor cores, bf16's where it serves fp8
    # weight-only (A100); P_attn: bf16 for a bf16 KV cache, whatever the weights
    assert coef[step.EFFECTIVE_FLOPS] == pytest.approx(1978.9e12 * 0.55, rel=1e-12)
    assert coef[step.ATTN_EFFECTIVE_FLOPS] == pytest.approx(989.5e12 * 0.55, rel=1e-12)
    a100 = catalog.build(model="llama-3.1-8b", gpu="a100-80gb-sxm", weights="fp8")
    assert a100.coefficients[step.EFFECTIVE_FLOPS] == pytest.approx(312e12 * 0.65, rel=1e-12)
    step_doc = " ".join(step.__doc__.split())
    assert "P_eff = dense peak FLOP/s of the GEMMs' dtype" in step_doc and "weight-only" in step_doc

    # a whole decode step, batch 1 over 1,024 tokens, on one H100 in bf16:
    # step_s = soft(C_s, M_s) + max(F_attn x pairs / P_attn, K_tok x (read + written) / B_eff)
    #          + O_step + O_seq
    p_eff, b_eff = 989.5e12 * 0.55, 3350e9 * 0.71
    c_s = (2 * (8.03e9 - 2 * vocab) + 2 * vocab) / p_eff        # F_tok + F_seq, one sequence
    m_s = ((8.03e9 - 2 * vocab) * 2 + vocab * 2) / b_eff        # blocks + LM head, no embedding
    attn = max(2 * 32 * 32 * 256 * 1024 / p_eff, 2 * 32 * 8 * 128 * 2 * (1024 + 1) / b_eff)
    fixed = 0.0012 + 32 * 0.00001 + 0.000001
    by_hand = (c_s**3 + m_s**3) ** (1 / 3) + attn + fixed
    one = catalog.build(model="llama-3.1-8b", gpu="h100-sxm")
    assert one.decode_step_s(1, 1024) == pytest.approx(by_hand, rel=1e-9)
    # and a prefill chunk of n tokens after c cached: n x (c + (n - 1) / 2) pairs, one LM-head row
    n, c = 1000, 24
    c_s = (2 * (8.03e9 - 2 * vocab) * n + 2 * vocab) / p_eff
    attn = max(2 * 32 * 32 * 256 * n * (c + (n - 1) / 2) / p_eff,
               2 * 32 * 8 * 128 * 2 * (c + n) / b_eff)
    by_hand = (c_s**3 + m_s**3) ** (1 / 3) + attn + fixed
    assert one.prefill_s(c + n, cached_tokens=c) == pytest.approx(by_hand, rel=1e-9)
