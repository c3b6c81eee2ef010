"""Calibration demonstration: fit deployments to the shared observed-latency logs and print the
model-vs-observed error before and after, on the fit half and the held-out half.

    .venv/bin/python bench/validation_calibration.py [--shapes]

Logs (copies in tests/fixtures/, provenance in tests/fixtures/README.md):
- BurstGPT replayed on vLLM with Llama-3.2-1B, time-compressed 100x and 1000x
  (deployment burstgpt-vllm-1b-4090; fitted on TTFT only: the log's output token counts are
  estimates, so its end-to-end latencies are reported, not fitted);
- SplitwiseSim perf_model.csv, Llama-2-70B on 2 x A100 and 2 x H100 (deployments
  splitwise-70b-{a100,h100}-tp2; measured prefill and decode step times);
- when ../shared/traces/ is there, the same BurstGPT vLLM logs ingested end to end by
  pipelines.formats.read_trace (format detected; out_len_per_token from the engine log, as in
  tests/fixtures/README.md) instead of the hand-built fixture.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import polars as pl

from pipelines.formats import read_trace
from pipelines.roofline import load_catalog
from pipelines.roofline.calibration import (
    ALL_SHAPES,
    calibrate_requests,
    calibrate_steps,
    perf_model_steps,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SHARED_BURSTGPT = ROOT.parent / "shared" / "traces" / "burstgpt-vllm-replay-logs"
OUT_LEN_PER_TOKEN = {100: 6.56, 1000: 6.48}  # out_len units per generated token (engine log)


def main(argv: list[str]) -> None:
    catalog = load_catalog()
    buckets = pl.read_csv(ROOT / "data" / "reference" / "shape_buckets.csv")
    runs = []
    for scale in (100, 1000):
        requests = pl.read_csv(FIXTURES / "observed" / f"burstgpt_vllm_llama32_1b_scale{scale}.csv",
                               schema_overrides={"request_id": pl.String})
        runs.append((f"burstgpt x{scale}", lambda r=requests: calibrate_requests(
            catalog.deployment("burstgpt-vllm-1b-4090"), r, buckets, fit_metrics=("ttft",))))
        log = SHARED_BURSTGPT / f"detail_log_scale{scale}_prompt500.json"
        if log.exists():
            ingested = read_trace(log, out_len_per_token=OUT_LEN_PER_TOKEN[scale]).requests
            runs.append((f"burstgpt x{scale} ingested by read_trace ({log.name})",
                         lambda r=ingested: calibrate_requests(
                             catalog.deployment("burstgpt-vllm-1b-4090"), r, buckets,
                             fit_metrics=("ttft",))))
        else:
            print(f"{log} absent: the read_trace runs are skipped")
    perf_model = pl.read_csv(FIXTURES / "splitwise" / "perf_model_llama2_70b.csv")
    for hardware, name in (("a100-80gb", "splitwise-70b-a100-tp2"), ("h100-80gb", "splitwise-70b-h100-tp2")):
        steps = perf_model_steps(perf_model, "llama2-70b", hardware, 2)
        runs.append((f"perf_model {hardware} tp2", lambda s=steps, n=name: calibrate_steps(
            catalog.deployment(n), s, buckets)))
    pl.Config.set_tbl_rows(200).set_tbl_width_chars(200).set_fmt_float("full")
    for label, run in runs:
        start = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - start
        print(f"\n== {label} (fit in {seconds:.1f} s)")
        for parameter, (before, after) in result.parameters().items():
            print(f"  {parameter:22s} {before:10.4g} -> {after:10.4g}")
        errors = result.errors if "--shapes" in argv else result.errors.filter(pl.col("shape") == ALL_SHAPES)
        print(errors.select("split", "metric", "shape", "observations",
                            pl.col("median_observed_s").round(4),
                            *[pl.col(c).round(3) for c in ("error_before", "error_after",
                                                           "shape_error_before", "shape_error_after")]))


if __name__ == "__main__":
    main(sys.argv[1:])
