"""Azure LLM inference traces (2023, 2024, 2025): TIMESTAMP,ContextTokens,GeneratedTokens[,NumImages].

The three public releases share the column names but not the clock format:
2023 `2023-11-16 18:17:03.9799600` (7 fractional digits, no zone), 2024 `2024-05-10
00:00:00.009930+00:00` (6 digits or none, UTC offset), 2025 `2024-10-15T12:00:00.269Z`.
All three are UTC wall-clock arrivals; files use CRLF and may lack a final newline.
Columns are found by name. Rejected (besides the shared checks in rows.py): a wrong field count
and a timestamp in none of the three formats.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import OTHER_COLUMNS, IngestResult, Policies, UnknownFormatError
from pipelines.formats.csvlog import header_and_rows, split_fields, whole
from pipelines.formats.rows import Labels, finish

FORMAT = "azure-llm"
EXPECTED = "an Azure LLM trace CSV with a header TIMESTAMP,ContextTokens,GeneratedTokens (optionally with NumImages)"
COLUMNS = {"timestamp": "arrival_text", "contexttokens": "prompt_text", "generatedtokens": "output_text"}
HEADERS = ({"timestamp", "contexttokens", "generatedtokens"},
           {"timestamp", "numimages", "contexttokens", "generatedtokens"})
UTC_SUFFIX = r"(?:Z|[+-]00(?::?00)?)$"
LABELS = Labels("TIMESTAMP", "ContextTokens", "GeneratedTokens", clock="a UTC date-time")


def parse_timestamp(col: pl.Expr) -> pl.Expr:
    """All three Azure clock formats -> UTC datetime; anything else -> null. UTC is any of its
    spellings ("Z", "+00:00", "+0000", "+00": DuckDB's and PostgreSQL's text of a UTC time, which
    a log given Azure's column names may hold); another offset is no UTC date-time, rejected."""
    naive = col.str.replace(UTC_SUFFIX, "").str.replace("T", " ", literal=True)
    return naive.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.replace_time_zone("UTC")


def read(plain: Path, shown: Path, sha256: str, policies: Policies) -> IngestResult:
    header, rows, written = header_and_rows(plain, shown, EXPECTED)
    if set(header) not in HEADERS or len(header) != len(set(header)):
        raise UnknownFormatError(f"{shown}: header {written!r} is not {EXPECTED}; {OTHER_COLUMNS}")
    parsed = split_fields(rows, header, COLUMNS).with_columns(
        arrival=parse_timestamp(pl.col("arrival_text")),
        prompt_tokens=whole("prompt_text"),
        output_tokens=whole("output_text"),
    )
    return finish(parsed, path=shown, fmt=FORMAT, sha256=sha256, labels=LABELS, policies=policies)
