"""The whole asset graph on the real sample traces, into a temporary warehouse."""

from __future__ import annotations

import pytest

from pipelines.definitions import defs
from pipelines.warehouse import scalar

SAMPLE_ROWS = 8_819 + 19_366


def test_asset_graph_snapshot():
    """The asset keys and checks users see in the UI; changing them is a deliberate act."""
    graph = defs.resolve_asset_graph()
    assert sorted(k.to_user_string() for k in graph.get_all_asset_keys()) == [
        "deployments", "fleet_summary", "fleet_timeline", "gpu_efficiency", "gpus", "models",
        "prices", "rejected_requests", "report", "request_costs", "request_stages", "requests",
        "roofline", "shape_buckets", "shape_spend", "spend_share_chart_files", "trace_files",
    ]
    assert sorted(f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys) == [
        "request_stages:gpu_seconds_conserved",
        "request_stages:no_negative_stage",
        "request_stages:ttft_covers_prefill",
        "requests:rows_read_equal_accepted_plus_rejected",
    ]


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


def test_report_files(demo_run):
    reports = demo_run / "reports"
    text = (reports / "report.md").read_text()
    assert text.startswith("# fleetspend report")
    assert "Decode owns" in text and "| # | shape |" in text
    png = (reports / "spend_share.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    html = (reports / "spend_share.html").read_text()
    assert "vega" in html and "<script src=\"http" not in html  # inline: viewable offline
