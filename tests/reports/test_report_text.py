"""The report's text helpers on summaries the demo never produces."""

from __future__ import annotations

import polars as pl

from pipelines.reports.text import summary_lines


def _summary(p50_tpot_s, p95_tpot_s) -> pl.DataFrame:
    return pl.DataFrame({
        "trace": ["short"], "requests": [3], "prompt_tokens": [30], "output_tokens": [3],
        "gpu_hours": [0.1], "spend_usd": [1.0], "idle_share": [0.5], "idle_usd": [0.5],
        "p50_ttft_s": [0.2], "p95_ttft_s": [0.3], "p50_tpot_s": [p50_tpot_s],
        "p95_tpot_s": [p95_tpot_s], "usd_per_1m_output_tokens": [12.5],
    }, schema_overrides={"p50_tpot_s": pl.Float64, "p95_tpot_s": pl.Float64})


def test_a_trace_of_one_token_answers_has_no_tpot_and_still_summarises():
    """Every answer one token long: no interval between tokens, so fleet_summary's TPOT
    percentiles are null; the summary line says so instead of failing."""
    [line] = summary_lines(_summary(None, None))
    assert "TPOT none (one-token answers only);" in line and "$12.50 per 1M output tokens" in line


def test_tpot_percentiles_are_in_milliseconds():
    [line] = summary_lines(_summary(0.0123, 0.0456))
    assert "TPOT p50/p95 12.3/45.6 ms;" in line
