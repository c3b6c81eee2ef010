"""JSON logs. JSON Lines: one object per line, fields picked out by JSON path in Polars.
Whole JSON documents (LLMPerf arrays, keyed objects): `json_records` loads them in one piece,
with every bare true/false/NaN/Infinity read as text, so that such a value rejects its row
instead of becoming a 1 or failing the whole file (`_bare_words_as_text`).

A line that is not a JSON object is a rejected row ("not a JSON object"), not a failed file:
JSONL files are appended to by running services and a torn last line is common. Blank lines are
skipped, not counted; a UTF-8 BOM is dropped at the start of any line, not only the file's. A field's text is kept for the reason when it is not a usable number.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import polars as pl

from pipelines.formats.common import TraceFormatError, whole_count
from pipelines.formats.rows import field_text
from pipelines.formats.source import first_line, read_lines

# A bare NaN / Infinity / -Infinity as a value: what Python's json.dumps writes for non-finite floats.
NON_FINITE = r"[:\[,]\s*-?(?:NaN|Infinity)\s*[,\]}]"
# A whole JSON document as tokens: a string literal, a bare word, or a run of anything else (outside
# a string, t, f, N and I only start a bare word, and '-' a negative number or -Infinity).
JSON_TOKEN = r'(?s)"(?:[^"\\]|\\.)*"|NaN|-?Infinity|true|false|[^"tfNI-]+|.'
BARE_WORDS = ("true", "false", "NaN", "Infinity", "-Infinity")
# Where such a word may stand as a value (after ':', '[' or ','), looked for only in documents that
# hold one of the words at all (a plain byte search, several times faster over a large file): most
# have none and skip the tokenizing; a string that says ", true" only costs the tokenizing, which
# leaves it as written.
BARE_VALUE = re.compile(r"[:\[,]\s*-?(?:true|false|NaN|Infinity)\b")
UTF8_BOM = b"\xef\xbb\xbf"


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
    # a BOM opening a line inside the file: logs saved with one and joined (`cat a.jsonl b.jsonl`)
    lines = read_lines(plain).with_columns(pl.col("raw").str.strip_prefix(UTF8_BOM.decode()))
    return lines.filter(pl.col("raw").str.strip_chars() != "").with_columns(
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


def number(path: str) -> pl.Expr:
    """The JSON value at `path` as a number; null when absent, null or not a number."""
    return value(path).cast(pl.Float64, strict=False)


def count(path: str) -> pl.Expr:
    """The token count at JSON `path` as Int64 (common.whole_count: null when not whole)."""
    return whole_count(value(path))


def json_records(plain: Path, shown: Path, expected: str, needed: tuple[str, ...], shape: str,
                 records=lambda frame, keys: frame) -> pl.DataFrame:
    """A whole JSON document as one row per record: `records` turns what pl.read_json gives into
    records, given a keyed document's top-level keys in file order (None for an array: its order
    is kept). TraceFormatError naming the file if it is not UTF-8, not `shape`, repeats a key or
    lacks `needed`."""
    data = plain.read_bytes()
    bom = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{shown}: not UTF-8 text (byte {bom + exc.start}); expected {expected}") from None
    if any(word.encode() in data for word in BARE_WORDS[:4]) and BARE_VALUE.search(text):
        source = io.StringIO(_bare_words_as_text(text))
    else:  # as the file is (Polars reads a path fastest), past a BOM
        source = io.BytesIO(data[bom:]) if bom else plain
    try:
        frame = pl.read_json(source, infer_schema_length=None)
        keys = _top_level_keys(text, shown, expected) if text.lstrip().startswith("{") else None
        frame = records(frame, keys)
    except TraceFormatError:
        raise
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise TraceFormatError(f"{shown}: not {shape} ({_why_not_json(text, exc)}); expected {expected}") from None
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
    field and its value in the reason, and the file's other rows are kept (its `raw` text shows
    the value quoted). Tokens rather than a plain replace, so that a string saying "true" or
    "NaN" is left as written. Only for documents BARE_VALUE finds such a value in."""
    token = pl.col("token")
    tokens = pl.DataFrame({"token": [document]}).select(token.str.extract_all(JSON_TOKEN).explode())
    return tokens.select(pl.when(token.is_in(BARE_WORDS)).then(pl.format('"{}"', token)).otherwise(token)
                         .str.join()).item()


def _top_level_keys(document: str, shown: Path, expected: str) -> list[str]:
    """A keyed document's top-level keys in the order the file writes them. pl.read_json keeps
    that order for up to 32 keys and scrambles it beyond (differently from one process to the
    next), while a keyed log's rows are numbered in file order (BurstGPT-vLLM: completion order)
    and must number the same on every run. Python's parser reports each object's keys in order
    (every object becomes the list of its keys: cheap); a key written twice would silently hide
    the entry before it, so it fails the file."""
    keys = json.JSONDecoder(object_pairs_hook=lambda pairs: [key for key, _ in pairs]).decode(document)
    repeated = sorted(key for key, count in Counter(keys).items() if count > 1)
    if repeated:
        raise TraceFormatError(f"{shown}: key(s) {repeated[:5]} appear more than once, and each would "
                               f"hide the entry before it; expected {expected}")
    return keys


def _why_not_json(text: str, exc: Exception) -> str:
    """Where `text` stops being JSON, by line and column of the file as written (Polars counts
    characters of the document after _bare_words_as_text); the first record that is not an
    object (Polars says 'cannot deserialize struct with nulls' for a null element, naming none);
    Polars' own message when the text is JSON and something else failed (a missing field)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as bad:
        return f"{bad.msg} at line {bad.lineno} column {bad.colno}"
    records = (enumerate(document, start=1) if isinstance(document, list)
               else document.items() if isinstance(document, dict) else ())
    for where, record in records:
        if not isinstance(record, dict):
            name = f"element {where}" if isinstance(document, list) else f"entry {where!r}"
            return f"{name} is {json.dumps(record)[:60]}, not an object"
    return str(exc).splitlines()[0][:120]
