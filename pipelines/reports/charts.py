"""Altair charts of the report tables, saved as PNG and as self-contained HTML (works offline)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl


def spend_share_chart(shape_spend: pl.DataFrame, top: int = 15) -> alt.Chart:
    """Horizontal bars: each shape's share of GPU spend, coloured by its dominant stage.

    shape_spend is one row per shape (at most 25), so the chart stays small whatever the
    number of requests behind it.
    """
    data = shape_spend.sort("rank").head(top).select(
        "shape", "pct_spend", "pct_requests", "spend_usd", "dominant_stage", "cost_stage", "rank"
    )
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("pct_spend:Q", title="share of GPU spend (%)"),
            y=alt.Y("shape:N", sort=alt.EncodingSortField("rank"), title=None),
            color=alt.Color("dominant_stage:N", title="dominant stage",
                            scale=alt.Scale(domain=["queue", "prefill", "decode", "network"])),
            tooltip=["shape", alt.Tooltip("pct_spend:Q", format=".1f"),
                     alt.Tooltip("pct_requests:Q", format=".1f"),
                     alt.Tooltip("spend_usd:Q", format="$.2f"), "cost_stage"],
        )
        .properties(title="Where the GPU money goes, by request shape", width=520)
    )


def save_chart(chart: alt.Chart, directory: Path, stem: str) -> dict[str, Path]:
    """Write <stem>.png and <stem>.html (Vega inlined, no network needed to view)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"png": directory / f"{stem}.png", "html": directory / f"{stem}.html"}
    chart.save(paths["png"], scale_factor=2)
    chart.save(paths["html"], inline=True)
    return paths
