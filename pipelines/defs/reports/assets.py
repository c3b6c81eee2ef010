"""Reports: SQL steps over the replay (costs, shape ranking, stage breakdown, chargeback, fleet
summary and timeline, what-if), the charts, report.md and report.html."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.reports.charts import load_chart_specs, report_charts, save_chart
from pipelines.reports.html import report_html
from pipelines.reports.text import CHARTS, ReportTables, headline, report_markdown
from pipelines.warehouse import run_sql, scalar


def sql_table_asset(name: str, steps: tuple[str, ...], deps: list[str], description: str):
    """An asset that runs sql/<step>.sql for each step (the last creates table `name`)."""

    @dg.asset(name=name, group_name="reports", deps=deps, description=description)
    def _asset(duckdb: DuckDBResource) -> dg.MaterializeResult:
        with duckdb.get_connection() as conn:
            for step in steps:
                run_sql(conn, step)
            return dg.MaterializeResult(metadata=table_metadata(conn, name))

    return _asset


request_costs = sql_table_asset(
    "request_costs", ("deployment_prices", "request_costs"), ["request_stages", "roofline", "prices"],
    "request_stages joined with the price book: $ per stage and in total",
)
shape_spend = sql_table_asset(
    "shape_spend", ("request_shapes", "shape_spend"), ["request_costs", "shape_buckets"],
    "Request shapes (prompt x output bucket) ranked by share of spend: stages, bound and lever",
)
stage_breakdown = sql_table_asset(
    "stage_breakdown", ("stage_breakdown",), ["shape_spend"],
    "Per shape and overall: each stage's share of latency, GPU time and spend",
)
chargeback = sql_table_asset(
    "chargeback", ("chargeback",), ["request_costs", "requests"],
    "Attributed spend by model and by tenant (empty when the traces name neither)",
)
fleet_summary = sql_table_asset(
    "fleet_summary", ("fleet_summary",), ["request_costs", "fleet_timeline"],
    "Totals per trace and overall: tokens, GPU-hours, $ (attributed + idle), TTFT/TPOT percentiles",
)
fleet_timeline_minute = sql_table_asset(
    "fleet_timeline_minute", ("fleet_timeline_minute",), ["request_costs", "fleet_timeline"],
    "The fleet per trace and minute: utilization, sequences, KV use, queue, arrivals, $",
)
what_if = sql_table_asset(
    "what_if", ("what_if",), ["scenario_stages", "scenario_fleets", "shape_spend", "fleet_summary"],
    "Per scenario and shape: Δ spend and Δ p95 TTFT/TPOT of a what-if replay vs the baseline",
)
REPORT_DEPS = ["shape_spend", "stage_breakdown", "chargeback", "fleet_summary",
               "fleet_timeline_minute", "what_if"]


@dg.asset(group_name="reports", deps=REPORT_DEPS)
def report_charts_files(duckdb: DuckDBResource) -> dg.MaterializeResult:
    """Every report chart (pipelines/reports/charts.py) as PNG and self-contained HTML."""
    with duckdb.get_connection() as conn:
        tables = ReportTables.read(conn)
    metadata = {}
    for stem, chart in report_charts(tables).items():
        for kind, path in save_chart(chart, settings.reports_dir(), stem).items():
            metadata[f"{stem}_{kind}"] = dg.MetadataValue.path(str(path))
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(group_name="reports", deps=[*REPORT_DEPS, "report_charts_files", "roofline"])
def report(duckdb: DuckDBResource) -> dg.MaterializeResult:
    """report.md and report.html: the headline (with where each number comes from), the charts,
    the tables, and the physics caveats of the replayed deployment (roofline.caveat)."""
    with duckdb.get_connection() as conn:
        tables = ReportTables.read(conn)
        deployment = scalar(conn,
            "SELECT string_agg(DISTINCT deployment, ', ') FROM request_stages WHERE scenario = 'baseline'"
        )
        caveats = run_sql(conn, "report_caveats").fetchall()
    directory = settings.reports_dir()
    directory.mkdir(parents=True, exist_ok=True)
    md, page = directory / "report.md", directory / "report.html"
    try:  # the charts report_charts_files drew, not drawn again
        specs = load_chart_specs(directory, CHARTS)
    except FileNotFoundError as exc:
        raise dg.Failure(f"{exc.filename} is missing: materialize report_charts_files first") from None
    md.write_text(report_markdown(tables, deployment, {stem: f"{stem}.png" for stem in specs},
                                  caveats))
    page.write_text(report_html(tables, deployment, specs, caveats))
    return dg.MaterializeResult(metadata={
        "report_md": dg.MetadataValue.path(str(md)),
        "report_html": dg.MetadataValue.path(str(page)),
        "headline": dg.MetadataValue.md(headline(tables)),
    })
