"""LLMPerf per-request results: a JSON **array** of objects (`individual/*.json`) with
number_input_tokens, number_output_tokens, ttft_s, end_to_end_latency_s, error_code, error_msg.

The results carry **no per-request timestamp**. LLMPerf runs `concurrency` clients in a closed
loop (each sends its next request when the previous one finishes), so arrivals are
reconstructed that way: request i goes to client i mod concurrency, and arrives when that
client's previous request ended (the sum of its earlier end-to-end latencies). Pass
`concurrency=` as the run's `--num-concurrent-requests` (default 1: one request at a time).
A row is element number `line` of the array (1-based); `raw` is the element as JSON.

Arrivals are only as good as the latencies they add up. A client's clock stops at its first
element whose end_to_end_latency_s is missing, not a number, negative, non-finite or beyond a
day (MAX_SANE_LATENCY_S): that element is rejected for its latency, and every later element of
the same client is rejected with a reason naming it, since when they were sent is not in the log
(skipping the gap would move them earlier by an unknown time, adding a wild value would move
them by that). Elements rejected for anything else (tokens, failures) did take their latency,
so they still advance their client's clock.

Failed requests are rows with an `error_code`: rate-limited ones (429, -1) have all latencies 0
and never ran (always rejected); Bedrock's -100 "Output too few tokens" ran with real latencies
and follows the `failed` policy. ttft_s / end_to_end_latency_s -> observed_ttft_s / observed_e2e_s.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import MAX_SANE_LATENCY_S, IngestResult, Policies, is_count, whole_count
from pipelines.formats.jsonlog import json_records
from pipelines.formats.rows import Labels, field_text, finish

FORMAT = "llmperf"
EXPECTED = ("an LLMPerf per-request JSON array (objects with number_input_tokens, "
            "number_output_tokens, end_to_end_latency_s)")
LABELS = Labels("end_to_end_latency_s", "number_input_tokens", "number_output_tokens",
                clock=f"a latency in seconds (0 to {int(MAX_SANE_LATENCY_S)}) to rebuild arrivals from",
                ttft="ttft_s", e2e="end_to_end_latency_s")
NEEDED = ("number_input_tokens", "number_output_tokens", "end_to_end_latency_s")
# how much of a failed request's error_msg its reason quotes
FAILURE_MSG_CHARS = 80
STOPPED = ("arrival unknown: element {} before it on the same client has no usable end_to_end_latency_s, "
           "and the closed-loop clock stops there")


def read(plain: Path, shown: Path, sha256: str, policies: Policies, concurrency: int = 1,
         start_time=None) -> IngestResult:
    if not is_count(concurrency):
        raise ValueError(f"{shown}: concurrency={concurrency!r}: expected a whole number of clients >= 1")
    concurrency = int(concurrency)
    frame = json_records(plain, shown, EXPECTED, NEEDED, "a JSON array of objects")
    optional = {"ttft_s": pl.Float64, "error_code": pl.Int64, "error_msg": pl.String}
    frame = frame.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in optional.items()
                               if name not in frame.columns)
    e2e = pl.col("end_to_end_latency_s").cast(pl.Float64, strict=False)
    parsed = frame.select(
        line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64),
        raw=pl.struct(pl.all()).struct.json_encode(),
        client=pl.int_range(pl.len()) % concurrency,
        arrival_text=field_text(pl.col("end_to_end_latency_s")),
        prompt_tokens=whole_count(pl.col("number_input_tokens")),
        prompt_text=field_text(pl.col("number_input_tokens")),
        output_tokens=whole_count(pl.col("number_output_tokens")),
        output_text=field_text(pl.col("number_output_tokens")),
        observed_ttft_s=pl.col("ttft_s").cast(pl.Float64, strict=False),
        ttft_text=pl.col("ttft_s").cast(pl.String),
        observed_e2e_s=e2e,
        failed=pl.col("error_code").is_not_null(),
        ran=e2e > 0,
        failure=pl.concat_str(pl.lit("error_code "), pl.col("error_code").cast(pl.String),
                              _message(pl.col("error_msg")), ignore_nulls=True),
    )
    return finish(_closed_loop(parsed).lazy(), path=shown, fmt=FORMAT, sha256=sha256, labels=LABELS,
                  policies=policies, start_time=start_time)


def _message(error_msg: pl.Expr) -> pl.Expr:
    """': <error_msg>' as a failure reason shows it, or null where the log wrote none (Lepton's and
    Together's 429 / -1 rows have ""): 'error_code 429: )' read as a message lost. Cut to
    FAILURE_MSG_CHARS with '...' so a long one (Perplexity's JSON error body) shows it was cut."""
    msg = error_msg.cast(pl.String).str.strip_chars()
    cut = pl.when(msg.str.len_chars() > FAILURE_MSG_CHARS).then(
        msg.str.slice(0, FAILURE_MSG_CHARS) + pl.lit("...")).otherwise(msg)
    return pl.when(msg != "").then(pl.lit(": ") + cut)


def _closed_loop(parsed: pl.DataFrame) -> pl.DataFrame:
    """`arrival` = the end of the client's previous request, while its clock runs; `bad` for the
    elements after the client's clock stopped (module docstring)."""
    e2e, line = pl.col("observed_e2e_s"), pl.col("line")
    usable = (e2e.is_finite() & (e2e >= 0) & (e2e <= MAX_SANE_LATENCY_S)).fill_null(False)
    stop = pl.col("stop")   # the client's first element with an unusable latency (null: none)
    return parsed.with_columns(stop=pl.when(~usable).then(line).min().over("client")).with_columns(
        arrival=pl.when(stop.is_null() | (line < stop)).then((e2e.cum_sum() - e2e).over("client")),
        bad=pl.when(line > stop).then(pl.format(STOPPED, stop)),
    ).drop("client", "stop")
