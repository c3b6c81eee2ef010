"""What-if replays: seconds per scenario of data/reference/scenarios.csv on the two samples
(both traces, each on its own fleet, as the `scenario_replays` asset runs them).
Run: `.venv/bin/python bench/what_if_bench.py`."""

from __future__ import annotations

import time
from pathlib import Path

from pipelines.formats import read_azure_csv
from pipelines.replay import replay_fleet
from pipelines.reports.scenarios import load_scenarios, scenario_deployment, scenario_requests
from pipelines.roofline import load_catalog
from pipelines.settings import reference_dir

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def main() -> None:
    catalog = load_catalog()
    baseline = catalog.deployment("azure-2023-70b-h100")
    traces = [read_azure_csv(p).requests for p in sorted(SAMPLES.glob("*.csv"))]
    replay_fleet(traces[0].head(100), baseline)  # compile the replay loop outside the timings
    total = 0.0
    print("| scenario | requests | seconds |\n|---|---:|---:|")
    for s in load_scenarios(reference_dir() / "scenarios.csv"):
        deployment = scenario_deployment(catalog, baseline, s)
        start = time.perf_counter()
        for trace in traces:
            replay_fleet(scenario_requests(trace, s), deployment)
        seconds = time.perf_counter() - start
        total += seconds
        print(f"| {s.scenario} | {sum(t.height for t in traces):,} | {seconds:.2f} |")
    print(f"| all | | {total:.2f} |")


if __name__ == "__main__":
    main()
