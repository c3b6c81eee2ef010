"""Charts are drawn from aggregated tables: their data stays small however long the trace is."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
import vl_convert

from pipelines.reports.charts import heatmap_chart, timeline_chart, what_if_chart


def test_a_week_of_minutes_is_bucketed_for_the_timeline():
    minutes = 7 * 24 * 60
    week = pl.DataFrame({
        "trace": ["t"] * minutes, "minute_s": np.arange(minutes) * 60.0,
        "utilization": np.linspace(0, 1, minutes), "sequences": np.full(minutes, 2.0),
        "kv_use": np.full(minutes, 0.5), "queued": np.zeros(minutes),
    })
    spec = timeline_chart(week).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) <= 600
    assert sum(r["sequences"] for r in rows) == 2.0 * len(rows)  # means of equal values stay equal
    # a point is the mean of its 17 minutes, not their first, last or largest value (equal values
    # alone cannot tell those apart)
    utilization = np.linspace(0, 1, minutes)
    assert [r["utilization"] for r in rows[:2]] == pytest.approx(
        [utilization[:17].mean(), utilization[17:34].mean()], rel=1e-12)
    assert "17-minute means" in str(spec)


def _marks(spec: dict) -> list:
    return [panel["mark"] for panel in spec["vconcat"]]


def test_a_trace_under_a_minute_is_drawn_as_points():
    """A single request's log (one minute bin) drew four empty panels: a line of one point is
    not drawn. Its points are; a trace of many minutes keeps plain lines."""
    one = pl.DataFrame({"trace": ["t"], "minute_s": [0.0], "utilization": [0.3], "sequences": [1.0],
                        "kv_use": [0.001], "queued": [0.0]})
    assert all(mark == {"type": "line", "point": True} for mark in _marks(timeline_chart(one).to_dict()))
    two = one.with_columns(minute_s=pl.lit(60.0))
    assert all(mark in ("line", {"type": "line", "point": False})
               for mark in _marks(timeline_chart(pl.concat([one, two])).to_dict()))


def test_a_small_fleets_axes_read_distinct_ticks():
    """A single request (KV use 0.119%, one sequence) read "0%" on each of five KV-use ticks and
    "0, 1, 1" on the sequences axis: whole-number formats on fractions."""
    one = pl.DataFrame({"trace": ["t"], "minute_s": [0.0], "utilization": [0.3], "sequences": [1.0],
                        "kv_use": [0.00119], "queued": [0.0]})
    formats = [panel["encoding"]["y"]["axis"]["format"] for panel in timeline_chart(one).to_dict()["vconcat"]]
    assert formats == [".0%", ",.2~f", ".2~%", ",.2~f"]


def test_an_hour_is_drawn_minute_by_minute():
    hour = pl.DataFrame({"trace": ["t"] * 60, "minute_s": np.arange(60) * 60.0,
                         "utilization": np.full(60, 0.5), "sequences": np.full(60, 1.0),
                         "kv_use": np.full(60, 0.1), "queued": np.zeros(60)})
    rows = next(iter(timeline_chart(hour).to_dict()["datasets"].values()))
    assert [r["minute"] for r in rows] == list(range(60))


def test_a_rare_shape_s_heatmap_cell_does_not_read_as_no_spend():
    """The demo's 'very long prompt / short answer' holds 0.00833% of spend (the shapes table
    says so); its heatmap cell read "0.0", as if it cost nothing. A share under 0.05% reads <0.1."""
    shapes = pl.DataFrame({
        "shape": ["long prompt / short answer", "very long prompt / short answer"],
        "prompt_bucket": ["long prompt", "very long prompt"],
        "output_bucket": ["short answer", "short answer"],
        "prompt_lower": [2048, 8192], "output_lower": [16, 16],
        "pct_spend": [99.99167, 0.00833], "spend_usd": [93.5, 0.0078], "requests": [100, 1]})
    svg = vl_convert.vegalite_to_svg(heatmap_chart(shapes).to_dict())
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "&lt;0.1" in labels and "100.0" in labels and "0.0" not in labels


def test_the_what_if_tooltip_says_what_an_output_cap_cuts():
    """The tables said what the output cap cuts; the chart's tooltip still read only "outputs
    capped at 256 tokens" beside a -2% bar."""
    rows = pl.DataFrame({
        "scenario": ["cap", "fp8"], "shape": ["all", "all"], "skipped": [None, None],
        "change": ["outputs capped at 256 tokens", "weights bf16 -> fp8"],
        "delta_pct": [-2.05, -5.68], "delta_usd_per_day": [-47.8, -132.7],
        "delta_p95_ttft_s": [-0.01, -1.17], "baseline_p95_ttft_s": [1.56, 1.56],
        "truncated_requests": [6614, 0], "requests": [28185, 28185],
        "truncated_output_pct": [25.94, 0.0]})
    data = next(iter(what_if_chart(rows).to_dict()["datasets"].values()))
    assert [r["change"] for r in data] == [
        "outputs capped at 256 tokens; cuts 6,614 of 28,185 answers short, 25.94% of all output"
        " tokens", "weights bf16 -> fp8"]
