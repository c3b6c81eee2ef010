"""Reports: SQL steps over the replay (costs, shape ranking, stage breakdown, chargeback, fleet
summary and timeline, what-if; which steps build which table: pipelines/reports/sql_tables.py),
the charts, report.md and report.html."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.ingest_folder import duplicate_lines
from pipelines.reports.charts import (
    drawn_stems,
    load_chart_specs,
    remove_chart,
    report_charts,
    save_chart,
)
from pipelines.reports.html import report_html
from pipelines.reports.sql_tables import SQL_TABLES, SqlTable
from pipelines.reports.text import (
    CHARTS,
    REPORT_TABLES,
    ReportTables,
    headline,
    other_model_lines,
    report_markdown,
)
from pipelines.warehouse import run_sql, scalar


def sql_table_asset(table: SqlTable) -> dg.AssetsDefinition:
    """The asset of one report table: its sql/ steps, run on the run's warehouse connection."""

    @dg.asset(name=table.name, group_name="reports", deps=list(table.reads),
              description=table.description)
    def _asset(duckdb: DuckDBResource) -> dg.MaterializeResult:
        with duckdb.get_connection() as conn:
            for step in table.steps:
                run_sql(conn, step)
            return dg.MaterializeResult(metadata=table_metadata(conn, table.name))

    return _asset


# A list of assets, which dg.load_assets_from_modules collects like any other asset of the module.
sql_table_assets = [sql_table_asset(table) for table in SQL_TABLES]
# The charts and the report read the tables ReportTables reads.
REPORT_DEPS = list(REPORT_TABLES)


@dg.asset(group_name="reports", deps=REPORT_DEPS)
def report_charts_files(duckdb: DuckDBResource) -> dg.MaterializeResult:
    """Every report chart (pipelines/reports/charts.py) as PNG and self-contained HTML."""
    with duckdb.get_connection() as conn:
        tables = ReportTables.read(conn)
    metadata = {}
    charts = report_charts(tables)
    for stem, chart in charts.items():
        for kind, path in save_chart(chart, settings.reports_dir(), stem).items():
            metadata[f"{stem}_{kind}"] = dg.MetadataValue.path(str(path))
    for stem in CHARTS.keys() - charts.keys():   # no data this run: no stale chart left behind
        remove_chart(settings.reports_dir(), stem)
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(group_name="reports", deps=[*REPORT_DEPS, "report_charts_files", "roofline", "unserved_requests",
                                      "requests", "models", "fleet_timeline", "trace_files"])
def report(duckdb: DuckDBResource) -> dg.MaterializeResult:
    """report.md and report.html: the headline (with where each number comes from), the charts,
    the tables, the physics caveats of the replayed deployment (roofline.caveat), the trace
    files the last ingest could not read (failed_trace_files) and the rows it rejected, how many
    requests the replay set aside (unserved_requests), which no figure holds, and the traces
    whose log names another model than the deployment serves (other_model_lines), and the files of
    one log counted as two traces or more (duplicate_lines)."""
    with duckdb.get_connection() as conn:
        tables = ReportTables.read(conn)
        deployment = scalar(conn,
            "SELECT string_agg(DISTINCT deployment, ', ') FROM request_stages WHERE scenario = 'baseline'"
        )
        caveats = run_sql(conn, "report_caveats").fetchall()
        unserved = run_sql(conn, "summary_unserved_requests").fetchall()
        other_models = other_model_lines(conn)
        copies = duplicate_lines(conn)
        prices = run_sql(conn, "report_prices").fetchall()
        incomplete = run_sql(conn, "summary_incomplete_files").fetchall()
        failed = run_sql(conn, "summary_failed_files").fetchall()
    directory = settings.reports_dir()
    directory.mkdir(parents=True, exist_ok=True)
    md, page = directory / "report.md", directory / "report.html"
    try:  # the charts report_charts_files drew, not drawn again
        specs = load_chart_specs(directory, drawn_stems(tables))
    except FileNotFoundError as exc:
        raise dg.Failure(f"{exc.filename} is missing: materialize report_charts_files first") from None
    md.write_text(report_markdown(tables, deployment, {stem: f"{stem}.png" for stem in specs},
                                  caveats, unserved, other_models, copies, prices, incomplete,
                                  failed))
    page.write_text(report_html(tables, deployment, specs, caveats, unserved, other_models, copies,
                                prices, incomplete, failed))
    return dg.MaterializeResult(metadata={
        "report_md": dg.MetadataValue.path(str(md)),
        "report_html": dg.MetadataValue.path(str(page)),
        "headline": dg.MetadataValue.md(headline(tables)),
    })
