"""The report at scale: a synthetic trace (shapes drawn from the conv sample, Poisson arrivals at
45 requests/s, as in replay_bench.py) replayed as baseline and as one what-if scenario, then
every report SQL step (the report assets' own, pipelines/reports/sql_tables.py), timed per table,
and the charts. Charts are drawn from the aggregated tables, so their size does not grow with the
trace. Run: `.venv/bin/python bench/report_bench.py [N]`."""

from __future__ import annotations

import argparse
import json
import resource
import time
from dataclasses import replace

import duckdb
import polars as pl

from bench.replay_bench import REPLICAS_AT_70_PCT, synthetic
from pipelines.replay import replay_fleet
from pipelines.reports.charts import report_charts
from pipelines.reports.scenarios import FLEET_SCHEMA, Scenario, replay_scenarios
from pipelines.reports.sql_tables import SQL_TABLES
from pipelines.reports.text import ReportTables
from pipelines.roofline import load_catalog
from pipelines.roofline.catalog import load_shape_buckets
from pipelines.settings import reference_dir
from pipelines.warehouse import run_sql, write_table


def main(n: int) -> None:
    catalog = load_catalog()
    fleet = replace(catalog.deployment("azure-2023-70b-h100"), replicas=REPLICAS_AT_70_PCT)
    requests = synthetic(n).with_columns(
        trace=pl.lit("synthetic"), request_id=pl.int_range(pl.len()).cast(pl.String),
        model=pl.lit(None, pl.String), tenant=pl.lit(None, pl.String))
    start = time.perf_counter()
    base = replay_fleet(requests, fleet)
    labels = [pl.lit("synthetic").alias("trace"), pl.lit("baseline").alias("scenario"),
              pl.lit(fleet.name).alias("deployment")]
    runs = list(replay_scenarios(requests, catalog, fleet,
                                 [Scenario("fp8", "fp8 weights and KV", weights="fp8", kv_cache="fp8")]))
    stages = pl.concat(batch for run in runs for batch in run.stage_batches)
    fleets = pl.DataFrame([run.fleet for run in runs], schema=FLEET_SCHEMA)
    print(f"{n:,} requests: baseline + 1 scenario replayed in {time.perf_counter() - start:.1f} s")
    with duckdb.connect() as conn:
        for table in ("gpus", "prices"):
            write_table(conn, table, getattr(catalog, table))
        write_table(conn, "shape_buckets", load_shape_buckets(reference_dir()))
        write_table(conn, "roofline", pl.DataFrame([fleet.as_row()]))
        write_table(conn, "requests", requests)
        write_table(conn, "request_stages", base.stages.select(*labels, *base.stages.columns))
        write_table(conn, "fleet_timeline", base.timeline.select(*labels, *base.timeline.columns))
        write_table(conn, "scenario_stages", stages)
        write_table(conn, "scenario_fleets", fleets)
        for table in SQL_TABLES:  # the assets' steps, in an order valid without Dagster
            start = time.perf_counter()
            for step in table.steps:
                run_sql(conn, step)
            steps = ", ".join(f"sql/{step}.sql" for step in table.steps)
            print(f"  {table.name} ({steps}): {time.perf_counter() - start:.2f} s")
        tables = ReportTables.read(conn)
    start = time.perf_counter()
    specs = {stem: chart.to_dict() for stem, chart in report_charts(tables).items()}
    size = sum(len(json.dumps(s)) for s in specs.values())
    print(f"  charts: {time.perf_counter() - start:.2f} s, {size / 1e3:,.0f} kB of Vega-Lite specs")
    print(f"peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=1_000_000,
                        help="synthetic requests to replay (default: 1,000,000)")
    main(parser.parse_args().n)
