"""Comma-separated logs: the header, and each data line split into named text fields.

Lines are split on commas in Polars. None of the public request-log CSVs quotes a field, but a
log saved by a spreadsheet or Python's csv module quotes some (`5,"ChatGPT",472`): a field (or
header name) wrapped in double quotes is read without them, a doubled quote inside as one. A
quoted field holding a comma is not split as one field: it shows as a wrong field count, i.e.
a rejected row with its text, never a shifted column. Columns are found by header name,
case-insensitively, so column order does not matter (Azure 2025 puts NumImages second). Blank
lines are skipped, not counted.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import whole_count
from pipelines.formats.source import first_line, read_lines


def header_and_rows(plain: Path, shown: Path, expected: str) -> tuple[list[str], pl.LazyFrame, str]:
    """The header's column names (stripped, lower-case, as the readers match them), the
    non-blank data lines after it, and the header line as the file writes it, which a message
    refusing the header quotes: the lower-cased names are not in the file to be searched for."""
    number, header = first_line(plain, shown, expected)
    rows = read_lines(plain).filter((pl.col("line") > number) & (pl.col("raw").str.strip_chars() != ""))
    return header_names(header), rows, header


def header_names(header: str) -> list[str]:
    """A header line's column names: stripped (inside their quotes too), unquoted, lower-case."""
    return [unquoted(name.strip()).strip().lower() for name in header.split(",")]


def unquoted(text: str) -> str:
    """A CSV field without its enclosing double quotes ('"ChatGPT"' is 'ChatGPT')."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    return text


def _unquoted(field: pl.Expr) -> pl.Expr:
    """`unquoted` as a Polars expression, for every row's fields."""
    quoted = field.str.starts_with('"') & field.str.ends_with('"') & (field.str.len_chars() >= 2)
    return pl.when(quoted).then(field.str.slice(1, field.str.len_chars() - 2)
                                .str.replace_all('""', '"', literal=True)).otherwise(field)


def split_fields(rows: pl.LazyFrame, header: list[str], wanted: dict[str, str]) -> pl.LazyFrame:
    """Add one stripped text column per `wanted` header name (-> column name), and `bad` for a
    line whose field count differs from the header's."""
    n = len(header)
    parts = pl.col("raw").str.split_exact(",", n - 1)
    count = pl.col("raw").str.count_matches(",", literal=True) + 1
    # stripped in one step and unquoted in the next: _unquoted reads its field six times, and
    # the whole strip would be redone for each (20% of an Azure CSV's read_trace)
    return rows.with_columns(_parts=parts, _count=count).with_columns(
        **{column: pl.col("_parts").struct.field(f"field_{header.index(name)}").str.strip_chars()
           for name, column in wanted.items()},
    ).with_columns(
        **{column: _unquoted(pl.col(column)) for column in wanted.values()},
        bad=pl.when(pl.col("_count") != n)
        .then(pl.format("expected {} comma-separated fields, got {}{}", pl.lit(n), pl.col("_count"),
                        # a comma inside quotes adds fields: a short row has another cause
                        pl.when((pl.col("_count") > n) & pl.col("raw").str.contains('"', literal=True))
                        .then(pl.lit(" (a comma inside a quoted field is not read as text)"))
                        .otherwise(pl.lit("")))),
    ).drop("_parts", "_count")


def whole(text: str) -> pl.Expr:
    """A text column of a token count as Int64 (common.whole_count: null when not whole)."""
    return whole_count(pl.col(text))


def seconds(text: str) -> pl.Expr:
    """A text column of seconds as float; null when not a number."""
    return pl.col(text).cast(pl.Float64, strict=False)
