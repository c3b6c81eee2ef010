"""The fleet summary and the shape ranking as text: printed by `make demo`, written to report.md."""

from __future__ import annotations

import polars as pl

SHAPE_COLUMNS = {
    "rank": "#", "shape": "shape", "pct_spend": "% spend", "cum_pct_spend": "cum %",
    "pct_requests": "% requests", "spend_usd": "$", "usd_per_request": "$/request",
    "p95_ttft_s": "p95 TTFT s", "p50_tpot_s": "p50 TPOT s", "dominant_stage": "dominant stage",
    "cost_stage": "cost stage", "bound": "bound",
}


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(frame: pl.DataFrame, columns: dict[str, str]) -> str:
    head = "| " + " | ".join(columns.values()) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    rows = ["| " + " | ".join(_fmt(row[c]) for c in columns) + " |"
            for row in frame.select(list(columns)).iter_rows(named=True)]
    return "\n".join([head, rule, *rows])


def summary_lines(summary: pl.DataFrame) -> list[str]:
    """One paragraph per trace (and for all traces) with the fleet's headline numbers."""
    lines = []
    for s in summary.iter_rows(named=True):
        lines.append(
            f"- **{s['trace']}**: {s['requests']:,} requests, {s['prompt_tokens']:,} prompt + "
            f"{s['output_tokens']:,} output tokens; {s['gpu_hours']:,.1f} GPU-hours = "
            f"${s['spend_usd']:,.2f} (idle {100 * s['idle_share']:.1f}% = ${s['idle_usd']:,.2f}); "
            f"TTFT p50/p95 {s['p50_ttft_s']:.3f}/{s['p95_ttft_s']:.3f} s; "
            f"TPOT p50/p95 {1000 * s['p50_tpot_s']:.1f}/{1000 * s['p95_tpot_s']:.1f} ms; "
            f"${s['usd_per_1m_output_tokens']:,.2f} per 1M output tokens"
        )
    return lines


def headline(summary: pl.DataFrame, shapes: pl.DataFrame) -> str:
    """One sentence a reader takes away, every number traceable to shape_spend / fleet_summary."""
    fleet = summary.filter(pl.col("trace") == "all").row(0, named=True)
    decode_usd = (shapes["spend_usd"] * shapes["decode_pct_spend"] / 100).sum()
    top3 = shapes.sort("rank").head(3)["pct_spend"].sum()
    first = shapes.sort("rank").row(0, named=True)
    return (
        f"Decode owns {100 * decode_usd / shapes['spend_usd'].sum():.0f}% of attributed GPU spend; "
        f"the top 3 of {shapes.height} request shapes hold {top3:.0f}% of it, led by "
        f"'{first['shape']}' ({first['pct_spend']:.0f}%, {first['dominant_stage']}-dominated). "
        f"Idle GPUs cost {100 * fleet['idle_share']:.1f}% of the ${fleet['spend_usd']:,.2f} total."
    )


def report_markdown(summary: pl.DataFrame, shapes: pl.DataFrame, deployment: str,
                    chart_png: str) -> str:
    return "\n".join([
        "# fleetspend report",
        "",
        headline(summary, shapes),
        "",
        f"Deployment replayed: `{deployment}` (see the `roofline` table for its coefficients).",
        "",
        "## Fleet",
        "",
        *summary_lines(summary),
        "",
        "## Request shapes by share of spend",
        "",
        f"![spend share by shape]({chart_png})",
        "",
        markdown_table(shapes.sort("rank"), SHAPE_COLUMNS),
        "",
        "Dominant stage: the stage holding most of the shape's latency. Cost stage: prefill or "
        "decode, whichever holds more of its dollars. Bound: the resource that limited most of "
        "its GPU-seconds.",
        "",
    ])
