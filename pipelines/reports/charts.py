"""Altair charts of the report tables, saved as PNG and as self-contained HTML (works offline).

Every chart is drawn from an aggregated report table (one row per shape, per shape and stage,
per trace and minute, per scenario), never from per-request rows, so it stays small and readable
whether the trace holds thousands or 27 million requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import altair as alt
import polars as pl

from pipelines.reports.text import CHARTS, ReportTables, saying_cut_short, what_if_scenarios

STAGE_COLORS = alt.Scale(domain=["queue", "prefill", "decode", "network"],
                         range=["#9d9d9d", "#f58518", "#4c78a8", "#54a24b"])


def pareto_chart(shape_spend: pl.DataFrame, top: int = 15) -> alt.LayerChart:
    """Pareto of spend by shape: bars (each shape's share, split into prefill and decode dollars)
    and the cumulative share as a line."""
    ranked = shape_spend.sort("rank").head(top)
    bars = (
        ranked.with_columns(prefill=pl.col("pct_spend") * pl.col("prefill_pct_spend") / 100,
                            decode=pl.col("pct_spend") * pl.col("decode_pct_spend") / 100)
        .unpivot(index=["rank", "shape", "pct_spend", "dominant_stage"], on=["prefill", "decode"],
                 variable_name="stage", value_name="pct_of_fleet")
    )
    x = alt.X("shape:N", sort=ranked["shape"].to_list(), title=None,
              axis=alt.Axis(labelAngle=-40, labelLimit=220))
    bar = alt.Chart(bars).mark_bar().encode(
        x=x,
        y=alt.Y("sum(pct_of_fleet):Q", title="% of attributed GPU spend"),
        color=alt.Color("stage:N", title="spend in",
                        scale=alt.Scale(domain=["prefill", "decode"],
                                        range=STAGE_COLORS.range[1:3])),
        order=alt.Order("stage:N", sort="descending"),
        tooltip=["shape", "stage", alt.Tooltip("pct_of_fleet:Q", format=".1f"),
                 alt.Tooltip("dominant_stage:N", title="dominant latency stage")],
    )
    line = alt.Chart(ranked).mark_line(point=True, color="#e45756").encode(
        x=x, y=alt.Y("cum_pct_spend:Q", title="cumulative %", scale=alt.Scale(domain=[0, 100])),
        tooltip=["shape", alt.Tooltip("cum_pct_spend:Q", format=".1f", title="cumulative %")],
    )
    shown = ("the one shape" if shape_spend.height == 1 else f"all {ranked.height} shapes"
             if ranked.height == shape_spend.height
             else f"top {ranked.height} of {shape_spend.height} shapes")
    return (alt.layer(bar, line).resolve_scale(y="independent")
            .properties(title=f"Pareto: spend by request shape ({shown}; bars) and cumulative"
                              f" share (line)", width=620, height=300))


def heatmap_chart(shape_spend: pl.DataFrame) -> alt.LayerChart:
    """Share of spend over prompt bucket x output bucket, buckets in size order."""
    prompt_order = shape_spend.sort("prompt_lower")["prompt_bucket"].unique(maintain_order=True).to_list()
    output_order = shape_spend.sort("output_lower")["output_bucket"].unique(maintain_order=True).to_list()
    base = alt.Chart(shape_spend.select("shape", "prompt_bucket", "output_bucket", "pct_spend",
                                        "spend_usd", "requests")).encode(
        x=alt.X("output_bucket:N", sort=output_order, title="output length",
                axis=alt.Axis(labelAngle=-20)),
        y=alt.Y("prompt_bucket:N", sort=prompt_order[::-1], title="prompt length"),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("pct_spend:Q", title="% of spend", scale=alt.Scale(scheme="blues")),
        tooltip=["shape", alt.Tooltip("pct_spend:Q", format=".1f"),
                 alt.Tooltip("spend_usd:Q", format="$,.2f"), alt.Tooltip("requests:Q", format=",")],
    )
    # A share that rounds to 0.0 is not no spend (the shapes table shows it in full): it reads <0.1.
    labels = base.mark_text(fontSize=12).transform_calculate(
        label="datum.pct_spend > 0 && datum.pct_spend < 0.05 ? '<0.1' : format(datum.pct_spend, '.1f')",
    ).encode(
        text="label:N",
        color=alt.condition(alt.datum.pct_spend > 20, alt.value("white"), alt.value("black")),
    )
    return (cells + labels).properties(title="Share of spend (%) by prompt x output length",
                                       width=440, height=260)


def stage_share_chart(stage_breakdown: pl.DataFrame, top: int = 12) -> alt.HConcatChart:
    """Per shape (and 'all'), stacked stage shares of latency next to those of GPU time."""
    shown = stage_breakdown.filter(pl.col("rank") <= top).sort("rank", "stage_order")
    order = shown["shape"].unique(maintain_order=True).to_list()
    data = shown.unpivot(
        index=["rank", "shape", "stage", "stage_order"], on=["pct_latency", "pct_gpu_time"],
        variable_name="measure", value_name="pct")

    def panel(measure: str, title: str, show_labels: bool) -> alt.Chart:
        return alt.Chart(data.filter(pl.col("measure") == measure)).mark_bar().encode(
            x=alt.X("pct:Q", title=title, scale=alt.Scale(domain=[0, 100])),
            y=alt.Y("shape:N", sort=order, title=None,
                    axis=alt.Axis(labels=show_labels, labelLimit=240)),
            color=alt.Color("stage:N", scale=STAGE_COLORS, title="stage"),
            order=alt.Order("stage_order:Q"),
            tooltip=["shape", "stage", alt.Tooltip("pct:Q", format=".1f")],
        ).properties(width=300, height=alt.Step(18))

    shapes = stage_breakdown.filter(pl.col("rank") > 0)["shape"].n_unique()
    listed = len(order) - 1  # 'all' is rank 0
    which = ("the one shape" if shapes == 1 else f"all {shapes} shapes" if listed == shapes
             else f"top {listed} of {shapes} shapes")
    return alt.hconcat(panel("pct_latency", "% of latency", True),
                       panel("pct_gpu_time", "% of GPU time", False)).properties(
        title=f"Where each shape's latency and GPU time go ({which} by spend rank; 'all' first)")


def timeline_chart(timeline: pl.DataFrame, max_points: int = 600) -> alt.VConcatChart:
    """The fleet over time per trace: utilization, sequences running, KV use, requests queued.

    Minutes are averaged into wider buckets when a trace spans more than `max_points` of them
    (a week of logs is ~10,000 minutes), so a line never holds more than ~max_points points."""
    minutes = int(timeline["minute_s"].max() // 60) + 1 if timeline.height else 1
    width = -(-minutes // max_points)  # minutes per point, rounded up
    data = (timeline.with_columns(minute=(pl.col("minute_s") // (60 * width)) * width)
            .group_by("trace", "minute").agg(pl.col("utilization", "sequences", "kv_use", "queued").mean())
            .sort("trace", "minute"))
    # a trace of one point (a log under a minute: one request, a burst) draws no line, so its
    # panels were empty: then every line shows its points
    points = bool(data.height) and data.group_by("trace").len()["len"].min() == 1
    # up to two decimals, trimmed: a small fleet's ticks (KV use under 0.2%, 0.5 sequences) read
    # "0%, 0%, 0%, 0%" and "0, 1, 1" with whole-number formats
    panels = [("utilization", "busy share", ".0%"), ("sequences", "sequences running", ",.2~f"),
              ("kv_use", "KV-cache use", ".2~%"), ("queued", "requests queued", ",.2~f")]
    return alt.vconcat(*[
        alt.Chart(data).mark_line(point=points).encode(
            x=alt.X("minute:Q", title=(f"minute of the trace ({width}-minute means)" if width > 1 else
                                       "minute of the trace") if i == len(panels) - 1 else None),
            y=alt.Y(f"{column}:Q", title=title, axis=alt.Axis(format=fmt)),
            color=alt.Color("trace:N", title="trace"),
            tooltip=["trace", "minute", alt.Tooltip(f"{column}:Q", format=fmt)],
        ).properties(width=620, height=90)
        for i, (column, title, fmt) in enumerate(panels)
    ]).properties(title="The fleet minute by minute")


def what_if_chart(what_if: pl.DataFrame) -> alt.HConcatChart:
    """Per scenario (all shapes): change of busy-GPU spend and of p95 TTFT vs the baseline; the
    tooltip's "change" says what a scenario that cuts answers short cuts, as the tables do."""
    data = saying_cut_short(what_if.filter((pl.col("shape") == "all") & pl.col("skipped").is_null()),
                            "change").with_columns(
        delta_ttft_pct=100 * pl.col("delta_p95_ttft_s") / pl.col("baseline_p95_ttft_s"))
    order = data.sort("delta_pct")["scenario"].to_list()

    def panel(column: str, title: str, show_labels: bool) -> alt.Chart:
        return alt.Chart(data).mark_bar().encode(
            x=alt.X(f"{column}:Q", title=title),
            y=alt.Y("scenario:N", sort=order, title=None, axis=alt.Axis(labels=show_labels)),
            color=alt.condition(f"datum.{column} < 0", alt.value("#54a24b"), alt.value("#e45756")),
            tooltip=["scenario", "change", alt.Tooltip(f"{column}:Q", format="+.1f"),
                     alt.Tooltip("delta_usd_per_day:Q", format="$,.0f", title="Δ $/day")],
        ).properties(width=280, height=alt.Step(22))

    return alt.hconcat(panel("delta_pct", "Δ busy-GPU spend (%)", True),
                       panel("delta_ttft_pct", "Δ p95 TTFT (%)", False)).properties(
        title="What-if replays of the same traces: change vs baseline (green = lower)")


def save_chart(chart: alt.TopLevelMixin, directory: Path, stem: str) -> dict[str, Path]:
    """Write <stem>.png, <stem>.html (Vega inlined, no network needed to view) and <stem>.json
    (the Vega-Lite spec, which report.html embeds as saved, so the charts are drawn once)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"png": directory / f"{stem}.png", "html": directory / f"{stem}.html",
             "json": directory / f"{stem}.json"}
    chart.save(paths["png"], scale_factor=2)
    chart.save(paths["html"], inline=True)
    paths["json"].write_text(json.dumps(chart.to_dict()))
    return paths


def remove_chart(directory: Path, stem: str) -> None:
    """Delete the files save_chart writes for `stem`, where an earlier run left them: a chart the
    tables no longer have data for must not be left on disk looking current."""
    for suffix in ("png", "html", "json"):
        (directory / f"{stem}.{suffix}").unlink(missing_ok=True)


def load_chart_specs(directory: Path, stems: Iterable[str]) -> dict[str, dict]:
    """The Vega-Lite specs save_chart wrote, by stem; FileNotFoundError names a missing one."""
    return {stem: json.loads((directory / f"{stem}.json").read_text()) for stem in stems}


def drawn_stems(t: ReportTables) -> list[str]:
    """The charts of text.CHARTS these tables have data for: all but the what-if chart when every
    scenario was skipped (axes without a bar, which the report leaves out, said in its text)."""
    replayed = what_if_scenarios(t.what_if)[0].height > 0
    return [stem for stem in CHARTS if stem != "what_if" or replayed]


def report_charts(t: ReportTables) -> dict[str, alt.TopLevelMixin]:
    """Every chart of the report the tables have data for (drawn_stems), by the stem its files
    are saved under (text.CHARTS)."""
    draw = {
        "pareto": lambda: pareto_chart(t.shape_spend),
        "heatmap": lambda: heatmap_chart(t.shape_spend),
        "stage_shares": lambda: stage_share_chart(t.stage_breakdown),
        "timeline": lambda: timeline_chart(t.fleet_timeline_minute),
        "what_if": lambda: what_if_chart(t.what_if),
    }
    return {stem: draw[stem]() for stem in drawn_stems(t)}
