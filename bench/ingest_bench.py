"""Ingest benchmark: a 27-million-row Azure-2024-format CSV, read with `read_trace`.

The real 2024 week-long conversation trace (27,303,999 rows, about 1.1 GB) is not downloadable
here, so this script writes one of the same size and format into /tmp (never into the
repository): arrivals spread uniformly at random over the trace's week, 2024 timestamps (6
fractional digits + `+00:00`, and no fraction on a whole second, as in the real file), and
(ContextTokens, GeneratedTokens) pairs drawn with replacement from the real 2023 conversation
sample, so token values follow the 2023 distributions. Then it times `read_trace` on it (parse,
validate, sort) and the write of its canonical rows into a fresh DuckDB warehouse (what the
ingest asset does), and reports wall times and peak resident memory (ru_maxrss).

    .venv/bin/python bench/ingest_bench.py [--rows 27303999] [--keep]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "AzureLLMInferenceTrace_conv.csv"
WEEK_US = 7 * 24 * 3600 * 1_000_000
CHUNK = 3_000_000


def generate(path: Path, rows: int, seed: int = 0, bad_every: int = 0) -> None:
    """Write `rows` Azure-2024-format rows to `path`, chunk by chunk (bounded memory); with
    `bad_every` N, every Nth row's GeneratedTokens is 'x' (a row to reject)."""
    pairs = pl.read_csv(SAMPLE, columns=["ContextTokens", "GeneratedTokens"])
    start = pl.datetime(2024, 5, 12, time_zone="UTC")
    with path.open("wb") as out:
        out.write(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
        for i, first in enumerate(range(0, rows, CHUNK)):
            n = min(CHUNK, rows - first)
            lo, hi = first * WEEK_US // rows, (first + n) * WEEK_US // rows  # sorted overall
            us = np.sort(np.random.default_rng(seed + i).integers(lo, hi, n))
            chunk = pl.DataFrame({"us": us})
            chunk = pl.concat([chunk, pairs.sample(n, with_replacement=True, seed=seed + i)], how="horizontal")
            ts = (start + pl.duration(microseconds=pl.col("us"))).dt
            text = chunk.select(
                TIMESTAMP=pl.when(pl.col("us") % 1_000_000 == 0)
                .then(ts.strftime("%Y-%m-%d %H:%M:%S+00:00"))
                .otherwise(ts.strftime("%Y-%m-%d %H:%M:%S.%6f+00:00")),
                ContextTokens="ContextTokens",
                GeneratedTokens=pl.when((pl.int_range(first, first + n) % bad_every == 0) if bad_every else False)
                .then(pl.lit("x")).otherwise(pl.col("GeneratedTokens").cast(pl.String)),
            )
            body = text.write_csv(include_header=False, line_terminator="\r\n")
            out.write(body.rstrip("\r\n").encode() if first + n == rows else body.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=27_303_999)
    parser.add_argument("--path", type=Path, default=Path("/tmp/fleetspend_bench/azure_2024_conv_1week.csv"))
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    parser.add_argument("--bad-every", type=int, default=0, help="make every Nth row unusable")
    args = parser.parse_args()
    args.path.parent.mkdir(parents=True, exist_ok=True)
    if not args.path.exists():
        t0 = time.perf_counter()
        generate(args.path, args.rows, bad_every=args.bad_every)
        print(f"generated {args.rows:,} rows ({args.path.stat().st_size / 1e9:.2f} GB) "
              f"in {time.perf_counter() - t0:.1f} s: {args.path}")
    from pipelines.ingest_store import ensure_tables, replace_file
    from pipelines.formats import read_trace
    from pipelines.warehouse import WAREHOUSE_CONFIG

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    result = read_trace(args.path)
    elapsed = time.perf_counter() - t0
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"read_trace: {result.rows_read:,} rows read, {result.rows.height:,} accepted, "
          f"{result.rejected.height:,} rejected, format {result.format}")
    print(f"read_trace: wall {elapsed:.1f} s, peak RSS {peak_gb:.2f} GB (before {base / 1e6:.2f} GB)")
    warehouse = args.path.with_suffix(".duckdb")
    warehouse.unlink(missing_ok=True)
    t1 = time.perf_counter()
    with duckdb.connect(str(warehouse), config=WAREHOUSE_CONFIG) as conn:
        ensure_tables(conn)
        replace_file(conn, result, None)
        landed = conn.execute("SELECT count(*) FROM requests").fetchall()[0][0]
    written = time.perf_counter() - t1
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"warehouse write: {landed:,} rows in {written:.1f} s; read + write {elapsed + written:.1f} s, "
          f"peak RSS {peak_gb:.2f} GB")
    warehouse.unlink()
    if not args.keep:
        args.path.unlink()


if __name__ == "__main__":
    main()
