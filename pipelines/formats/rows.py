"""From parsed rows to an `IngestResult`: the checks every format shares, the policies, the
arrival order, and the two passes that keep a 27-million-row file within a few GB.

A reader hands in a LazyFrame (usually a scan of the file) with one row per data line: `line`,
`raw`, `bad` (a format-specific reason or null), `arrival` (UTC datetime for absolute clocks,
float seconds for relative ones) with `arrival_text`, `prompt_tokens`/`output_tokens` (Int64,
null when not a whole number) with their `*_text` ("missing" when the field is absent or null:
reasons quote them), and optionally `cached_tokens` (+ `cached_text`), `prefix_hashes`, `model`,
`tenant`, `observed_ttft_s`, `observed_e2e_s`, `failed` (the log marks the request failed),
`failure` (what the log says) and `ran` (it has real latencies). An observed latency comes with
its text (`ttft_text`, `e2e_text`: null or empty where the log has none) when the log can hold
something that is not a number. Labels name the fields as the file does ("ContextTokens is -3").

Pass 1 (streaming) keeps, per line, only the typed columns, an `ok` flag (cheap boolean
checks, no text) and a 64-bit hash of the raw line. Pass 2 re-reads only the lines that failed
a check or whose hash repeats, to write each rejected row's raw text and reason and to confirm
exact duplicates on the text itself (a hash collision can never reject a row).

arrival_s = arrival - first accepted arrival (seconds); relative clocks get
arrival_ts = start_time + arrival_s when the user gives `start_time` (the wall-clock time of the
first request), else null. Units are fixed per format (or given by the user), never guessed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipelines.formats.common import (
    BULK_MARGIN_MIN_S,
    BULK_MARGIN_QUARTILE_SPANS,
    BULK_OUTLIER_MAX_SHARE,
    EARLIEST_ARRIVAL,
    LATEST_ARRIVAL,
    MAX_RELATIVE_ARRIVAL_S,
    MAX_RELATIVE_ARRIVAL_YEARS,
    MAX_SANE_LATENCY_S,
    MAX_SANE_TOKENS,
    OPTIONAL_COLUMNS,
    REJECTED_SCHEMA,
    IngestResult,
    Policies,
    start_time_of,
)
from pipelines.formats.units import PER_SECOND, per_second


# The reason of a row that fails a check whose message quotes a field the row lacks (a reader
# that forgot to fill a null text): the row must still be rejected with a reason, never dropped.
UNQUOTABLE = "fails a check, and a field its reason would quote is missing or null (see the raw text)"
# Canonical columns that name someone or something; a blank value is none (`_named`).
NAME_COLUMNS = ("model", "tenant")


def field_text(value: pl.Expr) -> pl.Expr:
    """A field as the text its reasons quote (a reader's `*_text` columns): 'missing' where the
    field is absent or null, since a null would leave the reason null (and the row with UNQUOTABLE)."""
    return value.cast(pl.String).fill_null("missing")


@dataclass(frozen=True)
class Labels:
    """How the file names the arrival, prompt, output and cached fields (for reasons)."""
    arrival: str
    prompt: str
    output: str
    cached: str = "cached tokens"
    clock: str = "a date-time"   # what the arrival should be, e.g. "a number of seconds"
    # a relative clock's unit as the file writes it ("ms" for a Mooncake trace): reasons quote
    # the file's value, so they give the bounds it is held to in the same unit
    unit: str = "s"
    ttft: str = "observed_ttft_s"
    e2e: str = "observed_e2e_s"
    # how a log of Unix times is read, for the reason of a relative arrival too far from its
    # clock's zero: only the generic formats take time_unit 'unix_s' / 'unix_ms', so the others
    # (Mooncake's time_unit refuses them; BurstGPT and Vidur have none) name those formats
    unix_clock: str = ("a log of Unix times is read as format 'csv' or 'jsonl' with a column mapping and"
                       " time_unit='unix_s' or 'unix_ms'")
    # the unit a generic log's latencies were read in (its latency_unit option); None for a
    # format whose unit is fixed. A latency beyond a day is then most likely read in the wrong
    # unit, and its reason names the setting that fixes it, not only the bound.
    latency_unit: str | None = None


def _checks(labels: Labels, policies: Policies, relative: bool, columns: set[str]) -> list[tuple[pl.Expr, pl.Expr]]:
    """(condition, reason) pairs in order; a row is rejected with the first true condition's reason."""
    arrival, prompt, output = pl.col("arrival"), pl.col("prompt_tokens"), pl.col("output_tokens")
    arrival_bad = arrival.is_null()
    if relative:
        arrival_bad = arrival_bad | arrival.is_nan() | arrival.is_infinite()
    checks = [
        (pl.col("bad").is_not_null(), pl.col("bad")),
        (arrival_bad, pl.format("{} is not {}: '{}'", pl.lit(labels.arrival), pl.lit(labels.clock),
                                pl.col("arrival_text"))),
    ]
    if relative:   # a number all the same: 'is not a number of seconds: -1' read as a parse error
        checks.append((arrival < 0, pl.format("{} is '{}': negative, before the zero a relative clock"
                                              " counts up from", pl.lit(labels.arrival), pl.col("arrival_text"))))
    checks.append(_arrival_bound(labels, relative))
    if "failed" in columns:
        checks.append((pl.col("failed") & ~pl.col("ran"),
                       pl.format("the request failed ({}) and never ran: nothing to replay", pl.col("failure"))))
        if policies.failed == "reject":
            checks.append((pl.col("failed"), pl.format("the request failed ({}); option failed='reject'",
                                                       pl.col("failure"))))
    not_whole = "{} is not a whole number in range: '{}'"
    checks += [
        (prompt.is_null(), pl.format(not_whole, pl.lit(labels.prompt), pl.col("prompt_text"))),
        (prompt < 1, pl.format("{} is {}: a request needs at least one prompt token", pl.lit(labels.prompt), prompt)),
        (prompt > MAX_SANE_TOKENS, pl.format("{} is {}: beyond {} tokens", pl.lit(labels.prompt), prompt,
                                             pl.lit(MAX_SANE_TOKENS))),
        (output.is_null(), pl.format(not_whole, pl.lit(labels.output), pl.col("output_text"))),
        (output < 0, pl.format("{} is {}: a token count cannot be negative", pl.lit(labels.output), output)),
        (output > MAX_SANE_TOKENS, pl.format("{} is {}: beyond {} tokens", pl.lit(labels.output), output,
                                             pl.lit(MAX_SANE_TOKENS))),
    ]
    if policies.zero_output == "reject":
        checks.append((output == 0, pl.format("{} is 0: no answer to replay (option zero_output='one' replays "
                                              "it as a one-token answer)", pl.lit(labels.output))))
    if "cached_tokens" in columns:
        cached = pl.col("cached_tokens")
        checks += [
            (cached.is_null(), pl.format(not_whole, pl.lit(labels.cached), pl.col("cached_text"))),
            (cached < 0, pl.format("{} is {}: cannot be negative", pl.lit(labels.cached), cached)),
            (cached >= prompt, pl.format("{} is {}: must be fewer than the {} prompt tokens", pl.lit(labels.cached),
                                         cached, prompt)),
        ]
    return checks + _latency_checks(labels, columns)


def _arrival_bound(labels: Labels, relative: bool) -> tuple[pl.Expr, pl.Expr]:
    """An arrival outside what any request log holds (common.py's bounds say why); a relative
    clock's bound in the file's own unit, beside the file's value."""
    arrival, value = pl.col("arrival"), pl.col("arrival_text")
    if relative:
        bound = f"{MAX_RELATIVE_ARRIVAL_S * per_second(labels.unit):.0f} {labels.unit}"
        return (arrival > MAX_RELATIVE_ARRIVAL_S,
                pl.format("{} is '{}': beyond {} years ({}) from the clock's zero, longer than a relative "
                          "clock runs (a wrong unit or a broken clock; {})", pl.lit(labels.arrival), value,
                          pl.lit(MAX_RELATIVE_ARRIVAL_YEARS), pl.lit(bound), pl.lit(labels.unix_clock)))
    return ((arrival < EARLIEST_ARRIVAL) | (arrival >= LATEST_ARRIVAL),
            pl.format("{} is '{}': outside {} to {} UTC, the window a request's arrival can fall in (a wrong "
                      "unit or a broken clock)", pl.lit(labels.arrival), value,
                      pl.lit(f"{EARLIEST_ARRIVAL:%Y-%m-%d}"), pl.lit(f"{LATEST_ARRIVAL:%Y-%m-%d}")))


def _outlier_check(arrivals: pl.Series, labels: Labels) -> tuple[pl.Expr, pl.Expr] | None:
    """An arrival alone in time, far from the bulk of its own file's (the arrivals that passed
    every row check): a mistyped date that would make the replay price years of idle fleet. The
    window is common.py's (BULK_MARGIN_*). Arrivals outside it are rejected by runs: a run is
    arrivals no more than the margin apart, and one wholly outside the window that holds at
    most BULK_OUTLIER_MAX_SHARE of the file's arrivals, or a single one, is a typo (a row, or a
    few with the same slip); a bigger run is a session of its own (200 requests two days after
    800) and is kept. None when nothing is rejected. A relative clock's window is in the file's
    own unit, as the value its reason quotes is."""
    if arrivals.is_empty():
        return None
    relative = arrivals.dtype.is_numeric()
    origin = arrivals.min()
    arrival = pl.col("arrival")
    since = (arrival - origin) if relative else (arrival - origin).dt.total_microseconds() / 1e6
    seconds = pl.DataFrame({"arrival": arrivals}).select(s=since)["s"]
    first, third = seconds.quantile(0.25, "nearest"), seconds.quantile(0.75, "nearest")
    margin = max(BULK_MARGIN_MIN_S, BULK_MARGIN_QUARTILE_SPANS * (third - first))
    if seconds.min() >= first - margin and seconds.max() <= third + margin:
        return None   # the usual log: every arrival within the window, no runs to sort out
    ordered = pl.DataFrame({"s": seconds.sort()}).with_columns(
        run=(pl.col("s").diff().fill_null(0.0) > margin).cum_sum())
    stray = (ordered.group_by("run").agg(n=pl.len(), lo=pl.col("s").min(), hi=pl.col("s").max())
             .filter(((pl.col("hi") < first - margin) | (pl.col("lo") > third + margin))
                     & (pl.col("n") <= max(1.0, BULK_OUTLIER_MAX_SHARE * arrivals.len()))))
    if stray.is_empty():
        return None   # none far off, or only sessions of their own
    if relative:
        scale = per_second(labels.unit)
        low, high = (origin + first - margin) * scale, (origin + third + margin) * scale
        shown = f"{low:,.0f} to {high:,.0f} {labels.unit}"   # whole units: the margin is a day at least
    else:
        low = origin + dt.timedelta(seconds=first - margin)
        high = origin + dt.timedelta(seconds=third + margin)
        shown = f"{low:%Y-%m-%d %H:%M} to {high:%Y-%m-%d %H:%M} UTC"
    return (since.is_in(ordered.filter(pl.col("run").is_in(stray["run"].implode()))["s"].unique().implode()),
            pl.format("{} is '{}': outside {}, the middle half of this file's arrivals widened by {} "
                      "each side (ten times its length, a day at least): alone in time, likely a "
                      "mistyped date; replayed, it would price the fleet idle over the gap",
                      pl.lit(labels.arrival), pl.col("arrival_text"), pl.lit(shown),
                      pl.lit(_days(margin))))


def _days(seconds: float) -> str:
    """A margin as the reason shows it: '1 day', '3.5 days', '1,160 days' (never 1.16e+03, and
    never '1 days' for a margin a few seconds over a day)."""
    days = seconds / 86_400
    shown = f"{days:,.0f}" if days >= 100 else f"{days:.3g}"
    return "1 day" if shown == "1" else f"{shown} days"


def _latency_checks(labels: Labels, columns: set[str]) -> list[tuple[pl.Expr, pl.Expr]]:
    """Observed latencies: absent is fine, anything else must be seconds from 0 to a day, and the
    first token cannot come after the end of the answer. A reason shows the values in seconds,
    with their unit: a generic log's column read with latency_unit="ms" holds 900 where the
    value checked is 0.9, shown to 15 significant digits (Polars divides by the unit as a
    multiplication by its reciprocal: 950 ms is 0.9500000000000001 s unrounded; rounded to the
    nanosecond instead, a TTFT of 1.0000000001 s over an e2e of 1.0 read "1.0 s, more than 1.0 s"). A
    generic log's latency beyond a day names its latency_unit too (Labels.latency_unit): a log
    in milliseconds read as seconds is a setting to change."""
    checks = []
    *others, last = (f'"{unit}"' for unit in PER_SECOND)
    unit_hint = "" if labels.latency_unit is None else (
        f"; read with latency_unit {labels.latency_unit!r}: if the log's latencies are in another"
        f' unit, its sidecar takes "latency_unit": {", ".join(others)} or {last}')
    for name, text, label in (("observed_ttft_s", "ttft_text", labels.ttft),
                              ("observed_e2e_s", "e2e_text", labels.e2e)):
        v = pl.col(name)
        if text in columns:
            checks.append((v.is_null() & (pl.col(text).str.strip_chars() != ""),
                           pl.format("{} is not a number: '{}'", pl.lit(label), pl.col(text))))
        if name in columns:
            for wrong, hint in ((v.is_nan() | v.is_infinite() | (v < 0), ""), (v > MAX_SANE_LATENCY_S, unit_hint)):
                checks.append((v.is_not_null() & wrong,
                               pl.format("{} is {} s: not a latency in seconds (0 to {}){}", pl.lit(label), v.round_sig_figs(15),
                                         pl.lit(int(MAX_SANE_LATENCY_S)), pl.lit(hint))))
    if {"observed_ttft_s", "observed_e2e_s"} <= columns:
        ttft, e2e = pl.col("observed_ttft_s"), pl.col("observed_e2e_s")
        checks.append((ttft > e2e, pl.format("{} is {} s, more than {} {} s: the first token cannot come after "
                                             "the end of the answer", pl.lit(labels.ttft), ttft.round_sig_figs(15),
                                             pl.lit(labels.e2e), e2e.round_sig_figs(15))))
    return checks


def _defaults(frame: pl.LazyFrame) -> pl.LazyFrame:
    names = frame.collect_schema().names()
    extra = {"bad": pl.lit(None, pl.String)}
    if "failed" in names:
        extra |= {"ran": pl.lit(True), "failure": pl.lit(None, pl.String)}
    frame = frame.with_columns(**{k: v for k, v in extra.items() if k not in names})
    if "failed" in names:
        frame = frame.with_columns(pl.col("failed").fill_null(False), pl.col("ran").fill_null(True))
    return frame


def finish(frame: pl.LazyFrame, *, path: Path, fmt: str, sha256: str, labels: Labels,
           policies: Policies, start_time: dt.datetime | str | None = None,
           prefix_block_tokens: int | None = None) -> IngestResult:
    """Check, apply the policies, split accepted/rejected, and return rows sorted by arrival."""
    try:
        start_time = start_time_of(start_time)
    except ValueError as exc:
        raise ValueError(f"{path}: start_time={start_time!r}: {exc}") from None
    frame = _defaults(frame)
    columns = set(frame.collect_schema().names())
    relative = frame.collect_schema()["arrival"].is_numeric()
    if not relative and start_time is not None:
        raise ValueError(f"{path}: start_time is only for relative clocks; this file's "
                         f"{labels.arrival} is already a date-time")
    checks = _checks(labels, policies, relative, columns)
    failing = pl.any_horizontal([condition.fill_null(False) for condition, _ in checks])
    kept = ["line", "arrival", "prompt_tokens", "output_tokens",
            *[c for c in OPTIONAL_COLUMNS if c in columns], *(["failed"] if "failed" in columns else [])]

    # Pass 1: typed columns, the check result and the line hash; no text survives.
    typed = frame.select(*[_named(c) if c in NAME_COLUMNS else c for c in kept],
                         ok=~failing, raw_hash=pl.col("raw").hash(seed=0)).collect(engine="streaming")
    outlier = _outlier_check(typed["arrival"].filter(typed["ok"]), labels)
    if outlier is not None:
        checks.append(outlier)
        typed = typed.with_columns(ok=pl.col("ok") & ~outlier[0].fill_null(False))
    repeated_hash = typed["raw_hash"].is_duplicated()
    suspects = typed.filter(~pl.col("ok") | repeated_hash).select("line", "raw_hash", "ok")

    # Pass 2: the text of the suspect lines only: reasons, raw text and exact duplicates.
    reason = pl.coalesce([pl.when(condition.fill_null(False)).then(pl.coalesce(message, pl.lit(UNQUOTABLE)))
                          for condition, message in checks])
    texts = (frame.filter(pl.col("line").is_in(suspects["line"].implode()))
             .select("line", "raw", reason=reason)
             .collect(engine="streaming").sort("line") if suspects.height
             else pl.DataFrame(schema={"line": pl.Int64, "raw": pl.String, "reason": pl.String}))
    texts = texts.with_columns(duplicate=~pl.col("raw").is_first_distinct())
    duplicate_lines = texts.filter("duplicate")["line"]
    if policies.duplicates == "reject":
        texts = texts.with_columns(reason=pl.coalesce(
            "reason", pl.when("duplicate").then(pl.lit("exact duplicate of an earlier line; option duplicates='reject'"))))
    rejected = texts.filter(pl.col("reason").is_not_null()).select(
        source_file=pl.lit(str(path)), line="line", raw="raw", reason="reason").cast(REJECTED_SCHEMA)

    counts = {
        "exact_duplicates": duplicate_lines.len(),
        "zero_output_rows": int((typed["output_tokens"] == 0).sum()),
        "failed_rows": int(typed["failed"].sum()) if "failed" in columns else 0,
    }
    rows_read = typed.height
    typed = typed.drop("raw_hash", "failed", strict=False)   # rebinding frees the hash column
    accepted = typed.filter(pl.col("ok") & ~pl.col("line").is_in(rejected["line"].implode())).drop("ok")
    del typed
    if not accepted["arrival"].is_sorted():   # logs are usually in time order: no copy then
        accepted = accepted.sort("arrival", "line")
    rows = _timed(accepted, relative, start_time).with_columns(
        output_tokens=pl.when(pl.col("output_tokens") == 0).then(1).otherwise(pl.col("output_tokens")))
    return IngestResult(path, fmt, sha256, rows_read, rows, rejected, counts,
                        prefix_block_tokens)


def _named(column: str) -> pl.Expr:
    """A model or tenant name as text, stripped as a CSV cell is, so a JSON "user": "team-a "
    is the tenant team-a (chargeback billed it apart from the same team's other requests); a
    blank one (an empty CSV cell, a JSON "user": "") names no one, so it is null, as a missing
    one is: chargeback bills no tenant '' of its own."""
    name = pl.col(column).cast(pl.String).str.strip_chars()
    return pl.when(name != "").then(name).alias(column)


def _timed(accepted: pl.DataFrame, relative: bool, start_time: dt.datetime | None) -> pl.DataFrame:
    """`arrival` -> arrival_ts (UTC, or null for a relative clock without start_time, a UTC
    datetime here) and arrival_s."""
    first = pl.col("arrival").first()
    if not relative:
        return accepted.with_columns(
            arrival_s=(pl.col("arrival") - first).dt.total_microseconds() / 1e6).rename({"arrival": "arrival_ts"})
    arrival_s = pl.col("arrival") - first
    if start_time is None:
        return accepted.with_columns(arrival_s=arrival_s).drop("arrival")
    return accepted.with_columns(arrival_s=arrival_s).drop("arrival").with_columns(
        arrival_ts=pl.lit(start_time).cast(pl.Datetime("us", "UTC"))
        + pl.duration(microseconds=(pl.col("arrival_s") * 1e6).round().cast(pl.Int64)))
