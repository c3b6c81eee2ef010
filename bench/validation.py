"""Print the roofline's error against published measurements (default factors, nothing fitted).

    .venv/bin/python bench/validation.py [--rows] [--sources]

Reads bench/validation/published_measurements.csv (one row per measurement, with its source URL)
and prints the median and worst absolute error per metric; --rows also prints every row,
--sources the same summary per source and metric. Then the KV-cache sizing against the measured
capacities of bench/validation/trtllm_kv_capacity.csv.
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
)

TABLE = Path(__file__).resolve().parent / "validation" / "published_measurements.csv"
KV_CAPACITY = Path(__file__).resolve().parent / "validation" / "trtllm_kv_capacity.csv"


def main(argv: list[str]) -> None:
    catalog = load_catalog()
    validated = validate(catalog, read_measurements(TABLE))
    pl.Config.set_tbl_rows(200).set_tbl_cols(20).set_tbl_width_chars(200)
    if "--rows" in argv:
        print(validated.select("source", "model", "gpu", "tp", "weight_dtype", "metric",
                               "prompt_tokens", "output_tokens", "batch", "qps", "concurrency",
                               "measured",
                               pl.col("predicted").round(5), pl.col("error").round(3)))
    if "--sources" in argv:
        print(summary(validated, by=("source", "metric")))
    print(f"{validated.height} rows from {validated['source'].n_unique()} sources")
    print(summary(validated))
    sizing = validate_kv_capacity(catalog, pl.read_csv(KV_CAPACITY))
    print(f"KV capacity: {sizing.height} measured maximum batches, predicted within"
          f" {sizing['error'].abs().median():.1%} (median) / {sizing['error'].abs().max():.1%} (worst)")
    if "--rows" in argv:
        print(sizing.select("model", "gpu", "tp", "prompt_tokens", "output_tokens",
                            "kv_memory_fraction", "max_sequences", "predicted",
                            pl.col("error").round(3)))


if __name__ == "__main__":
    main(sys.argv[1:])
