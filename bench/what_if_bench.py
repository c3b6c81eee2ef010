"""What-if replays: seconds per scenario of data/reference/scenarios.csv on the two samples
(both traces, each on its own fleet, as the `scenario_replays` asset runs them).
Run: `.venv/bin/python bench/what_if_bench.py`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import polars as pl

from pipelines.formats import read_azure_csv
from pipelines.replay import replay_fleet
from pipelines.reports.scenarios import load_scenarios, replay_scenarios
from pipelines.roofline import load_catalog
from pipelines.settings import reference_dir

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def main() -> None:
    catalog = load_catalog()
    baseline = catalog.deployment("azure-2023-70b-h100")
    requests = pl.concat([read_azure_csv(p).requests for p in sorted(SAMPLES.glob("*.csv"))])
    replay_fleet(requests.head(100), baseline)  # compile the replay loop outside the timings
    total = 0.0
    print("| scenario | requests | seconds |\n|---|---:|---:|")
    for s in load_scenarios(reference_dir() / "scenarios.csv"):
        start = time.perf_counter()
        for run in replay_scenarios(requests, catalog, baseline, [s]):
            for _ in run.stage_batches:
                pass
        seconds = time.perf_counter() - start
        total += seconds
        print(f"| {s.scenario} | {requests.height:,} | {seconds:.2f} |")
    print(f"| all | | {total:.2f} |")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    main()
