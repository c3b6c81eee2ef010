"""`report` embeds the chart specs report_charts_files saved instead of drawing every chart again,
and the page it writes is the one drawing them afresh would give."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.reports.assets import report
from pipelines.reports.charts import report_charts
from pipelines.reports.html import report_html
from pipelines.reports.text import CHARTS, ReportTables
from pipelines.warehouse import run_sql


@pytest.fixture()
def copied_run(demo_run, tmp_path, monkeypatch):
    """The demo's warehouse and reports folder, copied so the test may change them."""
    shutil.copytree(demo_run / "reports", tmp_path / "reports")
    shutil.copy(demo_run / "warehouse" / "fleetspend.duckdb", tmp_path / "w.duckdb")
    monkeypatch.setenv("FLEETSPEND_REPORTS_DIR", str(tmp_path / "reports"))
    return tmp_path


def test_every_chart_spec_is_saved_and_the_page_matches_fresh_charts(demo_run):
    reports = demo_run / "reports"
    assert all((reports / f"{stem}.json").is_file() for stem in CHARTS)
    with duckdb.connect(str(demo_run / "warehouse" / "fleetspend.duckdb"), read_only=True) as conn:
        tables = ReportTables.read(conn)
        deployment = conn.sql("SELECT string_agg(DISTINCT deployment, ', ') FROM request_stages"
                              " WHERE scenario = 'baseline'").fetchall()[0][0]
        caveats = run_sql(conn, "report_caveats").fetchall()
    fresh = {stem: chart.to_dict() for stem, chart in report_charts(tables).items()}
    assert (reports / "report.html").read_text() == report_html(tables, deployment, fresh, caveats)


def test_report_embeds_the_saved_specs(copied_run):
    spec_file = copied_run / "reports" / "pareto.json"
    spec = json.loads(spec_file.read_text())
    spec["title"] = "drawn once by report_charts_files"
    spec_file.write_text(json.dumps(spec))
    report(duckdb=DuckDBResource(database=str(copied_run / "w.duckdb")))
    assert "drawn once by report_charts_files" in (copied_run / "reports" / "report.html").read_text()


def test_report_without_saved_charts_names_what_to_run(copied_run):
    (copied_run / "reports" / "what_if.json").unlink()
    with pytest.raises(dg.Failure, match="what_if.json is missing: materialize report_charts_files"):
        report(duckdb=DuckDBResource(database=str(copied_run / "w.duckdb")))
