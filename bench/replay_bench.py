"""Replay throughput and memory: requests replayed per second, on the samples and on synthetic
fleets of 1 M, 10 M and 27 M requests (the week-long Azure conv trace's scale).

Synthetic traces draw (prompt, output) pairs from the real Azure 2023 conv sample and Poisson
arrivals at 45 requests/s (the week-long conv trace's mean rate), replayed on the default
deployment with enough replicas for a ~70% mean busy share (busy share = 1 - idle share, the
project's measure of utilization; the figure is printed). Each size runs in its own process,
so that its peak resident memory is its own. Timings exclude numba compilation (the cache is
warmed first) and include the Polars work of `replay_fleet` (validation, the fleet_timeline
frame) and the derivation of every request's request_stages row, in batches of 2 M rows as the
replay asset writes them.

Run: `make bench` or `.venv/bin/python bench/replay_bench.py [N ...]`.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from pipelines.formats import read_azure_csv
from pipelines.replay import replay_fleet
from pipelines.roofline import load_catalog

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
RATE_PER_S = 45.0
# Conv requests hold a replica for ~5 s each (mostly decode at small batch), so a 70% busy
# share at 45 requests/s takes ~290 replicas of the default deployment (measured: see output).
REPLICAS_AT_70_PCT = 290
SIZES = [1_000_000, 10_000_000, 27_000_000]


def synthetic(n: int, seed: int = 0) -> pl.DataFrame:
    conv = read_azure_csv(SAMPLES / "AzureLLMInferenceTrace_conv.csv").requests
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, conv.height, n)
    return pl.DataFrame({
        "arrival_s": np.cumsum(rng.exponential(1 / RATE_PER_S, n)),
        "prompt_tokens": conv["prompt_tokens"].to_numpy()[pick],
        "output_tokens": conv["output_tokens"].to_numpy()[pick],
    })


def timed(requests: pl.DataFrame, deployment):
    """Replay, and derive every request's request_stages row (a batch at a time, as the asset
    writes them)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = replay_fleet(requests, deployment)
    rows = sum(batch.height for batch in result.stage_batches())
    assert rows == requests.height
    return result, time.perf_counter() - wall, time.process_time() - cpu


def one(n: int) -> None:
    """Replay n synthetic requests in this process; print one line of figures."""
    fleet = replace(load_catalog().deployment("azure-2023-70b-h100"), replicas=REPLICAS_AT_70_PCT)
    timed(synthetic(1000), fleet)  # load the numba cache outside the timing
    requests = synthetic(n)
    result, wall, cpu = timed(requests, fleet)
    tl = result.timeline
    busy = float(tl["busy_gpu_s"].sum()) / float((tl["busy_gpu_s"] + tl["idle_gpu_s"]).sum())
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"| synthetic, {RATE_PER_S:.0f} req/s, {fleet.replicas} replicas | {n:,} | "
          f"{wall:.1f} s | {cpu:.1f} s | {n / cpu:,.0f} | {busy:.0%} | {peak_mb:,.0f} MB |",
          flush=True)


def main(sizes: list[int]) -> None:
    deployment = load_catalog().deployment("azure-2023-70b-h100")
    timed(synthetic(1000), deployment)   # load the numba cache for both kinds of input
    print("| trace | requests | wall | CPU | requests/s (CPU) | busy share | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ("AzureLLMInferenceTrace_code", "AzureLLMInferenceTrace_conv"):
        requests = read_azure_csv(SAMPLES / f"{name}.csv").requests
        timed(requests, deployment)   # warm: the first call of an input kind loads its code
        _, wall, cpu = timed(requests, deployment)
        print(f"| {name} sample, {deployment.replicas} replicas | {requests.height:,} | "
              f"{wall:.3f} s | {cpu:.3f} s | {requests.height / cpu:,.0f} | | |", flush=True)
    for n in sizes:
        subprocess.run([sys.executable, __file__, "--one", str(n)], check=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="*", default=SIZES,
                        help=f"synthetic trace sizes, each replayed in its own process (default:"
                             f" {' '.join(map(str, SIZES))})")
    # main's subprocess per size: one size, this process, one line of figures
    parser.add_argument("--one", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        one(args.one)
    else:
        main(args.sizes)
