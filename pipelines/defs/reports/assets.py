"""Reports: SQL steps over the replay (costs, shape ranking, fleet summary), the chart, report.md."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.reports.charts import save_chart, spend_share_chart
from pipelines.reports.text import headline, report_markdown
from pipelines.warehouse import read_table, run_sql, scalar


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
    "Request shapes (prompt x output bucket) ranked by share of spend, with dominant stage",
)
fleet_summary = sql_table_asset(
    "fleet_summary", ("fleet_summary",), ["request_costs", "fleet_timeline"],
    "Totals per trace and overall: tokens, GPU-hours, $ (attributed + idle), TTFT/TPOT percentiles",
)


@dg.asset(group_name="reports", deps=["shape_spend"])
def spend_share_chart_files(duckdb: DuckDBResource) -> dg.MaterializeResult:
    """Spend share by request shape, as PNG and as self-contained HTML."""
    with duckdb.get_connection() as conn:
        shapes = read_table(conn, "shape_spend")
    paths = save_chart(spend_share_chart(shapes), settings.reports_dir(), "spend_share")
    return dg.MaterializeResult(metadata={k: dg.MetadataValue.path(str(p)) for k, p in paths.items()})


@dg.asset(group_name="reports", deps=["shape_spend", "fleet_summary", "spend_share_chart_files"])
def report(duckdb: DuckDBResource) -> dg.MaterializeResult:
    """report.md: the headline, the fleet summary and the shape ranking, with the chart."""
    with duckdb.get_connection() as conn:
        summary = read_table(conn, "fleet_summary")
        shapes = read_table(conn, "shape_spend")
        deployment = scalar(conn, 
            "SELECT string_agg(DISTINCT deployment, ', ') FROM request_stages WHERE scenario = 'baseline'"
        )
    path = settings.reports_dir() / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_markdown(summary, shapes, deployment, "spend_share.png"))
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(path)),
        "headline": dg.MetadataValue.md(headline(summary, shapes)),
    })
