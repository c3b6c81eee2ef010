"""Print the roofline's error against published measurements (default factors, nothing fitted).

    .venv/bin/python bench/validation.py [--rows] [--sources] [--table PATH]
    .venv/bin/python bench/validation.py --steps DIR/step_timing.csv [--gpu h200-sxm]

Reads bench/validation/published_measurements.csv (one row per measurement, with its source URL)
and prints the median and worst absolute error per metric; --rows also prints every row,
--sources the same summary per source and metric. Then the KV-cache sizing against the measured
capacities of bench/validation/trtllm_kv_capacity.csv and against the KV pools vLLM sized in the
startup logs of bench/validation/vllm_kv_capacity.csv, and InferenceX's median TTFT of its
DeepSeek-R1 runs (bench/validation/inferencex_median_ttft.csv) against the model's. --table PATH
validates another table of the same columns instead (your own measurements, say); the KV-cache and
median-TTFT checks are then left out.

--steps compares instead the steps bench/device/step_timing.py timed on one GPU (default
h200-sxm) with the step formula's kernels: every case, and the median error per shape and mode.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from pipelines.roofline import load_catalog
from pipelines.roofline.validation import (
    read_measurements,
    summary,
    validate,
    validate_kv_capacity,
    validate_median_ttft,
    validate_step_timings,
    validate_vllm_kv_capacity,
)

TABLE = Path(__file__).resolve().parent / "validation" / "published_measurements.csv"
KV_CAPACITY = Path(__file__).resolve().parent / "validation" / "trtllm_kv_capacity.csv"
VLLM_KV_CAPACITY = KV_CAPACITY.with_name("vllm_kv_capacity.csv")
MEDIAN_TTFT = KV_CAPACITY.with_name("inferencex_median_ttft.csv")


def print_step_timings(catalog, path: str, gpu: str) -> None:
    timed = validate_step_timings(catalog, pl.read_csv(path), gpu)
    print(timed.select("case", "shape", "phase", "mode", "batch", "context_tokens", "new_tokens",
                       "attention_backend", (pl.col("median_s") * 1e3).alias("median_ms"),
                       (pl.col("model_s") * 1e3).alias("model_ms"),
                       pl.col("error").round(3), pl.col("bandwidth_fraction").round(3),
                       "status"))
    print(timed.filter(pl.col("error").is_not_null())
          .group_by("shape", "phase", "mode", maintain_order=True)
          .agg(rows=pl.len(), median_error=pl.col("error").median(),
               worst_abs_error=pl.col("error").abs().max()))


def option(argv: list[str], flag: str, default=None):
    """The value after `flag` in argv (`default` without the flag): a flag given last, with no
    value, is a usage message, not an IndexError traceback."""
    if flag not in argv:
        return default
    if argv.index(flag) + 1 == len(argv):
        sys.exit(f"validation: {flag} needs a value\n{__doc__.splitlines()[2]}"
                 f"\n{__doc__.splitlines()[3]}")
    return argv[argv.index(flag) + 1]


FLAGS = ("--rows", "--sources", "--table", "--steps", "--gpu")   # the docstring's usage


def main(argv: list[str]) -> None:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return
    unknown = [a for a in argv if a.startswith("-") and a not in FLAGS]
    if unknown:
        sys.exit(f"validation: unknown option {unknown[0]}\n{__doc__.splitlines()[2]}"
                 f"\n{__doc__.splitlines()[3]}")
    catalog = load_catalog()
    pl.Config.set_tbl_rows(200).set_tbl_cols(20).set_tbl_width_chars(200)
    if "--steps" in argv:
        gpu = option(argv, "--gpu", "h200-sxm")
        try:
            print_step_timings(catalog, option(argv, "--steps"), gpu)
        except (OSError, ValueError, pl.exceptions.PolarsError) as e:
            sys.exit(f"validation --steps: {e}")
        return
    table = Path(option(argv, "--table", TABLE))
    try:
        measurements = read_measurements(table)
        validated = validate(catalog, measurements)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"validation: {table}: {e}" if str(table) not in str(e) else f"validation: {e}")
    if "--rows" in argv:
        print(validated.select("source", "model", "gpu", "tp", "weight_dtype", "metric",
                               "prompt_tokens", "output_tokens", "batch", "qps", "concurrency",
                               "requests", "measured",
                               pl.col("predicted").round(5), pl.col("error").round(3)))
    if "--sources" in argv:
        print(summary(validated, by=("source", "metric")))
    print(f"{validated.height} rows from {validated['source'].n_unique()} sources")
    print(summary(validated))
    if table.resolve() != TABLE.resolve():
        return
    sizing = validate_kv_capacity(catalog, pl.read_csv(KV_CAPACITY))
    print(f"KV capacity: {sizing.height} measured maximum batches, predicted within"
          f" {sizing['error'].abs().median():.1%} (median) / {sizing['error'].abs().max():.1%} (worst)")
    if "--rows" in argv:
        print(sizing.select("model", "gpu", "tp", "prompt_tokens", "output_tokens",
                            "kv_memory_fraction", "max_sequences", "predicted",
                            pl.col("error").round(3)))
    logged = validate_vllm_kv_capacity(catalog, pl.read_csv(VLLM_KV_CAPACITY))
    print(f"vLLM KV capacity: {logged.height} startup logs, predicted"
          f" {logged['error'].min():+.1%} to {logged['error'].max():+.1%} (median"
          f" {logged['error'].median():+.1%}) of the tokens vLLM sized")
    if "--rows" in argv:
        print(logged.select("source", "engine_version", "model", "gpu", "tp",
                            "kv_memory_fraction", "measured", "predicted",
                            pl.col("error").round(3)))
    medians = validate_median_ttft(catalog, measurements, pl.read_csv(MEDIAN_TTFT))
    four = medians.filter(pl.col("concurrency") == 4)
    print(f"DeepSeek-R1 median TTFT (InferenceX, {medians.height} closed-loop runs, not in the"
          f" table above): {four['ratio'].min():.1f}-{four['ratio'].max():.1f} x the modelled at 4"
          f" clients, {medians['ratio'].min():.1f}-{medians['ratio'].max():.1f} x over 4-256"
          f" clients")
    if "--rows" in argv:
        print(medians.drop("source", "url").with_columns(
            pl.col("predicted").round(5), pl.col("ratio").round(2), pl.col("excess_s").round(4)))


if __name__ == "__main__":
    main(sys.argv[1:])
