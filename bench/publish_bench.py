"""What publishing costs: a run's working copy made and published (pipelines/publish.py) for
warehouses of growing size. The cost is two file copies and a CHECKPOINT, so it should grow
linearly with the file size and stay far below the replay time of the data it holds.

    .venv/bin/python bench/publish_bench.py [rows in millions ...]   (default: 1 10 30)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb

from pipelines.publish import Workspace


def build(path: Path, rows: int) -> None:
    """A request_stages-like table: ids, a trace label, and eight float columns."""
    with duckdb.connect(str(path)) as conn:
        conn.execute(
            "CREATE TABLE request_stages AS SELECT i AS request_id, 'trace-' || (i % 7) AS trace, "
            + ", ".join(f"random() * {k} AS c{k}" for k in range(1, 9))
            + " FROM range(?) t(i)", [rows])


def main(millions: list[float]) -> None:
    print("| rows | file size | begin (copy in) | commit (checkpoint + copy out + replace) | MB/s |")
    print("|---:|---:|---:|---:|---:|")
    for m in millions:
        with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
            published = Path(tmp) / "wh.duckdb"
            seed = Workspace(published, "seed")
            build(seed.begin(), int(m * 1e6))
            seed.commit()
            size = published.stat().st_size
            run = Workspace(published, "bench")
            t0 = time.perf_counter()
            run.begin()
            t1 = time.perf_counter()
            run.commit()
            t2 = time.perf_counter()
            mb = size / 1e6
            print(f"| {m:g} M | {mb:,.0f} MB | {t1 - t0:.2f} s | {t2 - t1:.2f} s | "
                  f"{2 * mb / (t2 - t0):,.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("millions", type=float, nargs="*", default=[1, 10, 30],
                        help="warehouse sizes, in millions of rows (default: 1 10 30)")
    main(parser.parse_args().millions)
