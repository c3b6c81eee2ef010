"""`report` embeds the chart specs report_charts_files saved instead of drawing every chart again,
and the page it writes is the one drawing them afresh would give."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.reports.assets import report, report_charts_files
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
        unserved = run_sql(conn, "summary_unserved_requests").fetchall()
        prices = run_sql(conn, "report_prices").fetchall()
    fresh = {stem: chart.to_dict() for stem, chart in report_charts(tables).items()}
    assert (reports / "report.html").read_text() == report_html(tables, deployment, fresh, caveats,
                                                                unserved, prices=prices)


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



def test_with_every_scenario_skipped_no_what_if_chart_is_drawn_or_left_behind(copied_run):
    """With every what-if scenario skipped, report_charts_files wrote what_if.png / .html / .json
    as axes without a bar (the report left them out), and a run after a run with scenarios
    left the earlier chart on disk looking current. Neither is drawn nor kept now, and the
    report still builds from the charts there are."""
    warehouse = DuckDBResource(database=str(copied_run / "w.duckdb"))
    with duckdb.connect(str(copied_run / "w.duckdb")) as conn:
        conn.execute("UPDATE what_if SET skipped = 'tp=3 cannot split the model'")
    reports = copied_run / "reports"
    assert (reports / "what_if.png").is_file()   # the demo's, from a run with scenarios
    report_charts_files(duckdb=warehouse)
    assert sorted(p.name for p in reports.glob("what_if.*")) == []
    assert all((reports / f"{stem}.json").is_file() for stem in CHARTS if stem != "what_if")
    report(duckdb=warehouse)
    assert 'id="chart-what_if"' not in (reports / "report.html").read_text()
    assert "what_if.png" not in (reports / "report.md").read_text()

def test_report_says_how_many_requests_the_replay_set_aside(copied_run):
    """Requests the deployment cannot serve are in no figure: report.md and report.html say so
    in one sentence before the headline's dollar figures, which a reader of the report alone saw
    nowhere."""
    with duckdb.connect(str(copied_run / "w.duckdb")) as conn:
        conn.execute("INSERT INTO unserved_requests VALUES ('t', 'd', 't:9', 900000, 20, 'is long'),"
                     " ('t', 'd', 't:12', 900000, 20, 'is long'), ('u', 'd', 'u:3', 900000, 2, 'too')")
    report(duckdb=DuckDBResource(database=str(copied_run / "w.duckdb")))
    said = ("**Left out:** 3 request(s) (t 2, u 1) were set aside, not replayed, because the"
            " deployment their trace replays on cannot serve them (e.g. t:9, which is long); every figure"
            " of this report leaves them out (`unserved_requests`).")
    md = (copied_run / "reports" / "report.md").read_text()
    assert md.index("**Caveat:**") < md.index(said) < md.index("**Decode owns")
    page = (copied_run / "reports" / "report.html").read_text()
    assert "<strong>Left out:</strong> 3 request(s) (t 2, u 1) were set aside" in page


def test_report_says_which_log_rows_were_rejected(copied_run):
    """Rows the ingest rejected are in no figure: report.md and report.html say so before the
    headline, as the summary does (a file with a few malformed rows passed the run without a
    word in the report)."""
    with duckdb.connect(str(copied_run / "w.duckdb")) as conn:
        conn.execute("UPDATE trace_files SET rows_read = rows_read + 2, rows_rejected = 2"
                     " WHERE file LIKE '%conv.csv'")
        [(file,)] = conn.sql("SELECT file FROM trace_files WHERE file LIKE '%conv.csv'").fetchall()
        conn.execute("INSERT INTO rejected_requests (source_file, line, raw, reason) VALUES"
                     " (?, 9, 'x', 'later'), (?, 4, 'y', 'GeneratedTokens is -3')", [file, file])
    report(duckdb=DuckDBResource(database=str(copied_run / "w.duckdb")))
    said = ("**Rows left out:** 2 of 19,368 rows of AzureLLMInferenceTrace_conv.csv (e.g. line 4:"
            " GeneratedTokens is -3) were rejected at ingest")
    md = (copied_run / "reports" / "report.md").read_text()
    assert md.index("**Caveat:**") < md.index(said) < md.index("**Decode owns")
    page = (copied_run / "reports" / "report.html").read_text()
    assert "<strong>Rows left out:</strong> 2 of 19,368 rows" in page
