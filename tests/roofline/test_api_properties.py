"""Properties of the step API over the whole catalog: every model x GPU x weight dtype that
builds gives a positive KV capacity and step times that are finite and grow with the work.

A notebook sweeps these functions over shapes and hardware; a time that fell as a prompt, a
batch or a context grew (a chunk boundary, a CUDA-graph size, the softened GEMM roofline's
two branches, a mixture's expert reads) would rank a larger request as cheaper. Plain loops
over a grid, each combination at the smallest tensor-parallel degree whose KV cache fits.
"""

from __future__ import annotations

import math

import pytest

from pipelines.roofline import CatalogError, load_catalog
from pipelines.roofline.catalog import _kv_cache_dtypes, valid_tensor_parallel
from pipelines.roofline.deployment import DTYPE_BYTES

PROMPTS = (1, 2, 3, 16, 100, 511, 512, 513, 1000, 4095, 4096, 8191, 8192, 8193, 16_385, 50_000,
           131_072)
BATCHES = (1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 64, 100, 127, 128, 255, 256, 512, 1024, 4096,
           100_000, 10**9)
CONTEXTS = (8, 9, 100, 1000, 10**4, 10**5, 10**6, 10**9)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _grid(catalog):
    """One deployment per model x GPU x weight dtype that builds: the smallest tp that fits, the
    KV cache in the weights' dtype where the GPU stores one in it, else in bf16 (fp4 weights on
    Hopper, served weight-only); with what was refused, by reason."""
    built, refused = [], []
    for model in catalog.models.iter_rows(named=True):
        for gpu in catalog.gpus.iter_rows(named=True):
            for weights in DTYPE_BYTES:
                kv = weights if weights in _kv_cache_dtypes(gpu) else "bf16"
                for tp in valid_tensor_parallel(model):
                    try:
                        built.append(catalog.build(model=model["model"], gpu=gpu["gpu"], tp=tp,
                                                   weights=weights, kv_cache=kv))
                        break
                    except CatalogError as exc:
                        last = str(exc)
                else:
                    refused.append((model["model"], gpu["gpu"], weights, last))
    return built, refused


@pytest.fixture(scope="module")
def grid(catalog):
    return _grid(catalog)


def _rising(name, xs, f, strict=True):
    """The (x, f(x)) pairs where f is not finite and >= 0, or falls (or, if strict, stays) as
    x grows."""
    ys = [f(x) for x in xs]
    wrong = [(x, y) for x, y in zip(xs, ys, strict=True) if not (math.isfinite(y) and y >= 0)]
    wrong += [((x0, y0), (x1, y1)) for x0, y0, x1, y1 in zip(xs, ys, xs[1:], ys[1:])
              if (y1 <= y0 if strict else y1 < y0)]
    return [(name, *w) for w in wrong]


def test_the_grid_covers_every_model_and_gpu(catalog, grid):
    """Not vacuous: every model builds on some GPU, every GPU serves some model, and what does
    not build is refused for a reason the catalog states (weights beyond memory, a dtype the
    GPU cannot serve), never an exception from inside."""
    built, refused = grid
    assert {d.model.model for d in built} == set(catalog.models["model"])
    assert {d.gpu.gpu for d in built} == set(catalog.gpus["gpu"])
    assert len(built) > 200
    for *_, reason in refused:
        assert "leave no room for a KV cache" in reason or "weights=" in reason, reason


def test_every_deployment_that_builds_holds_a_kv_cache(grid):
    for d in grid[0]:
        assert d.kv_capacity_tokens > 0, d.name
        assert d.kv_capacity_tokens % d.scheduler.kv_block_tokens == 0, d.name


def test_prefill_grows_with_the_prompt_and_shrinks_with_the_cache(grid):
    wrong = []
    for d in grid[0]:
        prompts = [p for p in PROMPTS if p < d.kv_capacity_tokens] + [d.kv_capacity_tokens]
        wrong += [(d.name, *w) for w in _rising("prefill_s(prompt)", prompts, d.prefill_s)]
        # fewer tokens left to compute never take longer
        wrong += [(d.name, *w) for w in _rising("prefill_s(1000, -cached)", [-999, -500, -1, 0],
                                               lambda c, d=d: d.prefill_s(1000, -c), strict=False)]
    assert not wrong


def test_a_decode_step_grows_with_its_batch_and_its_context(grid):
    wrong = []
    for d in grid[0]:
        wrong += [(d.name, *w) for w in _rising(
            "decode_step_s(batch, 1000 x batch)", BATCHES,
            lambda b, d=d: d.decode_step_s(b, 1000 * b))]
        # the same KV read by more sequences: more tokens through the GEMMs and more written
        wrong += [(d.name, *w) for w in _rising(
            "decode_step_s(batch, 10**6)", BATCHES[:-2],
            lambda b, d=d: d.decode_step_s(b, 10**6))]
        wrong += [(d.name, *w) for w in _rising(
            "decode_step_s(8, context)", CONTEXTS, lambda c, d=d: d.decode_step_s(8, c))]
        wrong += [(d.name, *w) for w in _rising(
            "prefill_batch_s(batch, 512)", BATCHES[:-2],
            lambda b, d=d: d.prefill_batch_s(b, 512))]
    assert not wrong


def test_cuda_graph_padding_never_makes_a_larger_batch_faster(catalog):
    """Padded to captured sizes, a decode step's time is flat between them, never lower."""
    sizes = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    for model, gpu, tp in (("llama-3.1-8b", "h100-sxm", 1), ("mixtral-8x7b", "h200-sxm", 2),
                           ("llama-3.1-70b", "mi300x", 8)):
        d = catalog.build(model=model, gpu=gpu, tp=tp, graph_batch_sizes=sizes)
        assert not _rising("decode_step_s", list(range(1, 300)),
                           lambda b, d=d: d.decode_step_s(b, 1000 * b), strict=False)
