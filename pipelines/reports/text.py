"""The report's content, once: the headline (each number with the table row it comes from) and
the sections as a list of blocks, which `report_markdown` (report.md, `make demo`) and
pipelines/reports/html.py (report.html) render."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from pipelines.reports.scenarios import gpu_hour_price
from pipelines.roofline.catalog import another_model
from pipelines.warehouse import read_table, run_sql

SHAPE_COLUMNS = {
    "rank": "#", "shape": "shape", "pct_spend": "% spend", "cum_pct_spend": "cum %",
    "pct_requests": "% requests", "spend_usd": "$", "usd_per_request": "$/request",
    "usd_per_1m_output_tokens": "busy $/1M out", "p95_ttft_s": "p95 TTFT s", "p50_tpot_s": "p50 TPOT s",
    "dominant_stage": "dominant stage", "cost_stage": "cost stage", "bound": "bound",
}
STAGE_COLUMNS = {"stage": "stage", "latency_s": "latency s (sum)", "pct_latency": "% latency",
                 "gpu_hours": "GPU-hours", "pct_gpu_time": "% GPU time", "spend_usd": "$",
                 "pct_spend": "% spend"}
WHAT_IF_COLUMNS = {
    "scenario": "scenario", "change": "what changes", "spend_usd": "busy $",
    "delta_pct": "Δ spend %", "delta_usd_per_day": "Δ $/day", "p95_ttft_s": "p95 TTFT s",
    "delta_p95_ttft_s": "Δ p95 TTFT s", "p95_tpot_s": "p95 TPOT s", "delta_p95_tpot_s": "Δ p95 TPOT s",
    "delta_fleet_usd_per_day": "Δ fleet $/day",
}
CHARGEBACK_COLUMNS = {"dimension": "by", "value": "who", "requests": "requests",
                      "spend_usd": "$", "pct_spend": "% spend",
                      "usd_per_1m_output_tokens": "busy $/1M out", "p95_ttft_s": "p95 TTFT s"}
REPORT_TABLES = ("fleet_summary", "shape_spend", "stage_breakdown", "what_if", "chargeback",
                 "fleet_timeline_minute", "deployment_summary")
# Chart stem -> its title in the report; pipelines/reports/charts.py draws them (report_charts).
CHARTS = {
    "pareto": "Pareto of spend by request shape",
    "heatmap": "Spend over prompt x output length",
    "stage_shares": "Stage shares of latency and GPU time per shape",
    "timeline": "The fleet minute by minute",
    "what_if": "What-if replays",
}


@dataclass(frozen=True)
class ReportTables:
    """The report tables of the warehouse, as Polars frames."""

    fleet_summary: pl.DataFrame
    shape_spend: pl.DataFrame
    stage_breakdown: pl.DataFrame
    what_if: pl.DataFrame
    chargeback: pl.DataFrame
    fleet_timeline_minute: pl.DataFrame
    deployment_summary: pl.DataFrame

    @classmethod
    def read(cls, conn: duckdb.DuckDBPyConnection) -> ReportTables:
        return cls(**{t: read_table(conn, t) for t in REPORT_TABLES})


@dataclass(frozen=True)
class Fact:
    """One number of the headline, and where to find it in the warehouse."""

    text: str
    source: str


def _fmt(value) -> str:
    """A cell for reading. A rounded delta of float noise below zero is -0.0 (sql/what_if.sql
    rounds deltas): it prints as 0, since "-0" reads as a saving that is not there."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if value == 0:  # -0.0 included
            return "0"
        if not math.isfinite(value):  # nan (a 0/0 share), inf: no digits to count
            return str(value)
        # the form goes by the value as it will read: 999.999 reads 1,000 (not 1,000.00) and
        # 0.9995 reads 1.00 (not 1), like 1000.0 and 1.0
        if abs(float(f"{value:.2f}")) >= 1000:
            return f"{value:,.0f}"
        if abs(float(f"{value:.3g}")) >= 1:
            return f"{value:,.2f}"
        # three significant digits, never in exponent form: a rare shape's 3.7e-06 % of requests
        # reads as 0.0000037
        decimals = 2 - math.floor(math.log10(abs(value)))
        return f"{value:.{decimals}f}".rstrip("0").rstrip(".")
    if isinstance(value, bool):  # an int to Python: calibration.at_bound read 0, is_default 1
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _usd(amount: float) -> str:
    """A dollar amount of the prose (no $ sign), the same wherever it is said: cents from $1
    ($142.79, $7,352.03), and under that _fmt's three digits, so a small fleet's $0.0143 with
    $0.00481 of it idle does not read "$0.01 (idle 34% = $0.00)" in one sentence and $0.0143 in
    the next. Cents at least below $1 too: $0.50, not $0.5."""
    if not math.isfinite(amount) or abs(float(f"{amount:.3g}")) >= 1:
        return f"{amount:,.2f}"
    whole, _, decimals = _fmt(amount).partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"


def _pct(value: float, least: int = 0) -> str:
    """A share in `least` decimals (the headline's whole percent: 80%), but a share that is not
    0 or 100 never reads as one: a week-long log of ten requests read "idle GPUs are 100% of the
    $216.72 the fleet cost" (and "idle 100.0%") beside its busy prefill and decode dollars (idle
    99.999%). Up to six decimals, as many as it takes; float noise of 100 (a cumulative share)
    still reads 100."""
    for decimals in range(least, 7):
        text = f"{value:.{decimals}f}"
        if float(text) not in (0.0, 100.0) or value in (0.0, 100.0):
            return text
    return f"{value:.{least}f}"


def _count(n: int, noun: str) -> str:
    """`n` of `noun` with the noun in the number it takes: 1 request, 2 requests, 28,185 requests
    (a fleet of one request read "1 requests")."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _shapes_lead(top: int, shapes: int) -> str:
    """The subject of the sentence on the top shapes' spend: the top k of n, or all of them, or
    the one ("the top 1 of 1 request shapes are 100%" on a fleet of one shape)."""
    if top < shapes:
        return f"the top {top} of {shapes} request shapes are"
    return "the one request shape is" if shapes == 1 else f"all {shapes} request shapes are"


def table_rows(frame: pl.DataFrame, columns: dict[str, str]) -> list[list[str]]:
    """The cells of `columns`, formatted for reading."""
    return [[_fmt(row[c]) for c in columns] for row in frame.select(list(columns)).iter_rows(named=True)]


def markdown_table(frame: pl.DataFrame, columns: dict[str, str]) -> str:
    head = "| " + " | ".join(columns.values()) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    rows = ["| " + " | ".join(map(_markdown_cell, cells)) + " |" for cells in table_rows(frame, columns)]
    return "\n".join([head, rule, *rows])


def _markdown_cell(text: str) -> str:
    """A cell's text inside a markdown table row, which a | would split and a line break end:
    calibration.implausible's one reason per line broke the UI's preview into loose paragraphs,
    and a rejected row's raw text 12|3 gave its row a column too many. Lines join with "; "."""
    return "; ".join(text.splitlines()).replace("|", "\\|")


# The fleet_summary columns summary_lines reads (pipelines/summary.py checks a warehouse has them).
SUMMARY_LINE_COLUMNS = ("trace", "requests", "span_s", "prompt_tokens", "output_tokens", "gpu_hours", "spend_usd",
                        "idle_share", "idle_usd", "p50_ttft_s", "p95_ttft_s", "p50_tpot_s", "p95_tpot_s",
                        "usd_per_1m_output_tokens", "mean_batch", "max_seqs", "peak_kv_use")


def summary_lines(summary: pl.DataFrame) -> list[str]:
    """One paragraph per trace (and for all traces) with the fleet's headline numbers. Beside
    the idle share, how full the busy GPUs are (mean batch against max_seqs, the peak KV use):
    the demo's conv trace, idle 0.3%, read as a full fleet running batches of 9.6 of 256."""
    lines = []
    for s in summary.iter_rows(named=True):
        lines.append(
            f"**{s['trace']}**: {_count(s['requests'], 'request')} over {_duration(s['span_s'])}, "
            f"{s['prompt_tokens']:,} prompt + "
            f"{s['output_tokens']:,} output tokens; {_gpu_hours(s['gpu_hours'])} GPU-hours = "
            f"${_usd(s['spend_usd'])} (idle {_pct(100 * s['idle_share'], 1)}% = ${_usd(s['idle_usd'])}; "
            f"mean batch {s['mean_batch']:,.1f}{_of_max(s['max_seqs'])}, "
            f"peak KV use {_fmt(100 * s['peak_kv_use'])}%); "
            f"TTFT p50/p95 {s['p50_ttft_s']:.3f}/{s['p95_ttft_s']:.3f} s; "
            f"{_tpot_text(s['p50_tpot_s'], s['p95_tpot_s'])}; "
            f"${_usd(s['usd_per_1m_output_tokens'])} per 1M output tokens (busy + idle)"
        )
    return lines


# The deployment_summary columns deployment_lines reads (pipelines/summary.py checks a warehouse has them).
DEPLOYMENT_LINE_COLUMNS = ("deployment", "traces", "trace_names", "requests", "gpu_hours", "spend_usd",
                           "idle_share", "idle_usd", "usd_per_1m_output_tokens")


def deployment_lines(deployments: pl.DataFrame) -> list[str]:
    """One line per deployment of a fleet of several (rows of deployment_summary): what each
    costs, its traces' lines added up, which the trace lines and the `all` line left the reader
    to add by hand. None for a fleet of one deployment, whose line would be its `all` line again."""
    if deployments.height < 2:
        return []
    return [f"**deployment `{d['deployment']}`** ({_traces_of(', '.join(d['trace_names']), d['traces'])}):"
            f" {_count(d['requests'], 'request')}; {_gpu_hours(d['gpu_hours'])} GPU-hours ="
            f" ${_usd(d['spend_usd'])} (idle {_pct(100 * d['idle_share'], 1)}% = ${_usd(d['idle_usd'])});"
            f" ${_usd(d['usd_per_1m_output_tokens'])} per 1M output tokens (busy + idle)"
            for d in deployments.iter_rows(named=True)]


def fleet_lines(t: ReportTables) -> list[str]:
    """The Fleet section's lines, the report's and the summary's: on a fleet of several
    deployments each deployment's first, right under the sentence naming them with their traces
    and prices, then each trace's, then the `all` line, the total of both."""
    return deployment_lines(t.deployment_summary) + summary_lines(t.fleet_summary)


def _of_max(max_seqs: int | None) -> str:
    """" of max 256": the deployment's limit beside the mean batch; none for an `all` row over
    deployments of different limits (fleet_summary.max_seqs is null there)."""
    return f" of max {max_seqs:,}" if max_seqs is not None else " (max_seqs differs by deployment)"


def unserved_sentence(unserved: Sequence[tuple]) -> str | None:
    """The report's one sentence on the requests the replay set aside (rows of
    sql/summary_unserved_requests.sql: trace, how many, the first one's id and reason), or None
    when there are none. Every figure leaves them out, and a reader of the report alone (no
    summary, no Dagster check) took its 'requests' for the whole log."""
    if not unserved:
        return None
    total = sum(count for _, count, *_ in unserved)
    traces = ", ".join(f"{trace} {count:,}" for trace, count, *_ in unserved)
    _, _, request_id, reason = unserved[0]
    return (f"**Left out:** {total:,} request(s) ({traces}) were set aside, not replayed, because"
            f" the deployment their trace replays on cannot serve them (e.g. {request_id}, which"
            f" {reason}); every figure of this report leaves them out (`unserved_requests`).")


# How many files a report sentence names one by one (unread files, files with rejected or no
# rows); `failed_trace_files` and `rejected_requests` hold them all.
FILES_NAMED = 5


def failed_file_error(file: str, error: str) -> str:
    """A file's error as failed_trace_files stores it, which names the file (the ingest's do,
    with its path); the file's name is put before one that does not, so it shows once."""
    return error if Path(file).name in error else f"{Path(file).name}: {error}"


def failed_blocks(failed: Sequence[tuple]) -> list[tuple]:
    """The report's blocks on the trace files the last ingest could not read (rows of
    sql/summary_failed_files.sql: file, error, and the rows_accepted and ingested_at of the
    version it last ingested, null if never): a sentence, then each file (the first
    FILES_NAMED) with its error and what the figures hold of it; no block when every
    file read. The run succeeds on such a file and only the summary and an asset check named
    it: a reader of the report alone saw fleet figures that silently missed a whole upload."""
    if not failed:
        return []
    items = [f"{failed_file_error(file, error)} — " + (
        "never ingested: none of its requests is in any figure" if rows is None else
        f"the figures hold its previous version: {_count(rows, 'request')} ingested"
        f" {ingested_at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
        for file, error, rows, ingested_at, *_ in failed[:FILES_NAMED]]
    if len(failed) > FILES_NAMED:
        items.append(f"and {_count(len(failed) - FILES_NAMED, 'more file')}"
                     f" (`failed_trace_files` holds each with its error)")
    holds = "it holds" if len(failed) == 1 else "they hold"
    lead = (f"**Trace files not read:** the last ingest could not read"
            f" {_count(len(failed), 'trace file')}; what {holds} now is in no figure of this"
            f" report (`failed_trace_files`):")
    return [("p", lead), ("ul", items)]


def rejected_sentence(incomplete: Sequence[tuple]) -> str | None:
    """The report's one sentence on the log rows ingest rejected (rows of
    sql/summary_incomplete_files.sql: file, rows read, accepted, rejected, the first rejected
    line and its reason), or None when every row of every file is in the figures. The summary
    names them; a reader of the report alone took its requests for every row of the logs. It
    names the first FILES_NAMED files of each kind and counts the rest: a folder of hundreds of
    partly rejected files made one sentence hundreds of files long."""
    if not incomplete:
        return None
    partly = [row for row in incomplete if row[3]]
    rejected = [f"{count:,} of {read:,} rows of {Path(file).name} (e.g. line {line}: {reason})"
                for file, read, _, count, line, reason in partly[:FILES_NAMED]]
    if len(partly) > FILES_NAMED:
        rest = partly[FILES_NAMED:]
        rejected.append(f"{sum(row[3] for row in rest):,} rows of {_count(len(rest), 'more file')}")
    empty = [Path(file).name for file, _, _, count, *_ in incomplete if not count]
    named = ", ".join(empty[:FILES_NAMED]) + (
        f" and {_count(len(empty) - FILES_NAMED, 'more file')}" if len(empty) > FILES_NAMED else "")
    said = ([f"{'; '.join(rejected)} were rejected at ingest; every figure of this report leaves"
             f" them out (`rejected_requests`, with each row's reason)."] if rejected else [])
    said += [f"{named} {'has' if len(empty) == 1 else 'have'} no data row."] if empty else []
    return "**Rows left out:** " + " ".join(said)


def other_model_lines(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """One line per trace and model name whose log names another catalog model than the
    deployment it was replayed on serves (rows of sql/replay_model_names.sql, placed on the
    warehouse's `models` by model_named): every figure of those requests is that deployment's
    model's time and dollars, and nothing else said so. A name the catalog cannot place
    ('gpt-4', 'llama-v2-70b-chat') is not judged. The replay's check, the summary and the
    report say it."""
    lines = []
    for trace, name, requests, of, deployment, served, models in run_sql(conn, "replay_model_names").fetchall():
        sentence = another_model(name, requests, of, deployment, served, models)
        if sentence:
            lines.append(f"{trace}: {sentence}, the deployment it was replayed on: the time"
                         f" and dollars of those requests are {served}'s, not the named model's")
    return lines


def _gpu_hours(hours: float) -> str:
    """A fleet's GPU-hours: one decimal from 1 (11.5), _fmt's three digits under that, so a
    fleet of seconds does not read "0.0 GPU-hours = $0.0846" (a single request on the demo
    fleet: 0.0137 GPU-hours)."""
    return f"{hours:,.1f}" if hours >= 1 else _fmt(hours)


def _duration(seconds: float) -> str:
    """A replayed span as a reader takes it in: 4.1 s, 57.5 min, 6.2 h, 7.0 days (a single
    request's span read "0.1 min")."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86400:,.1f} days"


def _tpot_text(p50: float | None, p95: float | None) -> str:
    """TPOT percentiles in ms; none where every answer is one token (no interval between tokens,
    so fleet_summary's percentiles are null)."""
    if p50 is None:
        return "TPOT none (one-token answers only)"
    return f"TPOT p50/p95 {1000 * p50:.1f}/{1000 * p95:.1f} ms"


def best_scenario(what_if: pl.DataFrame) -> dict | None:
    """The what-if scenario (all shapes) that frees the most busy-GPU dollars per day without
    making any trace's p95 TTFT or p95 TPOT worse, if any does: a saving bought with latency is
    not a lever the headline should recommend (the table shows those too), and the traces are
    different services, so a pooled p95 that improves can hide one that gets worse. A scenario
    that changes only the price plan (`price_only`) is not one: it frees no GPU time, it bills
    the same GPU-seconds at another price, and its dollars are at that price where the levers'
    are at the baseline's, so it would outrank each of them without being comparable (the
    table shows it, with its Δ fleet $/day: the bill's change)."""
    rows = what_if.filter((pl.col("shape") == "all") & (pl.col("delta_usd_per_day") < 0)
                          & ~pl.col("price_only")
                          & (pl.col("worst_trace_delta_p95_ttft_s") <= 0)
                          # null where no trace has a token interval: no TPOT to make worse
                          # when the baseline had none either (one-token answers only, e.g. a
                          # classifier's log), but a lever that ends every answer at its first
                          # token (an output cap of 1) removed the TPOT there was to compare
                          & ((pl.col("worst_trace_delta_p95_tpot_s") <= 0)
                             | (pl.col("worst_trace_delta_p95_tpot_s").is_null()
                                & pl.col("baseline_p95_tpot_s").is_null())))
    return rows.sort("delta_usd_per_day").row(0, named=True) if rows.height else None


STAGES_NOTE = ("Dominant stage: the stage holding most of the shape's latency. Cost stage: prefill or "
               "decode, whichever holds more of its dollars. ")
BOUND_NOTE = ("Bound: compute where compute-bound kernels hold at least half its GPU-seconds, "
              "else memory (memory-bound kernels, and the fixed step, launch and all-reduce "
              "overheads, which bind neither). ")
SPEND_NOTE = "Spend is attributed (busy) GPU time; idle GPU time is in the fleet totals above."
SHAPES_NOTE = STAGES_NOTE + BOUND_NOTE + SPEND_NOTE
WHAT_IF_NOTE = ("Each scenario (a row of the catalog's `scenarios.csv`) is a full replay of the requests the "
                "baseline replayed on a changed deployment, request log or price plan; busy $ is "
                "attributed GPU spend, Δ $/day scales each trace's replayed span to a day, and Δ "
                "fleet $/day is the change of what the fleet costs (busy + idle) per day: the bill's "
                "change, GPUs × price, which a lever on the same GPUs at the same price does not "
                "move. Per-shape deltas are in the `what_if` table.")


def what_if_note(what_if: pl.DataFrame, fleet_summary: pl.DataFrame) -> str:
    """WHAT_IF_NOTE, and where a scenario's Δ spend % and its Δ $/day as a share of the
    baseline's busy dollars a day (the headline's %) differ by a point or more (traces of unequal
    spans), why: a 2-minute trace beside a 3-hour one read "tp2-fp8 ... -42.71" under
    Δ spend % and "(-5%)" in the headline, and "prefix-cache | -0.468 | 13.64", with no word.
    Where a replayed scenario changes only the price plan, that the headline's lever is not it
    (best_scenario): its dollars would otherwise read as the largest lever, unnamed."""
    rows = what_if.filter((pl.col("shape") == "all") & pl.col("skipped").is_null()
                          & (pl.col("baseline_usd_per_day") > 0))
    daily = 100 * rows["delta_usd_per_day"] / rows["baseline_usd_per_day"]
    note = WHAT_IF_NOTE
    if ((rows["delta_pct"] - daily).abs() >= 1).any():
        note += (f" The traces' spans differ ({_spans(fleet_summary)}): Δ spend % is of"
                 " the replays' busy dollars, in which a trace weighs by its whole span, Δ $/day"
                 " scales each trace to a day, in which a short busy one weighs most, so the two can"
                 " disagree, in sign too; the headline's % is Δ $/day's share of the baseline's busy"
                 " dollars a day.")
    priced = rows.filter(pl.col("price_only"))["scenario"].to_list()
    if priced:
        note += (f" {', '.join(f'`{name}`' for name in priced)} change{'s' if len(priced) == 1 else ''}"
                 " only the price plan (`price_only`): the baseline's GPU-seconds billed at another"
                 " price, so the headline's best lever, which frees GPU time, is chosen among the"
                 " others.")
    return note


NO_WHAT_IF = ("No what-if scenario was replayed, so there is no what-if table or chart"
              " (the catalog's `scenarios.csv`).")
# "a deployment the traces were replayed on": on a fleet of several (logs whose sidecars name their
# own) a scenario is skipped where it cannot apply to one of them, which each reason names
SKIPPED_INTRO = ("Not replayed, as each cannot apply to a deployment the traces were replayed on"
                 " (`what_if.skipped`):")


def what_if_scenarios(what_if: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The all-shapes rows of the scenarios that were replayed, by Δ $/day, and "`name`: reason"
    for each skipped one: a skipped scenario has no figures, so as a table row it would be a row
    of dashes that hides why (the report and the summary list these under their table)."""
    scenarios = what_if.filter(pl.col("shape") == "all").sort("delta_usd_per_day")
    skipped = scenarios.filter(pl.col("skipped").is_not_null())
    return (scenarios.filter(pl.col("skipped").is_null()),
            [f"`{r['scenario']}`: {r['skipped']}" for r in skipped.iter_rows(named=True)])


# The what_if columns with_baseline_row reads (pipelines/summary.py checks a warehouse has them).
BASELINE_ROW_COLUMNS = ("baseline_usd", "baseline_p95_ttft_s", "baseline_p95_tpot_s")


def with_baseline_row(scenarios: pl.DataFrame) -> pl.DataFrame:
    """`scenarios` (what_if_scenarios' replayed rows) under a baseline row: its busy $ and p95s,
    which every Δ is measured against and no scenario row shows; its deltas are empty. No row
    when no scenario was replayed (no row carries the baseline's figures)."""
    if not scenarios.height:
        return scenarios
    baseline = scenarios.head(1).with_columns(
        pl.lit("baseline").alias("scenario"), pl.lit("none: Δ is measured against this row").alias("change"),
        pl.col("baseline_usd").alias("spend_usd"), pl.col("baseline_p95_ttft_s").alias("p95_ttft_s"),
        pl.col("baseline_p95_tpot_s").alias("p95_tpot_s"),
        pl.when(False).then(pl.col("^delta_.*$")))   # nulls of each delta's type
    return pl.concat([baseline, scenarios])


# The what_if columns cut_short reads (pipelines/summary.py checks a warehouse has them).
CUT_SHORT_COLUMNS = ("truncated_requests", "requests", "truncated_output_pct")


def cut_short(row: dict) -> str | None:
    """What a scenario that shortens answers (an output cap) cuts, from its what_if row: "cuts
    6,614 of 28,185 answers short, 25.94% of all output tokens"; None where it cuts none. The
    headline and the what-if tables say it in these words."""
    if not row["truncated_requests"]:
        return None
    return (f"cuts {row['truncated_requests']:,} of {row['requests']:,} answers short,"
            f" {_fmt(row['truncated_output_pct'])}% of all output tokens")


def what_if_table(scenarios: pl.DataFrame, columns: dict[str, str]) -> pl.DataFrame:
    """The frame a what-if table of `columns` shows (the report's WHAT_IF_COLUMNS, the summary's
    narrower ones): `scenarios` (what_if_scenarios' replayed rows) under the baseline row, a
    scenario that cuts answers short saying so (cut_short) in its "what changes" cell, or in its
    scenario cell where the table has none. The demo's output-cap-256 read -2.05% beside levers
    that serve the same answers, while it cuts 6,614 of 28,185 short and its busy cost per output
    token rises 32%: a change of the product, which only the headline said, and only when it
    named that lever. Every other row reads as with_baseline_row gives it."""
    return with_baseline_row(saying_cut_short(scenarios, "change" if "change" in columns else "scenario"))


def saying_cut_short(scenarios: pl.DataFrame, into: str) -> pl.DataFrame:
    """`scenarios` (what_if rows) with cut_short's words after the text of column `into` on the
    rows of a scenario that cuts answers short: the what-if tables' cell and the what-if chart's
    tooltip."""
    said = [cell if text is None else f"{cell}; {text}"
            for cell, text in zip(scenarios[into], map(cut_short, scenarios.iter_rows(named=True)),
                                  strict=True)]
    return scenarios.with_columns(pl.Series(into, said, pl.String))


# The what_if columns shape_sign_note reads (pipelines/summary.py checks a warehouse has them).
SHAPE_SIGN_COLUMNS = ("scenario", "shape", "rank", "delta_pct", "delta_usd_per_day", "skipped")


def shape_sign_note(what_if: pl.DataFrame) -> str | None:
    """One sentence under the what-if table where a shape's Δ spend % has the opposite sign to
    its scenario's all-shapes row, naming the first such shape (scenarios in the table's order,
    then by rank) with both figures; None where every shape goes its scenario's way. The
    attribution rule splits each step's GPU time among the requests in it: on the demo's conv
    trace, busy 99.7% of the time, fp8 cuts busy GPU-seconds 0.26% while its decode GPU-seconds
    rise 7.7%, shape #1 costs 2.36% more and 44% of the requests cost more, as faster steps are
    shared by fewer requests. The report pointed readers to the per-shape deltas with no word
    of it (README "What-if scenarios" says why at more length)."""
    scenarios = what_if.filter((pl.col("shape") == "all") & pl.col("skipped").is_null()).select(
        "scenario", order=pl.col("delta_usd_per_day"), all_pct=pl.col("delta_pct"))
    against = (what_if.filter(pl.col("shape") != "all").join(scenarios, on="scenario")
               .filter(pl.col("delta_pct") * pl.col("all_pct") < 0)
               .sort("order", "scenario", "rank"))
    if not against.height:
        return None
    row = against.row(0, named=True)
    return (f"A shape's Δ spend % in the `what_if` table can have the opposite sign to its"
            f" scenario's: under `{row['scenario']}`, shape #{row['rank']} '{row['shape']}' changes"
            f" by {_signed_pct(row['delta_pct'])} while all shapes change by"
            f" {_signed_pct(row['all_pct'])}, because each step's GPU time is split among the"
            f" requests in it, and a lever that changes how long steps take also changes how many"
            f" requests share each one; the lever's effect is the `all` row and Δ fleet $/day.")


def _signed_pct(value: float) -> str:
    """A Δ spend % as the table's cell reads, with its sign: +2.36%, -5.68%."""
    return f"{'+' if value > 0 else ''}{_fmt(value)}%"


# Table -> the columns headline_facts (and best_scenario) read (pipelines/summary.py checks them).
HEADLINE_COLUMNS = {
    "stage_breakdown": ("shape", "stage", "pct_spend"),
    "shape_spend": ("rank", "cum_pct_spend", "shape", "pct_spend", "cost_stage", "cost_lever"),
    "fleet_summary": ("trace", "idle_usd", "spend_usd", "span_s"),
    "what_if": ("shape", "scenario", "change", "delta_usd", "delta_usd_per_day", "baseline_usd_per_day",
                "worst_trace_delta_p95_ttft_s", "worst_trace_delta_p95_tpot_s",
                "baseline_p95_ttft_s", "p95_ttft_s", "delta_fleet_usd_per_day", "requests",
                "truncated_requests", "truncated_output_pct", "prefix_cache", "lower_precision",
                "price_only"),
}


def _owning_stage(stage_breakdown: pl.DataFrame) -> dict:
    """The stage of all shapes that holds the most attributed dollars (decode on a tie): the
    headline said "Decode owns 0% of attributed GPU spend" of a log of one-token answers, all
    prefill, and "Decode owns 45%" of a burst whose prefill held 55%."""
    return (stage_breakdown.filter(pl.col("shape") == "all")
            .sort(["pct_spend", "stage"], descending=[True, False]).row(0, named=True))


def headline_facts(t: ReportTables) -> list[Fact]:
    """The headline's sentences, each number traceable to the named table row."""
    owner = _owning_stage(t.stage_breakdown)
    top = t.shape_spend.sort("rank")
    top3 = top.head(3).row(-1, named=True)
    first = top.row(0, named=True)
    fleet = t.fleet_summary.filter(pl.col("trace") == "all").row(0, named=True)
    facts = [
        Fact(f"{owner['stage'].capitalize()} owns {_pct(owner['pct_spend'])}% of attributed GPU spend",
             f"stage_breakdown: shape = 'all', stage = '{owner['stage']}', pct_spend"),
        # A sentence on spend names the stage that holds the shape's dollars and what cuts them
        # (cost_stage, cost_lever), not the stage that holds most of its latency (dominant_stage).
        Fact(f"{_shapes_lead(top3['rank'], top.height)} {_pct(top3['cum_pct_spend'])}% of it, "
             f"led by '{first['shape']}' ({_pct(first['pct_spend'])}%, most of its dollars in "
             f"{first['cost_stage']}: {first['cost_lever']})",
             f"shape_spend: rank = {top3['rank']}, cum_pct_spend; rank = 1, pct_spend, cost_stage, cost_lever"),
        # a share of the dollars it names: idle_share is of GPU time, which on a fleet of
        # deployments at several prices is not the idle dollars' share
        Fact(f"idle GPUs are {_pct(100 * fleet['idle_usd'] / fleet['spend_usd'])}% of the"
             f" ${_usd(fleet['spend_usd'])} the fleet cost",
             "fleet_summary: trace = 'all', idle_usd, spend_usd"),
    ]
    best = best_scenario(t.what_if)
    if best is not None:
        facts.append(_lever_fact(best, _spans(t.fleet_summary)))
    else:
        facts.extend(_no_lever_fact(t.what_if))
    return facts


def _no_lever_fact(what_if: pl.DataFrame) -> list[Fact]:
    """Why the headline names no lever, where scenarios were replayed: a fleet whose only saving
    (one replica of three: -$1,104/day) made p95 TTFT 0.302 → 0.411 s read a headline with no
    word of levers above a table whose first row cuts spend, as if the lever were forgotten.
    None where nothing was replayed (the what-if section says so) or only a price plan was."""
    levers = what_if.filter((pl.col("shape") == "all") & pl.col("skipped").is_null() & ~pl.col("price_only"))
    if not levers.height:
        return []
    source = "what_if: shape = 'all', delta_usd_per_day, worst_trace_delta_p95_ttft_s, worst_trace_delta_p95_tpot_s"
    if levers.filter(pl.col("delta_usd_per_day") < 0).height:
        return [Fact("no what-if lever cuts busy-GPU spend without making some trace's p95 TTFT or"
                     " TPOT worse (the what-if table shows what each one trades)", source)]
    return [Fact("no what-if lever cuts busy-GPU spend", "what_if: shape = 'all', delta_usd_per_day")]


def _dollars(amount: float) -> str:
    """A daily dollar figure of the headline: whole dollars from $10 ($179), as a reader takes a
    day's figure in; under that, _usd's cents at least ($7.20, $0.50, $0.143), as the fleet's
    dollars beside it read, so a small fleet's saving does not read $0 (nor $0.5); nothing is
    $0."""
    if abs(amount) >= 10:
        return f"{amount:,.0f}"
    return "0" if amount == 0 else _usd(amount)


def _spans(fleet_summary: pl.DataFrame) -> str:
    """The replayed spans a daily figure is scaled from (each trace's own): "58.5 min", or the
    range where the traces' spans read differently ("57.5–58.5 min", "57.5 min–6.0 h")."""
    shortest, longest = (_duration(s) for s in (fleet_summary["span_s"].min(), fleet_summary["span_s"].max()))
    if shortest == longest:
        return shortest
    number, _, unit = shortest.partition(" ")
    return f"{number if longest.endswith(' ' + unit) else shortest}–{longest}"


def _product_change(best: dict) -> list[tuple[str, str]]:
    """What a lever changes beyond the cost, said with its name, each with the what_if columns
    it comes from: an output cap frees dollars by cutting answers short (how many, and how much
    of the text), an assumed prefix-cache hit share (scenarios.csv's prefix-cache) is a
    saving only if the traffic hits that often, and weights or a KV cache in a lower-precision
    format (fp8, fp4, int8) can change the answers, which the replay does not measure."""
    parts = []
    if best["truncated_requests"]:
        parts.append((f"it {cut_short(best)}", "truncated_requests, truncated_output_pct"))
    if best["prefix_cache"] not in (None, "off") and float(best["prefix_cache"]) > 0:
        parts.append(("the saving holds only if the traffic hits the cache that often",
                      "prefix_cache"))
    if best["lower_precision"]:
        parts.append(("a lower-precision format can change the answers: check their quality"
                      " before switching",
                      "lower_precision"))
    return parts


def _before_after(before: float, after: float) -> str:
    """"1.56 → 0.50": two decimals, or up to four where two read the same, so a small fleet's
    p95 TTFT that the lever cuts from 0.0688 to 0.0652 s does not read "0.07 → 0.07"."""
    decimals = next((d for d in (2, 3, 4) if f"{before:.{d}f}" != f"{after:.{d}f}"), 2)
    return f"{before:.{decimals}f} → {after:.{decimals}f}"


def _lever_fact(best: dict, spans: str) -> Fact:
    """The best lever: the busy-GPU dollars it frees per day, and the traffic that day is scaled
    from (`spans`: an hour's log makes a day's figure), as a share of the baseline's busy dollars a
    day (not `delta_pct`, a share of the replays' dollars: with traces of unequal spans it said
    "$1,471/day (-33%)" of a $6,946/day baseline, -21%), and what the fleet (busy + idle) costs
    per day. Busy dollars are money saved only once the fleet is resized (README "What-if
    scenarios"): a lever that frees them on a fleet of the same GPUs says so, so that its $/day
    is not read as a cut of the bill."""
    bill = best["delta_fleet_usd_per_day"]
    resized = bill <= best["delta_usd_per_day"] / 2  # the bill keeps half the busy saving or more
    # in the busy saving's digits: a small fleet's -$0.30 is -$0.30, not +$0 (0 and -0.0 are +$0)
    bill_text = f"{'-' if bill < 0 else '+'}${_dollars(abs(bill))}"
    pct = 100 * best["delta_usd_per_day"] / best["baseline_usd_per_day"]
    # -0.3 is -0.3%, not -0%; -0.5 is -0.5%, not -0% (half to even rounds it to 0); -0.00004 is
    # -0.00004%, not -4e-05%
    pct_text = (f"{pct:+.0f}%" if abs(round(pct)) >= 1 else np.format_float_positional(
        pct, precision=2, unique=False, fractional=False, trim="-", sign=True) + "%")
    changes = _product_change(best)
    return Fact(
        f"the best lever that keeps every trace's p95 latency no worse, '{best['scenario']}' "
        f"({best['change']}{''.join(f'; {text}' for text, _ in changes)}), "
        f"would cut busy-GPU spend by ${_dollars(-best['delta_usd_per_day'])}/day ({pct_text}) "
        f"scaled from {spans} of traffic, "
        f"p95 TTFT {_before_after(best['baseline_p95_ttft_s'], best['p95_ttft_s'])} s; what the fleet costs "
        f"(busy + idle) changes by {bill_text}/day"
        + ("" if resized else ": a fleet of fixed size saves busy dollars only once it is resized"),
        f"what_if: scenario = '{best['scenario']}', shape = 'all', delta_usd_per_day,"
        f" baseline_usd_per_day, p95_ttft_s,"
        f" delta_fleet_usd_per_day{''.join(f', {columns}' for _, columns in changes)};"
        f" fleet_summary: span_s")


def headline(t: ReportTables) -> str:
    """The facts as two sentences: where the money goes, then what would cut it."""
    facts = [f.text for f in headline_facts(t)]
    where = "; ".join(facts[:3]) + "."
    return where if len(facts) == 3 else f"{where} {facts[3][0].upper()}{facts[3][1:]}."


def levers(shapes: pl.DataFrame) -> list[str]:
    """For every stage that dominates some shape's latency or dollars: which shapes, and its lever."""
    pairs = pl.concat([
        shapes.select("rank", stage="dominant_stage", lever="lever", role=pl.lit("latency")),
        shapes.select("rank", stage="cost_stage", lever="cost_lever", role=pl.lit("dollars")),
    ])
    grouped = (pairs.group_by("stage", "lever", "role").agg(pl.col("rank").sort())
               .sort("role", "stage", descending=[True, False]))
    return [f"{r['stage']} holds most of the {r['role']} of shape{'s' if len(r['rank']) > 1 else ''}"
            f" #{', #'.join(map(str, r['rank']))} "
            f"→ {r['lever']}" for r in grouped.iter_rows(named=True)]


def chargeback_note(chargeback: pl.DataFrame, fleet_summary: pl.DataFrame) -> str:
    """What the chargeback table's dollars leave out, for whoever splits the bill by it: the
    idle GPU time (charged to no one) and, per dimension, the requests that name no one (its
    `pct_spend` is of all attributed spend, so its rows add up to 100% only where every request
    names one). Without it, the demo's code trace beside a BurstGPT log showed tenants holding
    10.7% of spend and $2.60 of a $138.42 fleet, and said nothing of the rest."""
    fleet = fleet_summary.filter(pl.col("trace") == "all").row(0, named=True)
    text = (f"The $ and % spend columns are attributed (busy) GPU spend: "
            f"${_usd(fleet['attributed_usd'])} of the ${_usd(fleet['spend_usd'])} the fleet cost; its "
            f"idle GPU time (${_usd(fleet['idle_usd'])}) is charged to no one.")
    unnamed, absent = [], []
    for dimension in ("model", "tenant"):
        rows = chargeback.filter(pl.col("dimension") == dimension)
        requests = fleet["requests"] - rows["requests"].sum()
        if not rows.height:
            absent.append(dimension)
        elif requests:
            share = 100 - rows["pct_spend"].sum()
            usd = fleet["attributed_usd"] - rows["spend_usd"].sum()
            unnamed.append(f"{requests:,} requests name no {dimension} ({_fmt(share)}% of attributed "
                           f"spend, ${_usd(usd)})" if not unnamed else
                           f"{requests:,} name no {dimension} ({_fmt(share)}%, ${_usd(usd)})")
    if unnamed:
        text += (" A dimension's shares add up to 100% only where every request names one: "
                 + "; ".join(unnamed) + ".")
    return text + "".join(f" No request names a {dimension}." for dimension in absent)


def deployment_sentence(deployment: str, prices: Sequence[tuple] = ()) -> str:
    """Which deployment the report replayed, and at what price per GPU-hour (`prices`: rows of
    sql/report_prices.sql): a deployments.csv row without a plan takes its GPU's default price,
    and no figure said which price every dollar of the report is. A fleet of several
    deployments (traces whose logs' sidecars name their own) names each with its traces."""
    if len(prices) > 1:
        fleets = "; ".join(f"`{name}` ({_traces_of(names, traces)}) at {gpu_hour_price(usd)} per"
                           f" GPU-hour, {provider} {plan}"
                           for name, provider, plan, usd, names, traces in prices)
        return (f"Deployments replayed, each trace on its own (the one its log's sidecar names, else"
                f" the run's; the `roofline` table holds their coefficients): {fleets}"
                f" (`deployment_prices`).")
    priced = "; ".join(f"{gpu_hour_price(usd)} per GPU-hour, {provider} {plan}"
                       for name, provider, plan, usd, *_ in prices)
    return (f"Deployment replayed: `{deployment}` (the `roofline` table holds its coefficients)"
            + (f", priced at {priced} (`deployment_prices`)." if priced else "."))


def _traces_of(names: str, traces: int) -> str:
    """"traces a, b" or "trace a": `names` joined with ", ", `traces` how many. The noun goes by
    the count, not by a ", " in the names: one log named "chat, eu.csv" is one trace."""
    return f"{'trace' if traces == 1 else 'traces'} {names}"


def report_blocks(t: ReportTables, deployment: str,
                  caveats: Sequence[tuple[str, str]] = (),
                  unserved: Sequence[tuple] = (), other_models: Sequence[str] = (),
                  copies: Sequence[str] = (), prices: Sequence[tuple] = (),
                  incomplete: Sequence[tuple] = (), failed: Sequence[tuple] = ()) -> list[tuple]:
    """The report as blocks: ("h1"|"h2"|"p", text), ("ul", [items]), ("table", frame, columns),
    ("chart", stem). Text may hold **bold** and `code`. `caveats`: (section, text) rows of
    sql/report_caveats.sql, the physics caveats of what the report prices: a baseline
    deployment's come first, before any dollar figure; a what-if fleet's under its table.
    `failed`: rows of sql/summary_failed_files.sql, the files the last ingest could not read,
    named first (failed_blocks); `incomplete`: rows of sql/summary_incomplete_files.sql, said in
    one sentence (rejected_sentence).
    `unserved`: rows of sql/summary_unserved_requests.sql, said in one sentence (unserved_sentence)
    after the physics caveats and before the headline, a caveat of every dollar figure (the
    summary names them first too); so are `other_models`, the lines of other_model_lines: a
    trace priced as another model than its log names, and `copies`, the lines of
    ingest_folder.duplicate_lines: files of one log, each a trace, its traffic counted twice in
    every figure. `prices`: rows of sql/report_prices.sql, said beside the deployment
    (deployment_sentence)."""
    overall = t.stage_breakdown.filter(pl.col("shape") == "all").sort("stage_order")
    scenarios, skipped = what_if_scenarios(t.what_if)
    chargeback = ([("table", t.chargeback, CHARGEBACK_COLUMNS),
                   ("p", chargeback_note(t.chargeback, t.fleet_summary))] if t.chargeback.height else
                  [("p", "The traces name no model or tenant, so the `chargeback` table is empty.")])
    baseline_caveats = [text for section, text in caveats if section == "baseline"]
    what_if_caveats = [text for section, text in caveats if section == "what_if"]
    left_out = unserved_sentence(unserved)
    rejected = rejected_sentence(incomplete)
    shape_sign = shape_sign_note(t.what_if)
    return [
        ("h1", "fleetspend report"),
        *[("p", f"**Caveat:** {c}") for c in baseline_caveats],
        *failed_blocks(failed),
        *([("p", rejected)] if rejected else []),
        *([("p", left_out)] if left_out else []),
        *[("p", f"**Another model:** {line}") for line in other_models],
        *[("p", f"**Counted more than once:** {line}") for line in copies],
        ("p", "**" + headline(t) + "**"),
        ("ul", [f"{f.text} — `{f.source}`" for f in headline_facts(t)]),
        ("p", deployment_sentence(deployment, prices)),
        ("h2", "Fleet"),
        ("ul", fleet_lines(t)),
        ("h2", "Request shapes by share of spend"),
        ("chart", "pareto"),
        ("chart", "heatmap"),
        ("table", t.shape_spend.sort("rank"), SHAPE_COLUMNS),
        ("p", SHAPES_NOTE),
        ("p", "The lever for each stage that dominates a shape here (`shape_spend.lever` for the "
              "dominant stage, `shape_spend.cost_lever` for the cost stage):"),
        ("ul", levers(t.shape_spend)),
        ("h2", "Where the time and the GPU go"),
        ("chart", "stage_shares"),
        ("table", overall, STAGE_COLUMNS),
        ("p", "Queue and network time hold no GPU: GPU time and dollars split into prefill and decode."),
        ("h2", "What would cut it: what-if replays"),
        # every scenario skipped (one GPU, a tp that splits nothing): an empty chart and a table
        # of headers alone said nothing
        *([("p", what_if_note(t.what_if, t.fleet_summary)), ("chart", "what_if"),
           ("table", what_if_table(scenarios, WHAT_IF_COLUMNS), WHAT_IF_COLUMNS),
           *([("p", shape_sign)] if shape_sign else [])] if scenarios.height else
          [("p", NO_WHAT_IF)]),
        *([("p", "**Caveats** of what-if fleets (`scenario_fleets.caveat`):"),
           ("ul", what_if_caveats)] if what_if_caveats else []),
        *([("p", SKIPPED_INTRO), ("ul", skipped)] if skipped else []),
        ("h2", "Chargeback: spend by model and tenant"),
        *chargeback,
        ("h2", "The fleet over time"),
        ("chart", "timeline"),
    ]


def _markdown_block(block: tuple, charts: dict[str, str]) -> str:
    kind = block[0]
    if kind == "h1":
        return f"# {block[1]}"
    if kind == "h2":
        return f"## {block[1]}"
    if kind == "ul":
        return "\n".join(f"- {item}" for item in block[1])
    if kind == "table":
        return markdown_table(block[1], block[2])
    if kind == "chart":
        return f"![{CHARTS[block[1]]}]({charts[block[1]]})"
    return block[1]


def report_markdown(t: ReportTables, deployment: str, charts: dict[str, str],
                    caveats: Sequence[tuple[str, str]] = (), unserved: Sequence[tuple] = (),
                    other_models: Sequence[str] = (), copies: Sequence[str] = (),
                    prices: Sequence[tuple] = (), incomplete: Sequence[tuple] = (),
                    failed: Sequence[tuple] = ()) -> str:
    """report.md; `charts` maps each chart stem to the PNG path to link; `caveats`, `unserved`,
    `other_models`, `copies`, `prices`, `incomplete` and `failed` as in report_blocks."""
    blocks = report_blocks(t, deployment, caveats, unserved, other_models, copies, prices,
                           incomplete, failed)
    return "\n\n".join(_markdown_block(b, charts) for b in blocks) + "\n"
