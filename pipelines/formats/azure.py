"""Azure LLM inference traces (2023, 2024, 2025): TIMESTAMP,ContextTokens,GeneratedTokens[,NumImages].

The three public releases share the column names but not the clock format:
2023 `2023-11-16 18:17:03.9799600` (7 fractional digits, no zone), 2024 `2024-05-10
00:00:00.009930+00:00` (6 digits or none, UTC offset), 2025 `2024-10-15T12:00:00.269Z`.
All three are UTC wall-clock arrivals; files use CRLF and may lack a final newline.

The file is read as raw lines and split in Polars, so a row with the wrong number of fields is
rejected with its text rather than breaking the parse. Rejected: wrong field count, an
unparsable timestamp, token counts that are not whole numbers, prompts or answers of zero or
fewer tokens (nothing to replay), and counts beyond MAX_SANE_TOKENS.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import (
    MAX_SANE_TOKENS,
    REJECTED_SCHEMA,
    REQUESTS_SCHEMA,
    IngestResult,
    TraceFormatError,
    sha256_of,
    trace_name,
)

FORMAT = "azure-llm"
HEADERS = {
    ("timestamp", "contexttokens", "generatedtokens"): ("ts", "prompt", "output"),
    ("timestamp", "numimages", "contexttokens", "generatedtokens"): ("ts", "images", "prompt", "output"),
}
EXPECTED = "a header TIMESTAMP,ContextTokens,GeneratedTokens (optionally with NumImages)"


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_bytes().decode("utf-8-sig")  # a leading BOM (Excel exports) is dropped
    except UnicodeDecodeError:
        raise TraceFormatError(f"{path}: not a UTF-8 text file; expected an Azure LLM trace CSV with {EXPECTED}") from None
    # Rows end at LF or CRLF only: str.splitlines() would also split at form feeds and other
    # control characters inside a row, cutting it in two and shifting every later line number.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise TraceFormatError(f"{path}: the file is empty; expected an Azure LLM trace CSV with {EXPECTED}")
    return lines


def _parse_timestamp(col: pl.Expr) -> pl.Expr:
    """All three Azure clock formats -> UTC datetime; anything else -> null."""
    naive = col.str.strip_chars().str.strip_suffix("Z").str.strip_suffix("+00:00").str.replace("T", " ")
    return naive.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.replace_time_zone("UTC")


def _token_reason(name: str, raw: pl.Expr, value: pl.Expr) -> pl.Expr:
    return (
        pl.when(value.is_null()).then(pl.format("{} is not a whole number: '{}'", pl.lit(name), raw))
        .when(value < 1).then(pl.format("{} is {}: a request needs at least one token", pl.lit(name), value))
        .when(value > MAX_SANE_TOKENS).then(pl.format("{} is {}: beyond {} tokens", pl.lit(name), value, pl.lit(MAX_SANE_TOKENS)))
    )


def read_azure_csv(path: str | Path) -> IngestResult:
    """Read one Azure trace file into canonical requests (sorted by arrival) and rejects."""
    path = Path(path)
    lines = _lines(path)
    header = tuple(h.strip().lower() for h in lines[0].split(","))
    if header not in HEADERS:
        raise TraceFormatError(f"{path}: header {lines[0][:80]!r} is not {EXPECTED}")
    names = HEADERS[header]
    raw = pl.DataFrame({"raw": pl.Series(lines[1:], dtype=pl.String)}).with_row_index("line", offset=2).with_columns(
        pl.col("line").cast(pl.Int64)
    ).filter(pl.col("raw").str.strip_chars() != "")
    fields = pl.col("raw").str.split(",")
    parsed = raw.with_columns(n_fields=fields.list.len()).with_columns(
        **{name: fields.list.get(i, null_on_oob=True).str.strip_chars() for i, name in enumerate(names)}
    ).with_columns(
        arrival_ts=_parse_timestamp(pl.col("ts")),
        prompt_tokens=pl.col("prompt").cast(pl.Int64, strict=False),
        output_tokens=pl.col("output").cast(pl.Int64, strict=False),
    ).with_columns(
        reason=pl.when(pl.col("n_fields") != len(names))
        .then(pl.format("expected {} comma-separated fields, got {}", pl.lit(len(names)), pl.col("n_fields")))
        .when(pl.col("arrival_ts").is_null())
        .then(pl.format("TIMESTAMP is not a UTC date-time: '{}'", pl.col("ts")))
        .otherwise(pl.coalesce(
            _token_reason("ContextTokens", pl.col("prompt"), pl.col("prompt_tokens")),
            _token_reason("GeneratedTokens", pl.col("output"), pl.col("output_tokens")),
        ))
    )
    rejected = parsed.filter(pl.col("reason").is_not_null()).select(
        source_file=pl.lit(str(path)), line="line", raw="raw", reason="reason"
    ).cast(REJECTED_SCHEMA)
    trace = trace_name(path)
    accepted = parsed.filter(pl.col("reason").is_null()).sort("arrival_ts", "line")
    requests = accepted.select(
        request_id=pl.format("{}:{}", pl.lit(trace), pl.col("line")),
        trace=pl.lit(trace),
        arrival_ts="arrival_ts",
        arrival_s=(pl.col("arrival_ts") - pl.col("arrival_ts").min()).dt.total_microseconds() / 1e6,
        prompt_tokens="prompt_tokens",
        output_tokens="output_tokens",
        cached_tokens=pl.lit(0),
        prefix_hashes=pl.lit(None),
        model=pl.lit(None),
        tenant=pl.lit(None),
        observed_ttft_s=pl.lit(None),
        observed_e2e_s=pl.lit(None),
    ).cast(REQUESTS_SCHEMA)
    return IngestResult(path, FORMAT, sha256_of(path), raw.height,
                        requests, rejected)
