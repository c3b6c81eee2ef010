"""Altair charts of the report tables, saved as PNG and as self-contained HTML (works offline)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl


def spend_share_chart(shape_spend: pl.DataFrame, top: int = 15) -> alt.Chart:
    """Horizontal bars: each shape's share of GPU spend, split into its prefill and decode dollars.

    shape_spend is one row per shape (at most 25), so the chart stays small whatever the
    number of requests behind it.
    """
    data = (
        shape_spend.sort("rank").head(top)
        .with_columns(prefill=pl.col("pct_spend") * pl.col("prefill_pct_spend") / 100,
                      decode=pl.col("pct_spend") * pl.col("decode_pct_spend") / 100)
        .unpivot(index=["rank", "shape", "pct_spend", "dominant_stage"], on=["prefill", "decode"],
                 variable_name="stage", value_name="pct_of_fleet")
    )
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("sum(pct_of_fleet):Q", title="share of attributed GPU spend (%)"),
            y=alt.Y("shape:N", sort=alt.EncodingSortField("rank"), title=None),
            color=alt.Color("stage:N", title="GPU time in",
                            scale=alt.Scale(domain=["prefill", "decode"], range=["#f58518", "#4c78a8"])),
            order=alt.Order("stage:N", sort="descending"),
            tooltip=["shape", "stage", alt.Tooltip("pct_of_fleet:Q", format=".1f"),
                     alt.Tooltip("pct_spend:Q", format=".1f", title="shape % of spend"),
                     alt.Tooltip("dominant_stage:N", title="dominant latency stage")],
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
