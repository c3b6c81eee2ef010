"""Time real prefill and decode steps of Llama-shaped models on one GPU, to check the roofline.

    python3 bench/device/step_timing.py --out DIR [--budget-s 360]      # on a GPU machine
    python3 bench/device/step_timing.py --out DIR --device cpu --tiny   # smoke run, no GPU

Standalone: PyTorch and the standard library only (the GPU machine has neither the project's
virtual environment nor its dependencies). Writes DIR/step_timing.csv one row per case as it
goes (a run stopped by its time limit keeps what it measured) and DIR/environment.json; compare
them with the model by `.venv/bin/python bench/validation.py --steps DIR/step_timing.csv`.

What it runs: the layers of a Llama-style decoder with random bf16 weights (RMSNorm, fused QKV
projection, rotary embedding, grouped-query attention through torch's scaled_dot_product_attention,
output projection, SwiGLU MLP, final norm, LM head and greedy sampling of the last position),
captured in a CUDA graph per case and replayed (engines run decode steps as CUDA graphs; this
leaves no Python launch cost in the figures), timed with CUDA events: the median of REPEATS
groups of REPLAYS replays after warm-up. Shapes (SHAPES):

- llama-3.1-8b, whole, on one GPU: prefill of one prompt (128-8,192 tokens) and decode steps of
  1-256 sequences at 1,024 / 4,096 tokens of context;
- one GPU's shard of Llama-3.1-70B at tensor parallelism 8 (8 query heads over 1 KV head, 1/8 of
  the FFN and vocabulary), decode steps of 64-2,048 sequences: the regime where the model's
  max-load throughput is a median 8% too high, 21% on the TensorRT-engine editions
  (docs/physics.md section 5, "Tensor parallelism 4-8 under heavy decode load"). Each is timed
  whole (`full`), with the attention left out (`gemm`: the attention output is its query) and
  as the attention alone (`attn`: the KV write and attention of every layer), so the model's two
  terms are checked one by one. The shard has no
  all-reduce (one GPU); NCCL's is checked separately (physics.md section 4);
- the decode attention alone with 8 query heads over 1 KV head (a tp-8 shard) and 64 over 8
  (tp 1) at the same batch and context (8 x the KV bytes), 64-2,048 sequences: whether few KV
  heads per GPU cost bandwidth. Each cycles through enough copies of its KV cache (L2_FLUSH_BYTES
  in all, recorded as `layers`) that the replays read HBM, not the 50 MB L2;
- a device-to-device copy, the bandwidth reference.

The KV cache is contiguous per sequence ([batch, kv_heads, context, head_dim]), the best case of
a paged cache; attention runs on the backend torch picks among those that take grouped-query
attention without copying the KV cache (recorded per row). A case that does not fit in memory is
recorded as skipped, not dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPEATS = 5
REPLAYS = 10
TINY_REPLAYS = 2
HEAD_DIM = 128
SHAPES = {
    # config.json of meta-llama/Llama-3.1-8B and Llama-3.1-70B (data/reference/models.csv)
    "llama-3.1-8b": dict(layers=32, hidden=4096, q_heads=32, kv_heads=8, ffn=14336,
                         vocab=128256, tp=1),
    "llama-3.1-70b-tp8-shard": dict(layers=80, hidden=8192, q_heads=8, kv_heads=1, ffn=3584,
                                    vocab=16032, tp=8),
    # the decode attention alone: one layer's KV of a tp-8 shard of Llama-3.1-70B, and of the
    # whole model on one GPU (no weights: hidden, ffn and vocab unused)
    "attention-8q-1kv": dict(layers=1, hidden=0, q_heads=8, kv_heads=1, ffn=0, vocab=0, tp=8),
    "attention-64q-8kv": dict(layers=1, hidden=0, q_heads=64, kv_heads=8, ffn=0, vocab=0, tp=1),
    # --tiny: the same code paths at a size a CPU runs in seconds
    "tiny": dict(layers=2, hidden=256, q_heads=4, kv_heads=1, ffn=512, vocab=1000, tp=1),
}
ATTENTION_SHAPES = ("attention-8q-1kv", "attention-64q-8kv")
CSV_COLUMNS = ("case", "shape", "tp", "phase", "mode", "batch", "context_tokens", "new_tokens",
               "layers", "q_heads", "kv_heads", "head_dim", "kv_bytes", "median_s", "min_s",
               "replays", "attention_backend", "cuda_graph", "status")
KV_MEMORY_CAP_BYTES = 90e9  # leaves room for the weights and the graphs' buffers on an H200
# An attention-only case reads at least this much KV per replay, in copies, so that back-to-back
# replays cannot be served from the H200's ~50 MB L2 (4 x over it).
L2_FLUSH_BYTES = 200e6


def cases(tiny: bool) -> list[dict]:
    """Every case of the run, cheapest first within each group (a time limit cuts the end)."""
    if tiny:
        return ([dict(shape="tiny", phase="prefill", mode="full", batch=1, context=0, new=n)
                 for n in (16, 64)]
                + [dict(shape="tiny", phase="decode", mode=m, batch=b, context=32, new=1)
                   for b in (1, 4) for m in ("full", "gemm", "attn")]
                + [dict(shape=a, phase="attention", mode="attn", batch=4, context=64, new=1)
                   for a in ATTENTION_SHAPES]
                + [dict(shape="copy", phase="copy", mode="copy", batch=1, context=0, new=0)])
    out = [dict(shape="copy", phase="copy", mode="copy", batch=1, context=0, new=0)]
    out += [dict(shape="llama-3.1-8b", phase="prefill", mode="full", batch=1, context=0, new=n)
            for n in (128, 512, 2048, 8192)]
    out += [dict(shape="llama-3.1-8b", phase="decode", mode="full", batch=b, context=c, new=1)
            for c in (1024, 4096) for b in (1, 16, 64, 256)]
    out += [dict(shape="llama-3.1-70b-tp8-shard", phase="decode", mode=m, batch=b, context=c,
                 new=1)
            for c in (1024, 2048) for b in (64, 256, 1024, 2048) for m in ("full", "gemm", "attn")]
    out += [dict(shape=a, phase="attention", mode="attn", batch=b, context=c, new=1)
            for c in (1024, 4096) for b in (64, 256, 1024, 2048) for a in ATTENTION_SHAPES]
    return out


class Decoder:
    """Random bf16 weights of a Llama-style decoder (one GPU's share of them under `tp`)."""

    def __init__(self, spec: dict, device: str, dtype: torch.dtype):
        self.spec = spec
        h, q, kv, f = spec["hidden"], spec["q_heads"], spec["kv_heads"], spec["ffn"]

        def weight(*shape):
            return torch.randn(*shape, device=device, dtype=dtype) * 0.02

        self.layers = [dict(attn_norm=torch.ones(h, device=device, dtype=dtype),
                            qkv=weight(h, (q + 2 * kv) * HEAD_DIM),
                            o=weight(q * HEAD_DIM, h),
                            mlp_norm=torch.ones(h, device=device, dtype=dtype),
                            gate_up=weight(h, 2 * f),
                            down=weight(f, h))
                       for _ in range(spec["layers"])]
        self.final_norm = torch.ones(h, device=device, dtype=dtype)
        self.lm_head = weight(h, spec["vocab"])


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding (rotate-half form) of x [..., tokens, head_dim]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def rotary_tables(positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    inv = 1.0 / (500000.0 ** (torch.arange(0, HEAD_DIM, 2, device=positions.device) / HEAD_DIM))
    angles = positions[:, None].float() * inv[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def attend(q, k, v, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def step_fn(spec: dict, model: Decoder | None, case: dict, kv_cache: list, device: str,
            dtype: torch.dtype):
    """A closure running one engine step of `case` on fixed buffers (what the graph captures);
    `model` may be None in the `attn` mode, which reads only the KV cache."""
    s = spec
    b, ctx, new, mode = case["batch"], case["context"], case["new"], case["mode"]
    q_h, kv_h = s["q_heads"], s["kv_heads"]
    tokens = b * new
    x0 = (torch.randn(tokens, s["hidden"], device=device, dtype=dtype)
          if model is not None else None)
    cos, sin = rotary_tables(torch.arange(ctx, ctx + new, device=device), dtype)
    q_fixed = torch.randn(b, q_h, new, HEAD_DIM, device=device, dtype=dtype)
    kv_fixed = torch.randn(b, kv_h, new, HEAD_DIM, device=device, dtype=dtype)
    prefill = case["phase"] == "prefill"

    def run():
        if mode == "attn":
            for k_cache, v_cache in kv_cache:
                k_cache[:, :, ctx:ctx + new] = kv_fixed
                v_cache[:, :, ctx:ctx + new] = kv_fixed
                attend(q_fixed, k_cache[:, :, :ctx + new], v_cache[:, :, :ctx + new], prefill)
            return None
        x = x0
        for layer, (k_cache, v_cache) in zip(model.layers, kv_cache):
            hdn = F.rms_norm(x, (s["hidden"],), layer["attn_norm"])
            qkv = (hdn @ layer["qkv"]).view(b, new, q_h + 2 * kv_h, HEAD_DIM).transpose(1, 2)
            q = rotate(qkv[:, :q_h], cos, sin)
            k = rotate(qkv[:, q_h:q_h + kv_h], cos, sin)
            if mode == "gemm":
                attn = q
            else:
                k_cache[:, :, ctx:ctx + new] = k
                v_cache[:, :, ctx:ctx + new] = qkv[:, q_h + kv_h:]
                attn = attend(q, k_cache[:, :, :ctx + new], v_cache[:, :, :ctx + new], prefill)
            x = x + attn.transpose(1, 2).reshape(tokens, q_h * HEAD_DIM) @ layer["o"]
            hdn = F.rms_norm(x, (s["hidden"],), layer["mlp_norm"])
            gate, up = (hdn @ layer["gate_up"]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ layer["down"]
        last = x.view(b, new, -1)[:, -1]  # logits only where a token is sampled
        return torch.argmax(F.rms_norm(last, (s["hidden"],), model.final_norm) @ model.lm_head,
                            dim=-1)

    return run


def attention_backend(device: str, dtype: torch.dtype, q_h: int, kv_h: int):
    """The first SDPA backend that runs grouped-query decode attention here, tried in the order
    flash, cuDNN, memory-efficient, math (the math backend expands the KV cache to every query
    head, so it is the last resort and named in the CSV); None on the CPU (torch's choice)."""
    if device == "cpu":
        return None
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(2, q_h, 1, HEAD_DIM, device=device, dtype=dtype)
    k = torch.randn(2, kv_h, 64, HEAD_DIM, device=device, dtype=dtype)
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                    SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
        try:
            with sdpa_kernel([backend]):
                attend(q, k, k, False)
            torch.cuda.synchronize()
            return backend
        except RuntimeError:
            continue
    raise RuntimeError("no scaled_dot_product_attention backend ran")


def only(backend):
    """A context in which SDPA runs on `backend` alone (the CPU: torch's own choice)."""
    if backend is None:
        return contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel
    return sdpa_kernel([backend])


def timed(fn, device: str, replays: int) -> tuple[float, float, bool]:
    """(median, min) seconds of one call of `fn` over REPEATS groups of `replays`, replayed from
    a CUDA graph where one can be captured; and whether it was."""
    if device == "cpu":
        fn()
        samples = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            for _ in range(replays):
                fn()
            samples.append((time.perf_counter() - start) / replays)
        return sorted(samples)[len(samples) // 2], min(samples), False
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
        run, captured = graph.replay, True
    except RuntimeError:
        run, captured = fn, False
    run()
    torch.cuda.synchronize()
    samples = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / replays)
    del graph
    return sorted(samples)[len(samples) // 2], min(samples), captured


def kv_buffers(spec: dict, case: dict, device: str, dtype: torch.dtype) -> list:
    """One K and one V buffer per layer, context + new tokens long (random: attention reads real
    numbers, as a cache holds)."""
    shape = (case["batch"], spec["kv_heads"], case["context"] + case["new"], HEAD_DIM)
    return [(torch.randn(shape, device=device, dtype=dtype),
             torch.randn(shape, device=device, dtype=dtype)) for _ in range(spec["layers"])]


def run_case(case: dict, models: dict, device: str, dtype: torch.dtype, replays: int) -> dict:
    """One row of the CSV (without `case`)."""
    if case["phase"] == "copy":
        n = (1 << 20) if device == "cpu" else (4 << 30)
        src = torch.empty(n, device=device, dtype=torch.uint8)
        dst = torch.empty_like(src)
        median, low, graph = timed(lambda: dst.copy_(src), device, replays)
        return dict(shape="copy", tp=1, phase="copy", mode="copy", batch=1, context_tokens=0,
                    new_tokens=0, layers=0, q_heads=0, kv_heads=0, head_dim=0, kv_bytes=2 * n,
                    median_s=median, min_s=low, replays=replays, attention_backend="",
                    cuda_graph=graph, status="ok")
    spec = SHAPES[case["shape"]]
    if case["phase"] == "attention":
        per_copy = 2 * case["batch"] * spec["kv_heads"] * (case["context"] + case["new"]) * HEAD_DIM * 2
        spec = dict(spec, layers=max(1, math.ceil(L2_FLUSH_BYTES / per_copy)))
    model = None
    if case["mode"] != "attn" and case["shape"] not in models:
        models.clear()  # one model's weights at a time
        if device != "cpu":
            torch.cuda.empty_cache()
        models[case["shape"]] = Decoder(spec, device, dtype)
    if case["mode"] != "attn":
        model = models[case["shape"]]
    element = torch.finfo(dtype).bits // 8
    kv_bytes = (2 * spec["layers"] * case["batch"] * spec["kv_heads"]
                * (case["context"] + case["new"]) * HEAD_DIM * element)
    backend = attention_backend(device, dtype, spec["q_heads"], spec["kv_heads"])
    row = dict(shape=case["shape"], tp=spec["tp"], phase=case["phase"], mode=case["mode"],
               batch=case["batch"], context_tokens=case["context"], new_tokens=case["new"],
               layers=spec["layers"], q_heads=spec["q_heads"], kv_heads=spec["kv_heads"],
               head_dim=HEAD_DIM, kv_bytes=kv_bytes, median_s="", min_s="", replays=replays,
               attention_backend=backend.name if backend is not None else "cpu",
               cuda_graph="", status="ok")
    if case["mode"] != "gemm" and kv_bytes > KV_MEMORY_CAP_BYTES:
        return {**row, "status": f"skipped: KV cache {kv_bytes / 1e9:.0f} GB over the cap"}
    try:
        # the gemm mode reads no KV cache, so it holds none
        kv = ([(None, None)] * spec["layers"] if case["mode"] == "gemm"
              else kv_buffers(spec, case, device, dtype))
        fn = step_fn(spec, model, case, kv, device, dtype)
        with only(backend):
            median, low, graph = timed(fn, device, replays)
    except torch.cuda.OutOfMemoryError:
        return {**row, "status": "skipped: out of memory"}
    except RuntimeError as e:  # a failed capture or kernel: recorded, and the run goes on
        return {**row, "status": f"failed: {str(e).splitlines()[0][:160]}"}
    finally:
        kv = fn = None
        if device != "cpu":
            torch.cuda.empty_cache()
    return {**row, "median_s": median, "min_s": low, "cuda_graph": graph}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for the CSV and JSON")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (a smoke run)")
    parser.add_argument("--budget-s", type=float, default=360.0,
                        help="start no case after this many seconds (default 360)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("step_timing: no CUDA device; run with --device cpu --tiny for a smoke run",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    dtype = torch.bfloat16
    torch.manual_seed(0)
    env = dict(torch=torch.__version__, python=platform.python_version(), device=args.device,
               started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if args.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, multiprocessors=props.multi_processor_count,
                   memory_bytes=props.total_memory, cuda=torch.version.cuda)
    (args.out / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
    replays = TINY_REPLAYS if args.tiny else REPLAYS
    began, models = time.monotonic(), {}
    with open(args.out / "step_timing.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for i, case in enumerate(cases(args.tiny)):
            if time.monotonic() - began > args.budget_s:
                print(f"step_timing: time budget spent; {i} cases run", flush=True)
                break
            row = {"case": i, **run_case(case, models, args.device, dtype, replays)}
            writer.writerow(row)
            f.flush()
            print(f"{i:3d} {row['shape']:24s} {row['phase']:9s} {row['mode']:5s} "
                  f"b={row['batch']:<5d} ctx={row['context_tokens']:<5d} "
                  f"new={row['new_tokens']:<5d} {row['median_s'] or row['status']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
