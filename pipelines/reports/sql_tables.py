"""The report tables the sql/ steps build, once: the Dagster assets (pipelines/defs/reports/
assets.py) are made from this list, and bench/report_bench.py runs the same steps in its order
without Dagster, so a new step or a reordering cannot reach one and miss the other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SqlTable:
    """Table `name`, built by running sql/<step>.sql for each of `steps` (the last creates it)
    over the tables in `reads` (which become its asset's deps)."""

    name: str
    steps: tuple[str, ...]
    reads: tuple[str, ...]
    description: str


# In an order that builds every table after the ones of this list it reads (a test checks it),
# so running the steps top to bottom, as the bench does, is a valid order without Dagster.
SQL_TABLES = (
    SqlTable("request_costs", ("deployment_prices", "request_costs"),
             ("request_stages", "roofline", "prices"),
             "request_stages joined with the price book: $ per stage and in total"),
    SqlTable("shape_spend", ("request_shapes", "shape_spend"), ("request_costs", "shape_buckets"),
             "Request shapes (prompt x output bucket) ranked by share of spend: stages, bound and lever"),
    SqlTable("stage_breakdown", ("stage_breakdown",), ("shape_spend",),
             "Per shape and overall: each stage's share of latency, GPU time and spend"),
    SqlTable("chargeback", ("chargeback",), ("request_costs", "requests"),
             "Attributed spend by model and by tenant (empty when the traces name neither)"),
    SqlTable("fleet_summary", ("fleet_summary",), ("request_costs", "fleet_timeline", "roofline"),
             "Totals per trace and overall over the replayed span: tokens, GPU-hours, $ (attributed "
             "+ idle, idle share), batch and KV use against their limits, TTFT/TPOT percentiles"),
    # request_costs: its steps create the deployment_prices view this one reads the price from
    SqlTable("deployment_summary", ("deployment_summary",),
             ("fleet_summary", "fleet_timeline", "request_costs"),
             "fleet_summary's trace rows added up per deployment the baseline replayed on: its "
             "traces, requests, GPU-hours, $ (attributed + idle, idle share), $ per 1M output "
             "tokens, its $ per GPU-hour"),
    SqlTable("fleet_timeline_minute", ("fleet_timeline_minute",), ("request_costs", "fleet_timeline"),
             "The fleet per trace and minute: utilization, sequences, KV use, queue, arrivals, $"),
    SqlTable("what_if", ("what_if",), ("scenario_stages", "scenario_fleets", "shape_spend", "fleet_summary"),
             "Per scenario and shape: Δ busy spend (and per day), Δ p95 TTFT/TPOT of a what-if replay "
             "vs the baseline; for all shapes the fleet's Δ cost (busy + idle, and per day) and each "
             "trace's worst Δ p95"),
)
