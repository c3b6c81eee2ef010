"""JSON logs. JSON Lines: one object per line, fields picked out by JSON path in Polars.
Whole JSON documents (LLMPerf arrays, keyed objects): `json_records` loads them in one piece,
with every bare true/false/NaN/Infinity read as text, so that such a value rejects its row
instead of becoming a 1 or failing the whole file (`_bare_words_as_text`).

A line that is not a JSON object is a rejected row ("not a JSON object"), not a failed file:
JSONL files are appended to by running services and a torn last line is common. Blank lines are
skipped, not counted. A field's text is kept for the reason when it is not a usable number.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import polars as pl

from pipelines.formats.common import TraceFormatError
from pipelines.formats.rows import field_text
from pipelines.formats.source import first_line, read_lines

# A bare NaN / Infinity / -Infinity as a value: what Python's json.dumps writes for non-finite floats.
NON_FINITE = r"[:\[,]\s*-?(?:NaN|Infinity)\s*[,\]}]"
# A whole JSON document as tokens: a string literal, a bare word, or a run of anything else (outside
# a string, t, f, N and I only start a bare word, and '-' a negative number or -Infinity).
JSON_TOKEN = r'(?s)"(?:[^"\\]|\\.)*"|NaN|-?Infinity|true|false|[^"tfNI-]+|.'
BARE_WORDS = ("true", "false", "NaN", "Infinity", "-Infinity")


def object_rows(plain: Path, shown: Path, expected: str) -> pl.LazyFrame:
    """The non-blank lines, with `bad` set where a line is not one JSON object. A file whose
    first line is not a JSON object is not a JSONL log at all."""
    _, first = first_line(plain, shown, expected)
    line = pl.Series([first])
    parsed = line.str.json_path_match("$")[0] is not None
    non_finite = line.str.contains(NON_FINITE)[0]  # an object, but for NaN: a row to reject
    if not first.strip().startswith("{") or not (parsed or non_finite):
        raise TraceFormatError(f"{shown}: the first line {first[:80]!r} is not a JSON object; expected {expected}")
    whole = pl.col("raw").str.json_path_match("$")
    invalid = whole.is_null() | ~pl.col("raw").str.strip_chars().str.starts_with("{")
    return read_lines(plain).filter(pl.col("raw").str.strip_chars() != "").with_columns(
        bad=pl.when(invalid & pl.col("raw").str.contains(NON_FINITE))
        .then(pl.lit("a NaN or Infinity value: non-finite numbers are not JSON and are not accepted"))
        .when(invalid).then(pl.lit("not a JSON object (a torn or corrupt line)")),
    )


def value(path: str) -> pl.Expr:
    """The JSON value at `path` ("a.b.c") as text; null when absent or null (an optional field)."""
    return pl.col("raw").str.json_path_match(f"$.{path}")


def text(path: str) -> pl.Expr:
    """The JSON value at `path` as text; 'missing' when absent or null (a field reasons quote)."""
    return field_text(value(path))


def number(path: str, dtype: pl.DataType = pl.Float64) -> pl.Expr:
    """The JSON value at `path` as a number; null when absent, null or not a number."""
    return value(path).cast(dtype, strict=False)


def whole_number(column: str) -> pl.Expr:
    """A count from a whole JSON document as Int64; null when it is not a whole number in range.
    `json_records` types a column Int64, Float64 (one 100.7 makes 5 read as 5.0) or String (mixed
    types, where 100.0 may read "100"; a bare true or NaN reads "true", "NaN"): 100.7 must be
    rejected, never truncated to 100 as a plain cast would. The exact cast comes first, so a large
    integer keeps every digit."""
    value = pl.col(column).cast(pl.Float64, strict=False)
    return pl.when(value == value.floor()).then(
        pl.coalesce(pl.col(column).cast(pl.Int64, strict=False), value.cast(pl.Int64, strict=False)))


def json_records(plain: Path, shown: Path, expected: str, needed: tuple[str, ...], shape: str,
                 records=lambda frame: frame) -> pl.DataFrame:
    """A whole JSON document as one row per record (`records` turns what pl.read_json gives
    into records); TraceFormatError naming the file if it is not `shape` or lacks `needed`."""
    try:
        document = _bare_words_as_text(plain.read_bytes().decode("utf-8-sig"))
        frame = _in_file_order(pl.read_json(io.StringIO(document), infer_schema_length=None), document)
        frame = records(frame)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise TraceFormatError(f"{shown}: not {shape} ({str(exc).splitlines()[0][:120]}); "
                               f"expected {expected}") from None
    missing = [name for name in needed if name not in frame.columns]
    if missing:
        raise TraceFormatError(f"{shown}: no field(s) {missing}; expected {expected}")
    return frame


def _bare_words_as_text(document: str) -> str:
    """`document` with every bare true, false, NaN, Infinity and -Infinity written as a JSON string.
    pl.read_json alone reads `true` among numbers as 1 (a token count or a latency the log never
    had), and refuses the whole document for one NaN (not JSON, but what Python's json.dumps writes
    for a non-finite float). As text, the readers' non-strict casts make "true" null and "NaN" the
    non-finite float it stands for, both of which the checks refuse: the row is rejected with the
    field and its value in the reason, and the file's other rows are kept. Tokens rather than a
    plain replace, so that a string saying "true" or "NaN" is left as written (most logs have none
    of these words at all, and skip the tokenizing)."""
    if not re.search("true|false|NaN|Infinity", document):
        return document
    token = pl.col("token")
    tokens = pl.DataFrame({"token": [document]}).select(token.str.extract_all(JSON_TOKEN).explode())
    return tokens.select(pl.when(token.is_in(BARE_WORDS)).then(pl.format('"{}"', token)).otherwise(token)
                         .str.join()).item()


def _in_file_order(frame: pl.DataFrame, document: str) -> pl.DataFrame:
    """`frame` (what pl.read_json made of `document`) with a top-level object's keys, one column
    each, in the order the file writes them. pl.read_json keeps that order for up to 32 keys and
    scrambles it beyond (differently from one process to the next), while a keyed log's rows are
    numbered in file order (BurstGPT-vLLM: completion order) and must number the same on every
    run. Python's json parser keeps a document's key order; arrays need nothing."""
    if not document.lstrip().startswith("{"):
        return frame
    return frame.select(list(json.loads(document)))
