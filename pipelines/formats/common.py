"""What every trace reader returns, the canonical schema it returns it in, and the options
(judgement-call policies) every reader shares."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import numbers
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl

REQUESTS_SCHEMA = {
    "request_id": pl.String,
    "trace": pl.String,
    "arrival_ts": pl.Datetime("us", "UTC"),
    "arrival_s": pl.Float64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cached_tokens": pl.Int64,
    "prefix_hashes": pl.List(pl.Int64),
    "model": pl.String,
    "tenant": pl.String,
    "observed_ttft_s": pl.Float64,
    "observed_e2e_s": pl.Float64,
}
REJECTED_SCHEMA = {
    "source_file": pl.String,
    "line": pl.Int64,
    "raw": pl.String,
    "reason": pl.String,
}
# A prompt or answer beyond this many tokens is not a real request (no model has such a context).
MAX_SANE_TOKENS = 10_000_000
# An observed latency beyond a day is a broken clock, not a slow request.
MAX_SANE_LATENCY_S = 86_400.0
# Absolute arrivals fall in this window; outside it a value is a wrong unit or a broken clock, not
# traffic: a Unix time in milliseconds read as seconds lands in year 55,800 (beyond what Python's
# datetime holds), and 9999-12-31 among 2023 rows makes a replay timeline of 8,000 years.
EARLIEST_ARRIVAL = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
LATEST_ARRIVAL = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
# A relative clock (seconds from the trace's zero, or a machine's monotonic clock since boot)
# beyond ten years is a wrong unit or a broken clock (BurstGPT Timestamp 1e300), not an offset.
MAX_RELATIVE_ARRIVAL_YEARS = 10
MAX_RELATIVE_ARRIVAL_S = MAX_RELATIVE_ARRIVAL_YEARS * 365 * 86_400
# Within those bounds, one mistyped date (2205 for 2025, 2033 for 2023) still stretches its
# trace's replay over years of idle fleet (5.8 GB and a what-if failing on 25 M timeline cells
# for one 2033 row among 8,819 of 2023). An arrival is kept only within the middle half of its
# file's arrivals (first to third quartile) widened on each side by ten times that half's length,
# and by a day at least: no public trace comes near (AIBrix's two requests 2.85 h after the rest
# are its farthest, at 0.12 days), while a wrong year, month or week is far outside.
BULK_MARGIN_QUARTILE_SPANS = 10
BULK_MARGIN_MIN_S = 86_400.0
# ... by runs of arrivals no more than that margin apart, and only a run of at most this share of
# the file's arrivals, or of one arrival: a typo is a row or a few; a bigger run is a session of
# its own (800 requests on Monday, 200 on Wednesday) and is kept. One row is a typo in any file:
# with the share alone, a file of fewer than 100 arrivals kept a row dated ten years on.
BULK_OUTLIER_MAX_SHARE = 0.01
# Canonical columns a reader may leave out (the format has no such field); `canonical` fills
# them with their default (cached_tokens 0, the rest null).
OPTIONAL_COLUMNS = ("arrival_ts", "cached_tokens", "prefix_hashes", "model", "tenant",
                    "observed_ttft_s", "observed_e2e_s")
DEFAULTS = {"cached_tokens": 0}
# The counts every ingest reports, whatever the policies chose (trace_files columns).
COUNTS = ("exact_duplicates", "zero_output_rows", "failed_rows")
# The readers' rules, recorded per file in trace_files.reader_version: a file ingested under
# another version is read again though its content and options are unchanged, so a release that
# rejects rows an older one kept (arrivals alone in time, BULK_MARGIN_*) applies to the logs it
# finds already ingested too. Raise it with any change to what rows a file yields. 2: model
# and tenant names are stripped in every format (a JSON log kept "team-a "), and a text file
# with a NUL byte past its first 64 KiB fails (read before with that line cut at the NUL).
# 3: a Mooncake row with more hash_ids than its prompt fills blocks is rejected (a log of
# 16-token blocks read at 512 credited each hash as 512 cached tokens). 4: rows version 3
# rejected are kept: a generic log's row without a cached_tokens value (0 known), with an ISO
# 8601 arrival offset "+02" or a decimal comma, or a JSONL field whose name has a space; an
# Azure TIMESTAMP in UTC written "+00" or "+0000"; a JSONL line opening with a BOM (logs joined
# with cat); and a Parquet NaN is no longer written null in raw (a NaN row and a null row were
# exact duplicates).
READER_VERSION = 4


class TraceFormatError(ValueError):
    """The file is not a trace of the expected format; the message names it and what was expected."""


class UnknownFormatError(TraceFormatError):
    """No format could be detected from the content, or a known format's columns come with
    others (an export that added a column): format= (and its options) can still read it."""


# What a reader refusing a header of its format's columns and others says: the generic reader
# takes them (the folder ingest adds where its sidecar goes)
OTHER_COLUMNS = "a log with other columns is read with format='csv' and a column mapping"


@dataclass(frozen=True)
class Policies:
    """Judgement calls, each an explicit option of `read_trace` with a documented default.

    duplicates: an exact duplicate line (same raw text as an earlier line) is "keep" (default:
        logs with 1-s or 3-s clocks legitimately repeat identical rows) or "reject".
    zero_output: a row with 0 output tokens (and a real prompt) is "reject" (default: there is
        no answer to replay) or "one": replayed as a one-token answer, since its prefill did run.
        A BurstGPT row with `Response tokens` 0 is a *failed* request and follows `failed`.
    failed: a request the log marks as failed (BurstGPT response 0, LLMPerf error_code) that
        still has real tokens and latencies is "keep" (default: the GPU did that work) or
        "reject". A failed request with no latency (rate-limited, never ran) is always rejected.
    """

    duplicates: str = "keep"
    zero_output: str = "reject"
    failed: str = "keep"

    def __post_init__(self) -> None:
        for name, allowed in (("duplicates", ("keep", "reject")), ("zero_output", ("reject", "one")),
                              ("failed", ("keep", "reject"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"option {name}={getattr(self, name)!r}: expected one of {allowed}")


def canonical(rows: pl.DataFrame, trace: str) -> pl.DataFrame:
    """Compact accepted rows (`line`, arrival_s, tokens, the columns the format has) -> the
    canonical `requests` columns, request_id = trace:line."""
    return rows.select(
        request_id=pl.format("{}:{}", pl.lit(trace), pl.col("line")),
        trace=pl.lit(trace),
        **{name: pl.col(name) if name in rows.columns else pl.lit(DEFAULTS.get(name), dtype)
           for name, dtype in REQUESTS_SCHEMA.items() if name not in ("request_id", "trace")},
    ).cast(REQUESTS_SCHEMA)


@dataclass(frozen=True)
class IngestResult:
    """One file's ingest. `rows` holds the accepted rows compactly (sorted by arrival, with their
    line number, only the columns the format has), so a 27M-row file fits in memory;
    `requests` is the canonical frame built from it."""
    file: Path
    format: str
    sha256: str
    rows_read: int
    rows: pl.DataFrame       # accepted, compact
    rejected: pl.DataFrame   # REJECTED_SCHEMA
    counts: dict = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    prefix_block_tokens: int | None = None   # tokens per prefix_hashes block (Mooncake: 512)

    def __post_init__(self) -> None:
        if self.rows_read != self.rows.height + self.rejected.height:
            raise AssertionError(
                f"{self.file}: read {self.rows_read} rows but accepted {self.rows.height}"
                f" + rejected {self.rejected.height}"
            )

    @property
    def trace(self) -> str:
        return trace_name(self.file)

    @cached_property
    def requests(self) -> pl.DataFrame:
        """Accepted rows in the canonical REQUESTS_SCHEMA, sorted by arrival."""
        return canonical(self.rows, self.trace)

    def file_row(self) -> dict:
        """The `trace_files` row of this file."""
        return {
            "file": str(self.file),
            "trace": self.trace,
            "format": self.format,
            "sha256": self.sha256,
            "rows_read": self.rows_read,
            "rows_accepted": self.rows.height,
            "rows_rejected": self.rejected.height,
            **{name: self.counts.get(name, 0) for name in COUNTS},
            "prefix_block_tokens": self.prefix_block_tokens,
            "reader_version": READER_VERSION,
        }


def whole_count(value: pl.Expr) -> pl.Expr:
    """A token count as Int64, from a text or number column; null (a rejected row, whose reason
    quotes the text) unless it is a whole number in Int64's range. 100.7 is refused, never
    truncated as a plain cast would; 100.0, 1e3 and a Parquet float column of whole values (what
    pandas writes for an int column with gaps) are the counts they say, in every format alike.
    The exact integer cast comes first, so a large integer keeps every digit (and a log of
    plain integers costs what a cast costs). Readers hand it text for booleans (a JSON `true` is
    not 1 token)."""
    exact = value.cast(pl.String).cast(pl.Int64, strict=False)   # as text: a float 5.5 is no 5
    number = value.cast(pl.Float64, strict=False)
    whole = pl.when(number.is_finite() & (number == number.floor())).then(number.cast(pl.Int64, strict=False))
    return pl.coalesce(exact, pl.when(exact.is_null()).then(whole))   # the float path only where needed


def known_count(value: pl.Expr) -> pl.Expr:
    """An optional count column (cached tokens: known prefix-cache hits) as Int64: where a row
    has none (null, absent, an empty CSV cell) none is known, its DEFAULTS value 0, as the
    canonical column is for a format that has no such field; else `whole_count`, so that a
    value that is no count is still refused."""
    text = value.cast(pl.String).str.strip_chars()
    return pl.when(text.is_null() | (text == "")).then(pl.lit(DEFAULTS["cached_tokens"], pl.Int64)).otherwise(
        whole_count(value))


def is_count(value) -> bool:
    """A format option that counts something (clients, tokens): a whole number >= 1, an integer
    or a whole float (a sidecar's JSON `5.0` counts five clients, as catalog.build takes
    max_seqs=32.0; the reader takes int(value)). A bool is not one, though Python says
    True == 1: a sidecar's `true` is a mistake, not a count."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value) and value == int(value) and value >= 1)


def is_one_of(value, names) -> bool:
    """A name-valued option (a format, a time unit) is one of `names`: text, so that a sidecar's
    JSON list or object where a name belongs is refused as no such name (looked up in a dict it
    raised TypeError, unhashable, a traceback that failed the whole folder's ingest)."""
    return isinstance(value, str) and value in names


def is_positive_number(value) -> bool:
    """A format option that scales something: a finite number > 0 (not a bool, not NaN or inf)."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


def start_time_of(value) -> dt.datetime | None:
    """The `start_time` option as a UTC datetime (None stays None): a datetime (naive = UTC), or
    ISO 8601 text, which is all a sidecar's JSON can hold. ValueError saying what was expected
    (the caller names the file and the option) for anything else or a time outside the window."""
    try:
        start = value if value is None or isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError('expected an ISO 8601 date-time text such as "2024-05-10T00:00:00Z" '
                         '(or, from Python, a datetime)') from None
    if start is None:
        return None
    start = start.astimezone(dt.timezone.utc) if start.tzinfo else start.replace(tzinfo=dt.timezone.utc)
    if not EARLIEST_ARRIVAL <= start < LATEST_ARRIVAL:
        raise ValueError(f"outside {EARLIEST_ARRIVAL:%Y-%m-%d} to {LATEST_ARRIVAL:%Y-%m-%d} UTC, the window a "
                         f"request's arrival can fall in")
    return start


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trace_name(path: Path) -> str:
    """A trace is named after its file, less the format and compression suffixes:
    AzureLLMInferenceTrace_conv.csv -> AzureLLMInferenceTrace_conv, conv.2024-01-01.csv.gz ->
    conv.2024-01-01."""
    name = path.name
    for suffix in (".gz", ".zst"):
        name = name.removesuffix(suffix)
    return name.rsplit(".", 1)[0] if "." in name else name
