"""Calibration demonstration: fit deployments to the shared observed-latency logs and print the
model-vs-observed error before and after, on the fit half and the held-out half.

    .venv/bin/python bench/validation_calibration.py [--shapes]

Logs (copies in tests/fixtures/, provenance in tests/fixtures/README.md):
- BurstGPT replayed on vLLM with Llama-3.2-1B, time-compressed 100x and 1000x
  (deployment burstgpt-vllm-1b-4090; fitted on TTFT only: the log's output token counts are
  estimates, so its end-to-end latencies are reported, not fitted);
- SplitwiseSim perf_model.csv, Llama-2-70B on 2 x A100 and 2 x H100 (deployments
  splitwise-70b-{a100,h100}-tp2; measured prefill and decode step times);
- the AIBrix benchmark-client log (deepseek-coder-6.7b-instruct on one A10 under vLLM 0.6.2;
  deployment aibrix-deepseek-coder-a10), fitted on TTFT and e2e, and again on TTFT and the time
  per output token (each stage one residual); and the same log offered to
  calibrate_candidates on five GPUs (AIBRIX_CANDIDATES), to show which one it keeps;
- the same runs' vLLM engine logs (the x100 one copied to tests/fixtures/observed/): the decode
  step time against the running sequences, the per-sequence cost measured directly, beside what
  the request-log fits find for it;
- when ../shared/traces/ (or $FLEETSPEND_PUBLIC_TRACES) is there, the same BurstGPT vLLM logs ingested end to end by
  pipelines.formats.read_trace (format detected; out_len_per_token from the engine log, as in
  tests/fixtures/README.md) instead of the hand-built fixture;
- the LLMPerf leaderboard's per-request files (every one in ../shared/traces/llmperf-leaderboard/
  when it is there, else the two copies in tests/fixtures/public/): third-party endpoints serving
  Llama-2 7B / 13B / 70B chat on GPUs they do not publish. Each log is calibrated on every
  candidate deployment of its model (CANDIDATES, one replica per client) by
  calibrate_candidates, which rules out the implausible fits and keeps the plausible one whose
  catalog factors (only the client latency fitted) explain the fit half best; the held-out
  half never enters the choice.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import polars as pl

from pipelines.formats import read_trace
from pipelines.roofline import load_catalog
from pipelines.roofline.catalog import load_shape_buckets
from pipelines.roofline.calibration import (
    ALL_SHAPES,
    REQUEST_METRICS,
    calibrate_candidates,
    calibrate_requests,
    calibrate_steps,
    engine_log_step_line,
    perf_model_steps,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# the shared public traces where the tests find them (tests/public_traces.py): ../shared/traces/
# beside the checkout, or the folder FLEETSPEND_PUBLIC_TRACES names
SHARED = Path(os.environ.get("FLEETSPEND_PUBLIC_TRACES", ROOT.parent / "shared" / "traces"))
SHARED_BURSTGPT = SHARED / "burstgpt-vllm-replay-logs"
SHARED_LLMPERF = SHARED / "llmperf-leaderboard" / "individual"
OUT_LEN_PER_TOKEN = {100: 6.56, 1000: 6.48}  # out_len units per generated token (engine log)
AIBRIX_CANDIDATES = ("a10", "l4", "l40s", "a100-80gb-sxm", "h100-sxm")  # one GPU each, bf16
LLMPERF_CLIENTS = 5  # the leaderboard's --num-concurrent-requests (llmperf-leaderboard README)
# Each LLMPerf candidate is a fleet of one replica per client: a hosted endpoint serves the five
# clients from a fleet behind a load balancer, not necessarily from one replica's batch, where
# the replay would queue each client's prefill behind the others' steps (docs/physics.md
# section 6: e2e fits better on 10 of 13 logs, TTFT about as well).
LLMPERF_REPLICAS = LLMPERF_CLIENTS
# model size in the LLMPerf file name -> (catalog model, [(gpu, tp, weight dtype), ...]): the
# GPUs such endpoints ran on in 2023 (A100, H100, L40S) at the parallelism the model needs.
CANDIDATES = {
    "7b": ("llama-2-7b", [("a100-80gb-sxm", 1, "bf16"), ("h100-sxm", 1, "bf16"), ("l40s", 1, "bf16")]),
    "13b": ("llama-2-13b", [("a100-80gb-sxm", 1, "bf16"), ("h100-sxm", 1, "bf16"), ("l40s", 1, "bf16")]),
    "70b": ("llama-2-70b", [("a100-80gb-sxm", 4, "bf16"), ("a100-80gb-sxm", 8, "bf16"),
                            ("h100-sxm", 4, "bf16"), ("h100-sxm", 8, "bf16"), ("h100-sxm", 4, "fp8")]),
}


def main(argv: list[str]) -> None:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return
    if set(argv) - {"--shapes"}:
        sys.exit(f"validation_calibration: unknown argument {sorted(set(argv) - {'--shapes'})[0]}"
                 f"\n{__doc__.splitlines()[3]}")
    catalog = load_catalog()
    buckets = load_shape_buckets()
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
    aibrix = read_trace(FIXTURES / "public" / "aibrix_output.jsonl").requests
    runs.append(("aibrix (aibrix-deepseek-coder-a10)", lambda: calibrate_requests(
        catalog.deployment("aibrix-deepseek-coder-a10"), aibrix, buckets)))
    runs.append(("aibrix fitted on TTFT and TPOT instead of e2e", lambda: calibrate_requests(
        catalog.deployment("aibrix-deepseek-coder-a10"), aibrix, buckets, fit_metrics=("ttft", "tpot"))))
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
                                                           "shape_error_before", "shape_error_after",
                                                           "error_baseline")]))
        for outlier in result.outliers:
            print(f"  outliers: {outlier}")
        for left_out in result.left_out:
            print(f"  {left_out}")
    engine_logs()
    aibrix_candidates(catalog, aibrix, buckets)
    llmperf(catalog, buckets)


def engine_logs() -> None:
    """The per-sequence cost of a step measured from the BurstGPT runs' own vLLM engine logs
    (engine_log_step_line), to set beside the per-sequence overhead the fits above found from
    the latencies alone: the x100 log from its fixture copy, the x1000 one where the shared
    traces are."""
    logs = {100: FIXTURES / "observed" / "burstgpt_vllm_engine_log_scale100.csv",
            1000: SHARED_BURSTGPT / "vllm_log_scale1000_prompt500.csv"}
    print("\n== BurstGPT vLLM engine logs: pure-decode step time = a + b x running sequences")
    for scale, path in logs.items():
        if not path.exists():
            print(f"x{scale}: {path} absent, skipped")
            continue
        empty, per_sequence, samples = engine_log_step_line(pl.read_csv(path))
        print(f"x{scale}: a = {empty * 1e3:.2f} ms, b = {per_sequence * 1e3:.3f} ms per sequence"
              f" ({samples} samples, {path.name})")


def aibrix_candidates(catalog, requests: pl.DataFrame, buckets: pl.DataFrame) -> None:
    """The AIBrix log names no GPU: offer it its deployment on every single-GPU candidate and
    print, per GPU, the fit-half error with the catalog's factors (client latency fitted: what
    the choice compares), the held-out error with the catalog's factors as they stand and after
    the full fit, and the fitted factors."""
    served = catalog.deployment("aibrix-deepseek-coder-a10")
    choice = calibrate_candidates([catalog.on_gpu(served, gpu) for gpu in AIBRIX_CANDIDATES],
                                  requests, buckets, catalog_models=catalog.models["model"])
    rows = [candidate_row(r) for r in choice.calibrations]
    print(f"\n== aibrix on {len(rows)} candidate GPUs (held-out median per-request error before / after)")
    with pl.Config(tbl_cols=20, tbl_width_chars=240, fmt_str_lengths=60):
        print(pl.DataFrame(rows))
    print(f"calibrate_candidates keeps {choice.kept.before.name}")


def candidate_row(r) -> dict:
    """One candidate's row of the AIBrix table: its errors, and its fitted factors to four
    significant digits (rounded to four decimals, the per-sequence overhead's microseconds,
    6.9e-06 s on the A10, printed as 0 on every candidate)."""
    return {"deployment": r.before.name, "plausible": not r.warnings,
            "fit-half catalog": round(r.catalog_error, 3),
            **{f"{m} {c}": round(v, 3) for m in REQUEST_METRICS
               for c, v in zip(("before", "after"), r.held_out_error(m), strict=True)},
            **{p: float(f"{after:.4g}") for p, (_, after) in r.parameters().items()}}


def llmperf(catalog, buckets: pl.DataFrame) -> None:
    """Calibrate every LLMPerf log on each candidate deployment and keep the plausible best."""
    files = sorted(SHARED_LLMPERF.glob("*.json")) if SHARED_LLMPERF.exists() else [
        FIXTURES / "public" / "fireworks_7b.json", FIXTURES / "public" / "anyscale_70b.json"]
    print(f"\n== LLMPerf leaderboard logs ({len(files)} files; {LLMPERF_CLIENTS} clients each)")
    rows, outliers = [], []
    for path in files:
        requests = read_trace(path, concurrency=LLMPERF_CLIENTS).requests
        model, candidates = CANDIDATES[path.stem.rsplit("_", 1)[1]]
        start = time.perf_counter()
        choice = calibrate_candidates([catalog.build(model=model, gpu=gpu, tp=tp, weights=dtype,
                                                     replicas=LLMPERF_REPLICAS)
                                       for gpu, tp, dtype in candidates], requests, buckets,
                                      catalog_models=catalog.models["model"])
        best, plausible = choice.kept, int(choice.candidates["plausible"].sum())
        outliers += [f"  {path.stem}: {o}" for o in best.outliers]
        held = best.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("split") == "held_out"))
        metric = {r["metric"]: r for r in held.iter_rows(named=True)}
        rows.append({
            "log": path.stem, "requests": requests.height,
            "catalog_error": round(best.catalog_error, 3),
            "deployment": best.before.name if plausible else f"none plausible (closest {best.before.name})",
            "plausible": f"{plausible}/{choice.candidates.height}",
            "kept_is_plausible": plausible > 0,
            "client_one_way_s": round(best.after.network.one_way_s, 3),
            **{f"{m} {c}": round(metric[m][f"error_{c}"], 3)
               for m in REQUEST_METRICS for c in ("before", "after", "baseline")},
            "seconds": round(time.perf_counter() - start, 1),
        })
    table = pl.DataFrame(rows)
    with pl.Config(tbl_rows=100, tbl_cols=20, tbl_width_chars=260, fmt_str_lengths=60):
        print(table)
        kept = table.filter(pl.col("kept_is_plausible"))
        print(f"{kept.height} of {table.height} logs have a plausible deployment; over them, held-out:")
        print(kept.select(
            *[pl.col(f"{m} {c}").median().alias(f"median {m} {c}")
              for m in REQUEST_METRICS for c in ("after", "baseline")],
            *[(pl.col(f"{m} after") <= 0.10).sum().alias(f"{m} after <= 10%") for m in REQUEST_METRICS],
            client_one_way_s_min=pl.col("client_one_way_s").min(),
            client_one_way_s_max=pl.col("client_one_way_s").max()))
    print("observations more than 10× off the kept fit (Calibration.outliers):",
          *outliers or ["none"], sep="\n")


if __name__ == "__main__":
    main(sys.argv[1:])
