"""report.md and report.html name the trace files the last ingest could not read: the run
succeeds on such a file (one bad upload must not hold back the reports), the summary and the
ingest's check named it, and a reader of the report alone saw fleet figures that silently
missed a whole upload."""

from __future__ import annotations

import html

import dagster as dg
import pytest

from pipelines.definitions import build_defs
from tests.operations.conftest import head_of_sample
from tests.reports.test_report_html import chromium, needs_chromium

CONV = "AzureLLMInferenceTrace_conv.csv"
# the header of an Azure LLM trace with ContextTokens misspelled: the ingest cannot tell its format
MISSPELLED = "TIMESTAMP,ContextToken,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The nightly job on a folder of one good log and one the ingest cannot read; returns the
    reports folder and the unreadable file's path, which its stored error begins with."""
    tmp = tmp_path_factory.mktemp("failed_file")
    traces = tmp / "traces"
    head_of_sample(traces, CONV, 200)
    (traces / "today.csv").write_text(MISSPELLED)
    mp = pytest.MonkeyPatch()
    mp.setenv("FLEETSPEND_TRACE_DIR", str(traces))
    mp.setenv("FLEETSPEND_REPORTS_DIR", str(tmp / "reports"))
    mp.delenv("FLEETSPEND_REFERENCE_DIR", raising=False)
    mp.delenv("FLEETSPEND_DEPLOYMENT", raising=False)
    try:
        with dg.DagsterInstance.ephemeral() as instance:
            result = build_defs(tmp / "wh" / "fleetspend.duckdb").resolve_job_def(
                "nightly").execute_in_process(instance=instance)
    finally:
        mp.undo()
    assert result.success
    [check] = [e.event_specific_data for e in result.all_events
               if e.event_type_value == "ASSET_CHECK_EVALUATION"
               and e.event_specific_data.check_name == "every_trace_file_ingested"]
    assert not check.passed
    return tmp / "reports", str(traces / "today.csv")


def test_the_report_names_a_file_the_last_ingest_could_not_read(reports):
    folder, path = reports
    md = (folder / "report.md").read_text()
    said = ("**Trace files not read:** the last ingest could not read 1 trace file; what it holds"
            " now is in no figure of this report (`failed_trace_files`):")
    assert said in md
    item = (f"- {path}: cannot tell the log format from its first line"
            f" 'TIMESTAMP,ContextToken,GeneratedTokens' (it has the other columns of an Azure LLM"
            f" trace but lacks ContextTokens);")
    assert item in md
    assert md[md.index(item):].splitlines()[0].endswith(
        " — never ingested: none of its requests is in any figure")
    assert md.index("**Caveat:**") < md.index(said) < md.index(item) < md.index("**Decode owns")


def test_report_html_names_it_too(reports):
    folder, path = reports
    page = (folder / "report.html").read_text()
    assert ("<p><strong>Trace files not read:</strong> the last ingest could not read 1 trace"
            " file; what it holds now is in no figure of this report") in page
    assert html.escape(f"{path}: cannot tell the log format from its first line"
                       f" 'TIMESTAMP,ContextToken,GeneratedTokens'") in page


@needs_chromium
def test_the_page_a_browser_shows_names_it(reports, tmp_path):
    folder, path = reports
    dom = chromium(tmp_path, "--dump-dom", (folder / "report.html").as_uri()).stdout
    assert "Trace files not read:" in dom
    assert html.escape(f"{path}: cannot tell the log format") in dom
