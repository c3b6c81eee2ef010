"""Any CSV, Parquet or JSONL log, with a user-given column mapping and time unit.

    read_trace(path, format="csv" | "parquet" | "jsonl",
               columns={"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out",
                        # optional: "cached_tokens", "model", "tenant",
                        #           "observed_ttft_s", "observed_e2e_s"
                        },
               time_unit="s", latency_unit="s")

time_unit is the arrival column's unit, never guessed: "s", "ms", "us", "ns" for a relative
clock (give start_time= for wall-clock arrivals), "unix_s" / "unix_ms" for Unix epoch numbers,
or "datetime" for ISO 8601 text (YYYY-MM-DD, optionally a time hh:mm[:ss[.fraction]] after "T" or
a space, the fraction after "." or ",", optionally "Z" or an offset ±hh:mm / ±hhmm / ±hh: converted
to UTC; no zone = UTC), parsed
with one explicit pattern, never inferred from the first row: other text is a rejected row. A
Parquet datetime column is used as it is (a zone-aware one converted to UTC, a naive one = UTC).
latency_unit is the unit of the observed_ttft_s / observed_e2e_s columns: "s" (the default), "ms",
"us" or "ns"; a log that records TTFT in milliseconds read as seconds would calibrate as a
server a thousand times slower, every factor at its bound. JSONL mappings may use dotted paths ("usage.prompt_tokens"); one column may feed two targets
(observed_ttft_s and observed_e2e_s both "latency" when the log only has one). CSV lines are
split on commas without quoting (csvlog.py). An optional column a row leaves empty or null
is none there: 0 cached tokens (common.known_count), a null name or latency. A Parquet row's
`line` is its 1-based row number and its `raw` text the row as JSON.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import polars as pl

from pipelines.formats.common import IngestResult, Policies, TraceFormatError, is_one_of, known_count, whole_count
from pipelines.formats.csvlog import header_and_rows, split_fields
from pipelines.formats.jsonlog import object_rows
from pipelines.formats.rows import Labels, field_text, finish
from pipelines.formats.units import PER_SECOND, per_second

REQUIRED = ("arrival", "prompt_tokens", "output_tokens")
OPTIONAL = ("cached_tokens", "model", "tenant", "observed_ttft_s", "observed_e2e_s")
TEXT = {"arrival": "arrival_text", "prompt_tokens": "prompt_text", "output_tokens": "output_text",
        "cached_tokens": "cached_text", "model": "model", "tenant": "tenant",
        "observed_ttft_s": "ttft_text", "observed_e2e_s": "e2e_text"}
CLOCKS = {"unix_s": "a number of Unix seconds", "unix_ms": "a number of Unix milliseconds",
          "datetime": "an ISO 8601 date-time"}
ABSOLUTE = tuple(CLOCKS)
# A fraction after "." or "," (ISO 8601's decimal sign; Python logging's asctime writes
# "00:00:00,123"), an offset of hours and minutes or of whole hours ("+02": DuckDB's and
# PostgreSQL's text of a TIMESTAMPTZ, their CSV exports included).
ISO_8601 = (r"^(?P<date>\d{4}-\d{2}-\d{2})(?:[T ](?P<hm>\d{2}:\d{2})(?P<s>:\d{2}(?:[.,]\d{1,9})?)?)?"
            r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?$")


def check_mapping(columns: dict | None, time_unit: str | None, fmt: str) -> dict:
    if not isinstance(columns, dict) or any(key not in columns for key in REQUIRED):
        raise ValueError(f"format={fmt!r} needs columns= mapping at least {list(REQUIRED)} to the "
                         f"file's column names (optional: {list(OPTIONAL)})" + _mapping_slips(columns))
    unknown = set(columns) - set(REQUIRED) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"columns=: unknown key(s) {sorted(unknown, key=str)}; "
                         f"expected {list(REQUIRED + OPTIONAL)}")
    for key, name in columns.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"columns=: {key!r} is mapped to {name!r}; expected the name of one of the file's "
                             f"columns (text)")
    if time_unit not in (*PER_SECOND, *ABSOLUTE):
        raise ValueError(f"format={fmt!r} needs time_unit= one of {[*PER_SECOND, *ABSOLUTE]} "
                         f"for the arrival column (got {time_unit!r})")
    return columns


def _mapping_slips(columns) -> str:
    """What a mapping that lacks a required key has wrong, for the message: the keys it lacks,
    and each key that is no field with the field it is closest to. A misspelt "arival" was told
    only the whole list of keys, as if the mapping were missing altogether."""
    if not isinstance(columns, dict):
        return ""
    lacks = ", ".join(repr(key) for key in REQUIRED if key not in columns)
    slips = []
    for key in sorted((key for key in columns if key not in REQUIRED + OPTIONAL), key=str):
        close = difflib.get_close_matches(str(key), REQUIRED + OPTIONAL, n=1)
        slips.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"; it lacks {lacks}" + (f" and has {', '.join(slips)}, not a field" if slips else "")


def _json_path(name: str) -> str:
    """A JSONL mapping's field name as a JSON path: each dotted part a key of the object before
    it ("usage.prompt_tokens"), written in brackets, so that a key with a space, a dash or a
    quote is one key: a pandas export's "Request tokens" in `$.Request tokens` matched nothing,
    and every row was rejected as missing the field it held."""
    return "$" + "".join(f"[{json.dumps(part)}]" for part in name.split("."))


def _iso_8601(text: pl.Expr) -> pl.Expr:
    """ISO 8601 text -> UTC datetime; null when it is not ISO 8601. Each row is brought to one
    full form and parsed with one format, so no row decides how the others are read."""
    part = text.str.strip_chars().str.extract_groups(ISO_8601).struct.field
    zone = (part("zone").str.replace(r"^[Zz]$", "+00:00").str.replace(r"^([+-]\d{2})$", "${1}:00")
            .fill_null("+00:00"))
    seconds = part("s").str.replace(",", ".", literal=True).fill_null(":00")
    full = pl.concat_str(part("date"), pl.lit("T"), part("hm").fill_null("00:00"), seconds, zone)
    return full.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%#z", strict=False, time_unit="us")


def _utc(column: str, dtype: pl.Datetime) -> pl.Expr:
    """A Parquet datetime column in UTC: a zone-aware one converted, a naive one taken as UTC."""
    value = pl.col(column)
    utc = value.dt.convert_time_zone("UTC") if dtype.time_zone else value.dt.replace_time_zone("UTC")
    return utc.dt.cast_time_unit("us")


def _row_json(table: pl.DataFrame) -> pl.Expr:
    """A Parquet row as the JSON text `raw` keeps of it. JSON has no NaN or infinity and
    json_encode writes them null, so a float column holding one is written as text ("NaN",
    "inf"): a row with a NaN latency read as one with none, its reason quoting a NaN its raw
    text did not show, and two rows differing only so were exact duplicates (the later one,
    valid, rejected as such under duplicates='reject')."""
    non_finite = {name for name, dtype in table.schema.items()
                  if dtype.is_float() and not table[name].is_finite().fill_null(True).all()}
    return pl.struct(pl.col(name).cast(pl.String) if name in non_finite else pl.col(name)
                     for name in table.columns).struct.json_encode()


def _arrival(time_unit: str) -> pl.Expr:
    value = pl.col("arrival_text")
    if time_unit == "datetime":
        return _iso_8601(value)
    if time_unit in ("unix_s", "unix_ms"):
        us = (value.cast(pl.Float64, strict=False) * (1e6 if time_unit == "unix_s" else 1e3)).round()
        return pl.when(us.abs() < 2**62).then(us).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    return value.cast(pl.Float64, strict=False) / per_second(time_unit)


def _typed(frame: pl.DataFrame, columns: dict, time_unit: str, latency_unit: str) -> pl.DataFrame:
    counts = ("prompt_tokens", "output_tokens")
    latencies = ("observed_ttft_s", "observed_e2e_s")
    parsed = "arrival" in frame.collect_schema().names()   # a Parquet datetime column, used as it is
    return frame.with_columns(
        **({} if parsed else {"arrival": _arrival(time_unit)}),
        **{name: whole_count(pl.col(TEXT[name])) for name in counts},
        **({"cached_tokens": known_count(pl.col(TEXT["cached_tokens"]))} if "cached_tokens" in columns else {}),
        **{name: pl.col(TEXT[name]).cast(pl.Float64, strict=False) / per_second(latency_unit)
           for name in latencies if name in columns},
    )


def read(plain: Path, shown: Path, sha256: str, policies: Policies, *, fmt: str, columns=None,
         time_unit=None, start_time=None, latency_unit="s") -> IngestResult:
    columns = check_mapping(columns, time_unit, fmt)
    if not is_one_of(latency_unit, PER_SECOND):
        raise ValueError(f"latency_unit={latency_unit!r}: expected one of {list(PER_SECOND)}, the"
                         f" unit of the observed_ttft_s / observed_e2e_s columns")
    expected = f"a {fmt} file with the mapped columns {sorted(set(columns.values()))}"
    if fmt == "csv":
        header, rows, written = header_and_rows(plain, shown, expected)
        missing = sorted({c for c in columns.values() if c.lower() not in header})
        if missing:
            raise TraceFormatError(f"{shown}: no column(s) {missing} in header {written!r}; expected {expected}")
        # One text per source column, then one copy per target: a column may feed two targets.
        sources = {src.lower() for src in columns.values()}
        frame = split_fields(rows, header, {src: f"source:{src}" for src in sources}).with_columns(
            **{TEXT[key]: pl.col(f"source:{src.lower()}") for key, src in columns.items()})
    elif fmt == "jsonl":
        frame = object_rows(plain, shown, expected).with_columns(
            **{TEXT[key]: pl.col("raw").str.json_path_match(_json_path(src)) for key, src in columns.items()})
    else:
        try:
            table = pl.read_parquet(plain)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise TraceFormatError(f"{shown}: not a readable Parquet file ({str(exc).splitlines()[0][:120]}); "
                                   f"expected {expected}") from None
        missing = sorted(set(columns.values()) - set(table.columns))
        if missing:
            raise TraceFormatError(f"{shown}: no column(s) {missing}; expected {expected}")
        # a column of lists (token ids) or structs holds no count, time or name to check per row
        for name in sorted(set(columns.values())):
            if table.schema[name].is_nested():
                raise TraceFormatError(f"{shown}: column {name!r} is {table.schema[name]}, not one value per row;"
                                       f" expected {expected}")
        dtype = table.schema[columns["arrival"]]
        direct = time_unit == "datetime" and isinstance(dtype, pl.Datetime)
        frame = table.select(
            line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64),
            raw=_row_json(table),
            bad=pl.lit(None, pl.String),
            **{TEXT[key]: pl.col(src).cast(pl.String) for key, src in columns.items()},
            **({"arrival": _utc(columns["arrival"], dtype)} if direct else {}),
        ).lazy()
    frame = frame.with_columns(field_text(pl.col(name)) for name in ("arrival_text", "prompt_text", "output_text"))
    labels = Labels(columns["arrival"], columns["prompt_tokens"], columns["output_tokens"],
                    cached=columns.get("cached_tokens", "cached tokens"),
                    ttft=columns.get("observed_ttft_s", "observed_ttft_s"),
                    e2e=columns.get("observed_e2e_s", "observed_e2e_s"),
                    clock=CLOCKS.get(time_unit, f"a number of {time_unit}"),
                    unit=time_unit if time_unit in PER_SECOND else "s", latency_unit=latency_unit,
                    unix_clock="a Unix time is read with time_unit='unix_s' or 'unix_ms'")
    return finish(_typed(frame, columns, time_unit, latency_unit), path=shown, fmt=fmt, sha256=sha256, labels=labels,
                  policies=policies, start_time=start_time)
