"""The whole asset graph on the real sample traces, into a temporary warehouse."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import timezone

import duckdb
import pytest

from pipelines import summary
from pipelines.definitions import defs
from pipelines.formats.common import sha256_of
from pipelines.ingest_store import record_failures
from pipelines.reports.text import CHARTS, ReportTables, headline_facts, report_markdown
from pipelines.warehouse import run_sql, scalar

SAMPLE_ROWS = 8_819 + 19_366


def test_asset_graph_snapshot():
    """The asset keys and checks users see in the UI; changing them is a deliberate act."""
    graph = defs.resolve_asset_graph()
    assert sorted(k.to_user_string() for k in graph.get_all_asset_keys()) == [
        "calibration", "calibration_errors", "chargeback", "deployment_summary", "deployments",
        "fleet_summary",
        "fleet_timeline", "fleet_timeline_minute", "gpu_efficiency", "gpus", "models", "prices",
        "rejected_requests", "report", "report_charts_files", "request_costs", "request_stages",
        "requests", "roofline", "scenario_fleets", "scenario_stages", "shape_buckets", "shape_spend",
        "stage_breakdown", "trace_files", "unserved_requests", "what_if",
    ]
    assert sorted(f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys) == [
        "request_stages:every_request_replayed_or_set_aside",
        "request_stages:gpu_seconds_conserved",
        "request_stages:no_negative_stage",
        "request_stages:replayed_model_is_the_logged_one",
        "request_stages:ttft_covers_prefill",
        "requests:rows_read_equal_accepted_plus_rejected",
        "scenario_stages:every_scenario_replays_every_request",
        "scenario_stages:scenario_gpu_seconds_conserved",
        "shape_spend:every_request_has_a_shape",
        "trace_files:every_trace_file_ingested",
        "unserved_requests:every_request_served",
    ]


def test_the_readme_names_every_asset_check_the_ui_shows():
    """README "The Dagster UI" lists the asset checks a user finds there: the two the set-aside
    added (every_request_replayed_or_set_aside, every_request_served) were left out of it."""
    section = (summary.settings.ROOT / "README.md").read_text().split("\n## The Dagster UI\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    unnamed = [k.name for k in defs.resolve_asset_graph().asset_check_keys if f"`{k.name}`" not in section]
    assert unnamed == []



def test_every_asset_and_check_says_in_the_ui_what_it_is_for():
    """The UI shows each asset's and check's description beside it (the function's docstring
    where no spec gives one). The ingest's balance check said only what its failure does, not
    what it checks."""
    graph = defs.resolve_asset_graph()
    assert [k.to_user_string() for k in graph.get_all_asset_keys()
            if not (graph.get(k).description or "").strip()] == []
    described = {k.name: graph.get_check_spec(k).description or "" for k in graph.asset_check_keys}
    assert [name for name, text in described.items() if not text.strip()] == []
    assert described["rows_read_equal_accepted_plus_rejected"].startswith(
        "Per trace file, the rows read = the rows accepted + the rows rejected")


def test_the_readme_names_the_assets_materialized_together():
    """`dagster asset materialize --select request_stages` stops with Dagster's
    DagsterInvalidSubsetError traceback: the replay writes its three tables in one multi-asset.
    README "The Dagster UI" names every such set, and each selection it offers takes one whole."""
    section = (summary.settings.ROOT / "README.md").read_text().split("\n## The Dagster UI\n", 1)[1]
    paragraph = section.split("Some assets are one computation", 1)[1].split("The lineage page", 1)[0]
    graph = defs.resolve_asset_graph()
    together = [sorted(k.to_user_string() for k in a.keys) for a in defs.assets if len(a.keys) > 1]
    assert [keys for keys in together if any(f"`{k}`" not in paragraph for k in keys)] == []
    offered = re.findall(r"`--select\s+'?([^`']+)'?`", paragraph)
    assert len(offered) == 4
    for selection in offered:
        kind, _, name = selection.partition(":")   # 'group:replay', or the CLI's list of keys
        selected = sorted(k.to_user_string() for k in graph.get_all_asset_keys()
                          if (graph.get(k).group_name == name if kind == "group"
                              else k.to_user_string() in selection.split(",")))
        assert selected in together, selection


def test_every_sample_row_is_ingested_and_replayed(demo_conn):
    assert scalar(demo_conn, "SELECT count(*) FROM requests") == SAMPLE_ROWS
    assert scalar(demo_conn, "SELECT sum(rows_read - rows_accepted - rows_rejected) FROM trace_files") == 0
    assert scalar(demo_conn, "SELECT count(DISTINCT trace) FROM request_stages") == 2
    assert scalar(demo_conn, "SELECT count(*) FROM request_costs WHERE total_usd > 0") == SAMPLE_ROWS


def test_shape_spend_shares_add_up(demo_conn):
    pct, requests, cum_last = demo_conn.sql(
        "SELECT sum(pct_spend), sum(requests), max(cum_pct_spend) FROM shape_spend"
    ).fetchall()[0]
    assert pct == pytest.approx(100.0)
    assert cum_last == pytest.approx(100.0)
    assert requests == SAMPLE_ROWS
    # The ranking is by spend, and a chat trace's biggest shapes are decode-dominated.
    top = demo_conn.sql("SELECT dominant_stage, cost_stage FROM shape_spend WHERE rank = 1").fetchall()[0]
    assert top == ("decode", "decode")


def test_fleet_summary_is_consistent_with_request_costs(demo_conn):
    fleet = demo_conn.sql("FROM fleet_summary WHERE trace = 'all'").pl().row(0, named=True)
    attributed = scalar(demo_conn, "SELECT sum(total_usd) FROM request_costs")
    assert fleet["requests"] == SAMPLE_ROWS
    assert fleet["attributed_usd"] == pytest.approx(attributed, rel=1e-9)
    assert fleet["spend_usd"] == pytest.approx(fleet["attributed_usd"] + fleet["idle_usd"], rel=1e-12)
    assert 0.0 < fleet["idle_share"] < 1.0
    assert fleet["p95_ttft_s"] > fleet["p50_ttft_s"] > 0


def test_default_fleet_queues_in_bursts(demo_conn):
    """The code trace's bursts of long prompts saturate its replicas: queueing must appear."""
    code = demo_conn.sql("FROM fleet_summary WHERE trace LIKE '%code'").pl().row(0, named=True)
    assert code["p95_queue_s"] > 1.0


def test_default_fleet_utilization_is_plausible(demo_conn):
    """The default deployment is sized for 50-80% mean busy share across the fleet."""
    idle_share = scalar(demo_conn, "SELECT idle_share FROM fleet_summary WHERE trace = 'all'")
    assert 0.2 <= idle_share <= 0.5


def test_stage_shares_add_up_per_shape(demo_conn):
    bad = demo_conn.sql(
        "SELECT shape FROM stage_breakdown GROUP BY shape HAVING abs(sum(pct_latency) - 100) > 1e-9"
        " OR abs(sum(pct_gpu_time) - 100) > 1e-9 OR abs(sum(pct_spend) - 100) > 1e-9").fetchall()
    assert bad == []
    shapes = scalar(demo_conn, "SELECT count(*) FROM shape_spend")
    assert scalar(demo_conn, "SELECT count(DISTINCT shape) FROM stage_breakdown") == shapes + 1


def test_every_scenario_is_a_full_replay(demo_conn):
    """Each scenario replays every sample request, and a what_if row exists per shape and for all."""
    per_scenario = demo_conn.sql("SELECT scenario, count(*) FROM scenario_stages GROUP BY 1").fetchall()
    assert len(per_scenario) >= 7 and all(n == SAMPLE_ROWS for _, n in per_scenario)
    shapes = scalar(demo_conn, "SELECT count(*) FROM shape_spend")
    assert scalar(demo_conn, "SELECT count(*) FROM what_if") == len(per_scenario) * (shapes + 1)
    assert scalar(demo_conn, "SELECT count(*) FROM what_if WHERE shape = 'all' AND requests <> ?",
                  [SAMPLE_ROWS]) == 0


def test_what_if_levers_point_the_right_way(demo_conn):
    rows = dict(demo_conn.sql("SELECT scenario, delta_fleet_usd FROM what_if WHERE shape = 'all'").fetchall())
    # Fewer replicas rent fewer GPUs; fp8 on the same GPUs costs the same per hour (the span barely moves).
    assert rows["replicas-2"] < 0 < rows["replicas-4"]
    assert abs(rows["fp8"]) < 0.01 * scalar(demo_conn, "SELECT spend_usd FROM fleet_summary WHERE trace = 'all'")
    fp8 = demo_conn.sql("FROM what_if WHERE scenario = 'fp8' AND shape = 'all'").pl().row(0, named=True)
    assert fp8["delta_usd"] < 0 and fp8["delta_p95_tpot_s"] < 0
    # The bill per day is GPUs x price: 8 of 24 GPUs fewer at $6.155 is -$1,181.76/day, and a lever
    # on the same GPUs changes it by nothing, however much sooner its replay ends.
    per_day = dict(demo_conn.sql("SELECT scenario, delta_fleet_usd_per_day FROM what_if"
                                 " WHERE shape = 'all'").fetchall())
    assert per_day["replicas-2"] == pytest.approx(-8 * 6.155 * 24, rel=1e-6)
    assert per_day["fp8"] == pytest.approx(0, abs=1e-6) and per_day["tp2-fp8"] == pytest.approx(0, abs=1e-6)


def test_the_demos_price_plan_scenario_is_the_baselines_gpu_time_at_lambdas_price(demo_conn):
    """The shipped lambda-on-demand replays every request with the baseline's GPU-seconds and
    latency; its busy and fleet dollars are the baseline's at $3.99 instead of $6.155 per
    GPU-hour, and `change` says so."""
    row = demo_conn.sql("FROM what_if WHERE scenario = 'lambda-on-demand' AND shape = 'all'").pl().row(0, named=True)
    assert row["change"] == "price coreweave on-demand $6.155 → lambda on-demand $3.99 per GPU-hour"
    assert row["price_only"] and row["skipped"] is None and row["requests"] == SAMPLE_ROWS
    assert row["spend_usd"] == pytest.approx(row["baseline_usd"] * 3.99 / 6.155, rel=1e-9)
    assert row["fleet_spend_usd"] == pytest.approx(row["baseline_fleet_usd"] * 3.99 / 6.155, rel=1e-9)
    assert row["delta_p95_ttft_s"] == row["delta_p95_tpot_s"] == 0
    assert row["delta_usd_per_day"] < 0 and row["delta_fleet_usd_per_day"] < row["delta_usd_per_day"]
    moved = scalar(demo_conn, "SELECT count(*) FROM scenario_stages AS s JOIN request_stages AS b"
                              " USING (trace, request_id) WHERE s.scenario = 'lambda-on-demand'"
                              " AND b.scenario = 'baseline' AND s.gpu_s <> b.gpu_s")
    assert moved == 0


def test_chargeback_is_empty_for_the_azure_samples(demo_conn):
    """The Azure traces name no model or tenant: the table exists, with no rows."""
    assert scalar(demo_conn, "SELECT count(*) FROM requests WHERE model IS NOT NULL OR tenant IS NOT NULL") == 0
    assert scalar(demo_conn, "SELECT count(*) FROM chargeback") == 0


def test_timeline_covers_the_replay(demo_conn):
    arrivals, spend = demo_conn.sql("SELECT sum(arrivals), sum(spend_usd) FROM fleet_timeline_minute").fetchall()[0]
    assert arrivals == SAMPLE_ROWS
    assert spend == pytest.approx(scalar(demo_conn, "SELECT spend_usd FROM fleet_summary WHERE trace = 'all'"))


def test_headline_numbers_come_from_the_tables(demo_run, demo_conn):
    """Every number in the headline is the rounded value of the table cell its source names."""
    tables = ReportTables.read(demo_conn)
    facts = headline_facts(tables)
    decode = scalar(demo_conn, "SELECT pct_spend FROM stage_breakdown WHERE shape = 'all' AND stage = 'decode'")
    top3 = scalar(demo_conn, "SELECT cum_pct_spend FROM shape_spend WHERE rank = 3")
    idle = scalar(demo_conn, "SELECT idle_usd / spend_usd FROM fleet_summary WHERE trace = 'all'")
    assert facts[0].text.startswith(f"Decode owns {decode:.0f}%")
    assert f"are {top3:.0f}% of it" in facts[1].text
    assert f"idle GPUs are {100 * idle:.0f}%" in facts[2].text
    best = demo_conn.sql(
        "SELECT scenario, delta_usd_per_day FROM what_if WHERE shape = 'all' AND delta_usd_per_day < 0"
        " AND delta_p95_ttft_s <= 0 AND delta_p95_tpot_s <= 0 AND NOT price_only"
        " ORDER BY delta_usd_per_day LIMIT 1").fetchall()
    assert len(facts) == 4 and best
    assert f"'{best[0][0]}'" in facts[3].text and f"${-best[0][1]:,.0f}/day" in facts[3].text
    report = (demo_run / "reports" / "report.md").read_text()
    assert all(f.source in report for f in facts)


def test_report_says_the_caveats_it_is_given(demo_run, demo_conn):
    """The demo's deployment (Llama-3.1-70B on 4 x H100) is under the tensor-parallel caveat,
    which the report says once, before its first dollar figure. Its what-if fleets add none: the
    B200 fleet (tp 4 too) is under the same caveat, which the baseline already says, and the tp-2
    fleet under none."""
    tables = ReportTables.read(demo_conn)
    said = run_sql(demo_conn, "report_caveats").fetchall()
    assert [section for section, _ in said] == ["baseline"]
    assert said[0][1].startswith("azure-2023-70b-h100: Tensor parallelism 4-8 under heavy decode")
    b200 = demo_conn.sql("SELECT caveat FROM scenario_fleets WHERE scenario = 'b200'").fetchall()
    assert b200 and all(c.startswith("Tensor parallelism 4-8") for (c,) in b200)
    text = (demo_run / "reports" / "report.md").read_text()
    assert text.count("Tensor parallelism 4-8") == 1
    assert text.index("**Caveat:** azure-2023-70b-h100: Tensor parallelism") < text.index("$")
    charts = {stem: f"{stem}.png" for stem in CHARTS}
    warned = report_markdown(tables, "azure-2023-70b-h100", charts,
                             [("baseline", "azure-2023-70b-h100: it is off"),
                              ("what_if", "what-if `b200`: so is this")])
    assert warned.index("**Caveat:** azure-2023-70b-h100: it is off") < warned.index("$")
    assert warned.index("## What would cut it") < warned.index("- what-if `b200`: so is this")


def test_report_files(demo_run):
    reports = demo_run / "reports"
    text = (reports / "report.md").read_text()
    assert text.startswith("# fleetspend report")
    assert "Decode owns" in text and "| # | shape |" in text and "## What would cut it" in text
    for stem in ("pareto", "heatmap", "stage_shares", "timeline", "what_if"):
        assert f"({stem}.png)" in text
        png = (reports / f"{stem}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, stem
        html = (reports / f"{stem}.html").read_text()
        assert "vega" in html and "<script src=\"http" not in html  # inline: viewable offline


def test_the_demos_what_if_tables_say_what_the_cap_cuts_and_a_shape_against_its_lever(
        demo_run, monkeypatch, capsys):
    """output-cap-256 read a plain -2.05% beside the levers in report.md, report.html and the
    summary while it cuts 6,614 of 28,185 answers short; its row says so now, and the other rows
    read as they did. Under the table, one sentence says why a shape's delta can go against its
    scenario's (tp2-fp8: -7.51% of busy dollars, its shape #1 +2.79%)."""
    cut = "cuts 6,614 of 28,185 answers short, 25.94% of all output tokens"
    against = ("A shape's Δ spend % in the `what_if` table can have the opposite sign to its"
               " scenario's: under `tp2-fp8`, shape #1 'medium prompt / long answer' changes by"
               " +2.79% while all shapes change by -7.51%, because")
    report = (demo_run / "reports" / "report.md").read_text()
    assert f"\n| output-cap-256 | outputs capped at 256 tokens; {cut} | 91.45 | -2.05 |" in report
    assert "\n| fp8 | weights bf16 → fp8; KV cache bf16 → fp8 | 88.06 | -5.68 |" in report
    assert f" | 1,408 |\n\n{against}" in report   # the table's last row (b200), then the sentence
    html = (demo_run / "reports" / "report.html").read_text()
    assert f"<td>outputs capped at 256 tokens; {cut}</td>" in html
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(demo_run / "warehouse" / "fleetspend.duckdb"))
    assert summary.main() == 0
    out = capsys.readouterr().out
    assert f"\n| output-cap-256; {cut} | 91.45 | -2.05 |" in out and "\n| fp8 | 88.06 | -5.68 |" in out
    assert f"\n{against}" in out


def test_summary_names_trace_files_the_warehouse_lacks(demo_run, monkeypatch, capsys):
    """`make demo` and cron end with the summary: a file of the trace folder that arrived since
    the last run is named before the figures that leave it out. The folder is the one the
    warehouse's files came from, whatever FLEETSPEND_TRACE_DIR the summary runs with (unset by
    hand, the default folder would hide the real one's files)."""
    listed = summary.trace_files
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(demo_run / "warehouse" / "fleetspend.duckdb"))
    monkeypatch.setattr(summary, "trace_files", lambda folder: [*listed(folder), folder / "new.csv"])
    for trace_dir in (summary.settings.trace_dir(), demo_run):
        monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(trace_dir))
        assert summary.main() == 0
        out = capsys.readouterr().out
        samples = summary.settings.ROOT / "data" / "samples"
        assert f"== Not in the warehouse yet: 1 file(s) of {samples} ==\nnew.csv\n" in out
        assert out.index("Not in the warehouse") < out.index("$")


def test_summary_names_files_of_the_folder_no_run_reads(demo_run, monkeypatch, capsys):
    """A log the ingest passes over (day2.csv.bz2: not a trace file name) is never read and was
    never mentioned: the summary names it, with the names the ingest reads."""
    samples = summary.settings.ROOT / "data" / "samples"
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(demo_run / "warehouse" / "fleetspend.duckdb"))
    monkeypatch.setattr(summary, "unread_files", lambda folder: [folder / "day2.csv.bz2"])
    assert summary.main() == 0
    out = capsys.readouterr().out
    assert (f"\n== Never read: 1 file(s) or folder(s): not named as a trace file (*.csv, *.jsonl,"
            f" *.json, *.parquet, optionally .gz/.zst), a subfolder (not descended into), or a sidecar"
            f" of no log in the folder ==\n{samples / 'day2.csv.bz2'}\n") in out


def test_summary_names_files_the_last_ingest_could_not_read(demo_run, tmp_path, monkeypatch, capsys):
    """The run succeeds when a file cannot be read (its rows stay, one bad upload must not hold
    back the reports), so the summary is where a cron operator learns it: each such file with its
    error and what the figures hold of it, before any figure."""
    warehouse = tmp_path / "fleetspend.duckdb"
    shutil.copy(demo_run / "warehouse" / "fleetspend.duckdb", warehouse)
    samples = summary.settings.ROOT / "data" / "samples"
    conv, new = samples / "AzureLLMInferenceTrace_conv.csv", samples / "new.csv"
    # as the ingest writes them, naming the file; one that does not gets its name put before it
    errors = {str(conv): f"{conv}: binary data, expected a trace", str(new): "empty file"}
    with duckdb.connect(str(warehouse)) as conn:
        record_failures(conn, errors)
        sha, at = conn.execute("SELECT sha256, ingested_at FROM trace_files WHERE file = ?",
                               [str(conv)]).fetchall()[0]
    listed = summary.trace_files
    monkeypatch.setattr(summary, "trace_files", lambda folder: [*listed(folder), folder / "new.csv"])
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    assert summary.main() == 0
    out = capsys.readouterr().out
    assert (f"\n== Trace files the last ingest could not read: 2 ==\n"
            f"- {conv}: binary data, expected a trace\n"
            f"  the figures below show its previous rows: 19,366 requests ingested"
            f" {at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC (sha256 {sha[:12]}...)\n"
            f"- new.csv: empty file\n"
            f"  nothing of it is in the figures below: it was never ingested\n") in out
    assert out.index("could not read") < out.index("$")
    assert "Not in the warehouse yet" not in out   # new.csv is named once, as failed


def _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, change) -> str:
    """The summary's output for a copy of the demo warehouse that `change(conn)` altered (no
    file of the folder counted as new)."""
    warehouse = tmp_path / "fleetspend.duckdb"
    shutil.copy(demo_run / "warehouse" / "fleetspend.duckdb", warehouse)
    with duckdb.connect(str(warehouse)) as conn:
        change(conn)
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    monkeypatch.setattr(summary, "trace_files", lambda folder: [])
    assert summary.main() == 0
    return capsys.readouterr().out


def test_summary_names_files_that_ingested_with_no_usable_row(demo_run, tmp_path, monkeypatch,
                                                              capsys):
    """A file whose every row is rejected (its upstream changed the time format, say) or that
    holds a header alone ingests, the run and its balance check pass, and its trace is simply
    absent from the figures: the summary names it, with its first rejected line, before them."""
    changed, empty = "/logs/changed.csv", "/logs/empty.csv"

    def add_files(conn):
        conn.execute("INSERT INTO trace_files (file, trace, rows_read, rows_accepted, rows_rejected)"
                     " VALUES (?, 'changed', 2, 0, 2), (?, 'empty', 0, 0, 0)", [changed, empty])
        conn.execute("INSERT INTO rejected_requests (source_file, line, raw, reason)"
                     " VALUES (?, 3, 'x', 'second'), (?, 2, 'y', ?)",
                     [changed, changed, "TIMESTAMP is not a date-time: 'y'"])
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, add_files)
    assert (f"\n== Trace files with no row in the figures: 2 ==\n"
            f"- {changed}: 2 rows read, none usable, e.g. line 2: TIMESTAMP is not a date-time: 'y'\n"
            f"- {empty}: no data row (a header alone, or blank lines)\n") in out
    assert out.index("no row in the figures") < out.index("$")


def test_summary_points_no_header_only_file_to_rejected_rows(demo_run, tmp_path, monkeypatch,
                                                               capsys):
    """A file holding a header alone rejected no row: the summary sent the reader to
    rejected_requests for its reasons, where there are none."""
    empty = "/logs/empty.csv"

    def add_file(conn):
        conn.execute("INSERT INTO trace_files (file, trace, rows_read, rows_accepted, rows_rejected)"
                     " VALUES (?, 'empty', 0, 0, 0)", [empty])
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, add_file)
    assert f"- {empty}: no data row (a header alone, or blank lines)\n" in out
    assert "rejected_requests" not in out



def test_summary_names_files_in_the_figures_without_some_rows(demo_run, tmp_path, monkeypatch,
                                                               capsys):
    """A file with a few malformed rows ingests the rest, the run and its balance check pass,
    and the figures simply lack those rows: the summary says how many of how many, with the
    first rejected line, before the figures (it said nothing of them)."""
    partial = "/logs/partial.csv"

    def add_file(conn):
        conn.execute("INSERT INTO trace_files (file, trace, rows_read, rows_accepted, rows_rejected)"
                     " VALUES (?, 'partial', 1046, 1041, 5)", [partial])
        conn.execute("INSERT INTO rejected_requests (source_file, line, raw, reason)"
                     " VALUES (?, 40, 'x', 'later'), (?, 7, 'y', ?)",
                     [partial, partial, "GeneratedTokens is -3: a token count cannot be negative"])
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, add_file)
    assert (f"\n== Trace files with rows rejected: 1 ==\n- {partial}: 5 of 1,046 rows rejected,"
            f" e.g. line 7: GeneratedTokens is -3: a token count cannot be negative\n") in out
    assert out.index("rows rejected") < out.index("$")
    assert "no row in the figures" not in out


def test_summary_names_files_modified_or_gone_since_the_last_ingest(demo_run, tmp_path,
                                                                    monkeypatch, capsys):
    """Rows appended to an ingested log, or a log removed, leave the figures on the version
    ingested until the next run: the summary named only files added since, so it vouched for
    figures of a folder that had changed. A file touched after its ingest with the same content
    (which the ingest skips, keeping its old time) is not changed, nor is a file whose whole
    folder is gone (a warehouse read away from its logs) removed."""
    logs = tmp_path / "logs"
    logs.mkdir()
    grown, touched, gone = logs / "grown.csv", logs / "touched.csv", logs / "gone.csv"
    grown.write_text("appended after the ingest\n")
    touched.write_text("as ingested\n")
    elsewhere = "/no/such/folder/x.csv"

    def add_files(conn):
        conn.execute("INSERT INTO trace_files (file, trace, rows_read, rows_accepted, rows_rejected,"
                     " ingested_at, sha256) VALUES"
                     " (?, 'grown', 1, 1, 0, TIMESTAMPTZ '2026-01-01 00:00:00+00', 'before'),"
                     " (?, 'touched', 1, 1, 0, TIMESTAMPTZ '2026-01-01 00:00:00+00', ?),"
                     " (?, 'gone', 1, 1, 0, now(), 'x'), (?, 'elsewhere', 1, 1, 0, now(), 'y')",
                     [str(grown), str(touched), sha256_of(touched), str(gone), elsewhere])
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, add_files)
    assert f"\n== Changed since the last ingest: 1 file(s) ==\n{grown}\n" in out
    assert f"\n== Gone from the folder: 1 file(s) ==\n{gone}\n" in out
    stale = out.split("== Changed since")[1].split("(the figures below still hold")[0]
    # a log that cannot be read now is the next ingest's to name (as failed), not a traceback here
    def unreadable(path):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(summary, "sha256_of", unreadable)
    assert summary.main() == 0 and "== Changed since" not in capsys.readouterr().out
    assert str(touched) not in stale and elsewhere not in stale
    assert "samples" not in stale   # nor the demo's own logs, unchanged

def test_summary_names_files_with_the_same_content(demo_run, tmp_path, monkeypatch, capsys):
    """A log ingested twice under two names doubles its traffic in the figures below: the
    summary names the copies first."""
    copied = []

    def add_copy(conn):
        conn.execute("INSERT INTO trace_files SELECT * REPLACE (file || '.copy.csv' AS file)"
                     " FROM trace_files WHERE file LIKE '%code.csv'")
        copied.extend(conn.execute("SELECT file, sha256 FROM trace_files WHERE file LIKE '%code.csv'")
                      .fetchall()[0])
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, add_copy)
    file, sha = copied
    assert (f"\n== Trace files counted more than once: 1 ==\n- {file}, {file}.copy.csv: the same"
            f" content (sha256 {sha[:12]}..., 8,819 rows): each is replayed as a trace of its own,"
            f" so its requests and spend count 2 times; remove the copies\n") in out
    assert out.index("counted more than once") < out.index("$")


def test_summary_names_requests_the_replay_set_aside(demo_run, tmp_path, monkeypatch, capsys):
    """Requests the deployment cannot serve are set aside, the run succeeds and the figures leave
    them out: the summary names them, per trace, before any dollar figure."""
    reason = "needs 100,000,019 tokens of KV cache: one replica of d holds 499,248"

    def set_aside(conn):
        assert scalar(conn, "SELECT count(*) FROM unserved_requests") == 0   # the demo serves all
        conn.execute("INSERT INTO unserved_requests VALUES ('t', 'd', 't:9', 100000000, 20, ?),"
                     " ('t', 'd', 't:12', 100000000, 20, ?)", [reason, reason])
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, set_aside)
    assert (f"\n== Requests set aside, not replayed: 2 ==\n- t: 2 request(s), e.g. t:9, which"
            f" {reason}\n(the deployment their trace replays on cannot serve them; the figures"
            f" below leave them out: FROM unserved_requests)\n") in out
    assert out.index("set aside") < out.index("$")


def test_summary_names_a_log_priced_as_another_model_than_it_names(demo_run, tmp_path,
                                                                  monkeypatch, capsys):
    """A log whose requests name Llama-2-70B, replayed on the demo's Llama-3.1-70B fleet, was
    priced without a word: the summary names the trace, the name, its requests and the
    deployment's model before any dollar figure. The deployment's own model under a provider's
    name and a name the catalog cannot place say nothing."""
    def name_models(conn):
        conn.execute("UPDATE requests SET model = CASE WHEN line <= 1001"
                     " THEN 'meta-llama/Llama-2-70b-chat-hf' ELSE 'gpt-4' END"
                     " WHERE trace = 'AzureLLMInferenceTrace_code'")
        conn.execute("UPDATE requests SET model = 'meta-llama/Llama-3.1-70B-Instruct'"
                     " WHERE trace = 'AzureLLMInferenceTrace_conv'")
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, name_models)
    assert ("\n== Priced as another model than the log names: 1 trace and name pair(s) ==\n"
            "- AzureLLMInferenceTrace_code: the log names model 'meta-llama/Llama-2-70b-chat-hf'"
            " (llama-2-70b in the catalog) on 1,000 of its 8,819 requests, and azure-2023-70b-h100"
            " serves llama-3.1-70b, the deployment it was replayed on: the time and dollars of"
            " those requests are llama-3.1-70b's, not the named model's\n") in out
    assert "gpt-4" not in out.split("== Fleet summary")[0]
    assert "Llama-3.1-70B-Instruct" not in out.split("== Fleet summary")[0]
    assert out.index("Priced as another model") < out.index("$")
    untouched = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, lambda conn: None)
    assert "another model" not in untouched


def test_summary_names_the_deployment_replayed_and_its_price(demo_run, tmp_path, monkeypatch,
                                                             capsys):
    """The report and the preflight name the deployment the traces replayed on, and the report
    its price; the summary (cron's last command) named neither, though every dollar it prints is
    GPU-hours at that price. Its fleet section leads with them, from the warehouse."""
    def cheaper(conn):   # the price of the plan the roofline names, as a new prices.csv has it
        conn.execute("UPDATE prices SET usd_per_gpu_hour = 1.85 WHERE gpu = 'h100-sxm'"
                     " AND provider = 'coreweave' AND plan = 'on-demand'")
    for change, price in ((lambda conn: None, "$6.155"), (cheaper, "$1.85")):
        out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, change)
        assert out.split("== Fleet summary ==\n")[1].splitlines()[0] == (
            "Deployment replayed: `azure-2023-70b-h100` (the `roofline` table holds its"
            f" coefficients), priced at {price} per GPU-hour, coreweave on-demand"
            " (`deployment_prices`).")

def test_summary_prints_the_top_of_the_chargeback(demo_run, tmp_path, monkeypatch, capsys):
    """Whoever splits the bill by model or tenant read it only in the report: the summary prints
    the top rows of each dimension with what the table leaves out (idle GPUs, requests that
    name no one), and nothing where the traces name no one (the demo)."""
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, lambda conn: None)
    assert "Chargeback" not in out

    def name_tenants(conn):
        conn.execute("INSERT INTO chargeback (dimension, value, requests, spend_usd, pct_spend,"
                     " usd_per_1m_output_tokens, p95_ttft_s) SELECT 'tenant', 't' || i, 10, i,"
                     " i, 1.0, 0.5 FROM range(1, 8) AS r(i)")
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, name_tenants)
    table = out[out.index("== Chargeback"):out.index("\n\n", out.index("== Chargeback"))]
    assert table.startswith("== Chargeback: busy-GPU spend by model and tenant (top 5 of each) ==\n")
    assert [line.split(" | ")[1] for line in table.splitlines() if line.startswith("| tenant")] == [
        "t7", "t6", "t5", "t4", "t3"]
    assert "its idle GPU time ($49.43) is charged to no one" in table
    assert "28,115 requests name no tenant" in table and "No request names a model." in table
    assert out.index("== Chargeback") < out.index("Decode owns")


def test_summary_says_what_the_calibration_found(demo_run, tmp_path, monkeypatch, capsys):
    """The calibration runs on demand and its tables were in the warehouse only: the summary
    said nothing of it. Per calibrated trace it now names the deployment, why that deployment
    cannot have served the log, each factor before -> after and the held-out errors beside the
    shape-median baseline, after the problems and before any dollar figure; and the outlying
    observations, which were in the asset's metadata only. A metric the fit did not use (the
    time per output token, by default) is named so, not called a fit that explains nothing."""
    reason = "step_overhead_s was fitted to 0.9999, at its bound: d cannot explain the log without it"
    outliers = "1 of 52 observed ttft are more than 10× off the fitted prediction"

    def calibrate(conn):
        assert scalar(conn, "SELECT count(*) FROM calibration") == 0  # the demo has no observations
        why, far = f"{reason}\nthe second reason", f"{outliers}\nand e2e"
        conn.execute("INSERT INTO calibration VALUES"
                     " ('t', 'd', 'compute_efficiency', 0.65, 0.5, false, ?, ?),"
                     " ('t', 'd', 'step_overhead_s', 0.0012, 0.9999, true, ?, ?)", [why, far, why, far])
        conn.execute("INSERT INTO calibration_errors VALUES"
                     " ('t', 'd', 'all', 'held_out', 'ttft', 26, 0.13, 0.42, 0.078, 0.43, 0.05, 0.147, true),"
                     " ('t', 'd', 'all', 'held_out', 'e2e', 26, 13.4, 0.065, 0.30, 0.06, 0.02, 0.248, true),"
                     " ('t', 'd', 'all', 'held_out', 'tpot', 26, 0.043, 0.058, 0.046, 0.08, 0.07, 0.037, false),"
                     " ('t', 'd', 'all', 'fit', 'ttft', 26, 0.13, 0.9, 0.9, 0.9, 0.9, 0.9, true),"
                     " ('t', 'd', 'long', 'held_out', 'ttft', 3, 0.13, 0.9, 0.9, 0.9, 0.9, 0.9, true)")
    out = _summary_of_copy(demo_run, tmp_path, monkeypatch, capsys, calibrate)
    assert ("\n== Calibration on observed latencies: 1 trace(s) ==\n- t, fitted on d:\n"
            f"  IMPLAUSIBLE: {reason}\n  IMPLAUSIBLE: the second reason\n"
            f"  outliers: {outliers}\n  outliers: and e2e\n"
            "  compute_efficiency 0.65 → 0.5, step_overhead_s 0.0012 → 0.9999\n"
            "  held-out ttft (26 observed): median error 42.0% → 7.8%, shape-median baseline 14.7%\n"
            "  held-out tpot (26 observed): median error 5.8% → 4.6%, shape-median baseline 3.7%"
            " (reported, not fitted)\n"
            "  held-out e2e (26 observed): median error 6.5% → 30.0%, shape-median baseline 24.8%"
            " (not below it: the model explains nothing of the per-request spread)\n") in out
    assert out.index("Physics caveats") < out.index("Calibration on") < out.index("$")


def test_summary_says_nothing_of_a_calibration_never_run(demo_conn, demo_run, monkeypatch, capsys):
    assert scalar(demo_conn, "SELECT count(*) FROM calibration") == 0
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(demo_run / "warehouse" / "fleetspend.duckdb"))
    assert summary.main() == 0
    assert "alibration" not in capsys.readouterr().out


def test_summary_query_command_runs_as_printed_from_a_folder_with_spaces(demo_run, tmp_path,
                                                                      monkeypatch, capsys):
    """The summary's last lines give a command to query the warehouse: pasted into a shell, a
    warehouse under `/srv/fleet data/` split into two arguments and the CLI opened neither
    (and a quote in the path left the shell waiting for its other half)."""
    folder = tmp_path / "fleet data" / "o'brien"
    folder.mkdir(parents=True)
    out = _summary_of_copy(demo_run, folder, monkeypatch, capsys, lambda conn: None)
    command = out.split("  query it: ", 1)[1].splitlines()[0]
    assert shlex.split(command)[1:] == ["-readonly", str(folder / "fleetspend.duckdb"),
                                        "FROM shape_spend LIMIT 5"]


def test_summary_says_when_the_warehouse_it_reads_was_published(demo_run, tmp_path, monkeypatch,
                                                             capsys):
    """A run that fails publishes nothing, so the summary run by hand after a failed night
    printed the last good run's figures with nothing to say they were not tonight's: it says
    when the file it read was published."""
    warehouse = tmp_path / "fleetspend.duckdb"
    shutil.copy(demo_run / "warehouse" / "fleetspend.duckdb", warehouse)
    os.utime(warehouse, (1_700_000_000, 1_700_000_000))
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    assert summary.main() == 0
    assert (f"\nWarehouse: {warehouse}, published 2023-11-14 22:13 UTC by the last run that"
            f" succeeded (a run that fails publishes nothing)\n") in capsys.readouterr().out


def test_summary_piped_into_head_ends_without_a_traceback(demo_run, tmp_path):
    """`python -m pipelines.summary | head` closes the pipe after a line: the summary died with
    a BrokenPipeError traceback. (Here 3,000 new files of the warehouse's folder make a summary
    longer than a pipe holds, so the write after head leaves fails every time.)"""
    warehouse = tmp_path / "fleetspend.duckdb"
    shutil.copy(demo_run / "warehouse" / "fleetspend.duckdb", warehouse)
    folder = tmp_path / "logs"
    folder.mkdir()
    for n in range(3_000):
        (folder / f"a-log-that-arrived-after-the-last-run-{n:05d}.csv").write_text("")
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("UPDATE trace_files SET file = ? || '/' || trace || '.csv'", [str(folder)])
    run = subprocess.run(f"{sys.executable} -m pipelines.summary | head -1", shell=True,
                         cwd=summary.settings.ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "FLEETSPEND_WAREHOUSE": str(warehouse)})
    assert run.stdout == "\n" and run.stderr == ""


def test_summary_gives_the_reason_a_what_if_scenario_was_skipped(demo_run, tmp_path, monkeypatch,
                                                                 capsys):
    """A scenario that cannot apply to the deployment has no figures: the summary lists it
    under the table with its reason, as report.md does, not as a row of dashes."""
    warehouse = tmp_path / "fleetspend.duckdb"
    shutil.copy(demo_run / "warehouse" / "fleetspend.duckdb", warehouse)
    reason = "scenario 'tp3': tp=3 cannot split llama-3.1-70b's 64 attention heads"
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("INSERT INTO what_if (scenario, rank, shape, skipped) VALUES ('tp3', 0, 'all', ?)",
                     [reason])
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    assert summary.main() == 0
    out = capsys.readouterr().out
    assert "| tp3 |" not in out
    assert ("\nNot replayed, as each cannot apply to a deployment the traces were replayed on"
            " (`what_if.skipped`):\n"
            f"- `tp3`: {reason}\n") in out
    assert out.index("| b200 |") < out.index("- `tp3`") < out.index("Decode owns")


def test_summary_of_report_tables_from_an_older_release_names_what_they_lack(demo_run, tmp_path,
                                                                           monkeypatch, capsys):
    old = tmp_path / "old.duckdb"
    shutil.copy(demo_run / "warehouse" / "fleetspend.duckdb", old)
    with duckdb.connect(str(old)) as conn:
        conn.execute("ALTER TABLE what_if DROP COLUMN change")
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(old))
    assert summary.main() == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"fleetspend: {old} lacks column change of table what_if, which")


def test_summary_reads_no_table_or_column_it_does_not_check(demo_run, tmp_path, monkeypatch, capsys):
    """The demo warehouse cut down to summary.READS prints the same summary: a column the summary
    reads but does not check would fail here, instead of in a user's old warehouse."""
    full = demo_run / "warehouse" / "fleetspend.duckdb"
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(full))
    assert summary.main() == 0
    expected = capsys.readouterr().out.replace(str(full), "WAREHOUSE")
    cut = tmp_path / "cut.duckdb"
    with duckdb.connect(str(cut)) as conn:
        conn.execute(f"ATTACH '{full}' AS demo (READ_ONLY)")
        for table, columns in summary.READS.items():
            kept = ", ".join(sorted(columns)) or "NULL AS unused"
            conn.execute(f"CREATE TABLE {table} AS SELECT {kept} FROM demo.{table}")
    # published at the same time as the demo's (the summary says when, from the file's time)
    os.utime(cut, ns=(full.stat().st_atime_ns, full.stat().st_mtime_ns))
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(cut))
    assert summary.main() == 0
    assert capsys.readouterr().out.replace(str(cut), "WAREHOUSE") == expected


def test_a_bug_while_printing_is_not_called_an_old_warehouse(demo_run, monkeypatch):
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(demo_run / "warehouse" / "fleetspend.duckdb"))
    monkeypatch.setattr(summary, "fleet_lines",
                        lambda tables: tables.fleet_summary.row(0, named=True)["misspelt"])
    with pytest.raises(KeyError, match="misspelt"):
        summary.main()
