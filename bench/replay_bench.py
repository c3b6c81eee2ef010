"""Replay throughput: requests replayed per second, on the samples and on synthetic fleets.

Synthetic traces draw (prompt, output) pairs from the real Azure 2023 conv sample and Poisson
arrivals at 45 requests/s (the 2024 week-long conv trace's mean rate), replayed on the default
deployment with enough replicas for that rate. Run: `make bench` or
`.venv/bin/python bench/replay_bench.py [N ...]`.
"""

from __future__ import annotations

import resource
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
REPLICAS_AT_45_PER_S = 24  # ~3 replicas carry the 5.5 req/s conv sample; scaled to 45 req/s


def synthetic(n: int, seed: int = 0) -> pl.DataFrame:
    conv = read_azure_csv(SAMPLES / "AzureLLMInferenceTrace_conv.csv").requests
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, conv.height, n)
    return pl.DataFrame({
        "arrival_s": np.cumsum(rng.exponential(1 / RATE_PER_S, n)) - 0.0,
        "prompt_tokens": conv["prompt_tokens"].to_numpy()[pick],
        "output_tokens": conv["output_tokens"].to_numpy()[pick],
    })


def timed(requests: pl.DataFrame, deployment) -> float:
    start = time.perf_counter()
    replay_fleet(requests, deployment)
    return time.perf_counter() - start


def main(sizes: list[int]) -> None:
    deployment = load_catalog().deployment("azure-2023-70b-h100")
    timed(synthetic(1000), deployment)  # compile (or load the numba cache) outside the timings
    for name in ("AzureLLMInferenceTrace_code", "AzureLLMInferenceTrace_conv"):
        requests = read_azure_csv(SAMPLES / f"{name}.csv").requests
        seconds = timed(requests, deployment)
        print(f"{name}: {requests.height:,} requests in {seconds:.3f} s "
              f"= {requests.height / seconds:,.0f} requests/s")
    fleet = replace(deployment, replicas=REPLICAS_AT_45_PER_S)
    for n in sizes:
        requests = synthetic(n)
        seconds = timed(requests, fleet)
        print(f"synthetic {n:,} requests at {RATE_PER_S:.0f}/s on {fleet.replicas} replicas: "
              f"{seconds:.2f} s = {n / seconds:,.0f} requests/s")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 1_000_000])
