"""Reading Azure LLM/LMM inference traces (2023, 2024 and 2025 formats) and rejecting bad rows."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.formats import IngestResult, TraceFormatError, read_azure_csv
from pipelines.formats.common import REJECTED_SCHEMA, REQUESTS_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure"
UTC = dt.timezone.utc


def assert_well_formed(result: IngestResult) -> None:
    assert result.requests.schema == pl.Schema(REQUESTS_SCHEMA)
    assert result.rejected.schema == pl.Schema(REJECTED_SCHEMA)
    assert result.rows_read == result.requests.height + result.rejected.height
    r = result.requests
    if r.height:
        assert r["arrival_s"][0] == 0.0
        assert r["arrival_ts"].is_sorted() and r["arrival_s"].is_sorted()
        assert r["request_id"].n_unique() == r.height
        assert (r["prompt_tokens"] >= 1).all() and (r["output_tokens"] >= 1).all()
        assert (r["cached_tokens"] == 0).all()
    row = result.file_row()
    assert (row["rows_read"], row["rows_accepted"], row["rows_rejected"]) == (
        result.rows_read, result.requests.height, result.rejected.height)
    assert row["format"] == "azure-llm" and len(row["sha256"]) == 64


# ---- the real 2023 samples ------------------------------------------------------------------------

def test_code_sample_2023():
    result = read_azure_csv(SAMPLES / "AzureLLMInferenceTrace_code.csv")
    assert_well_formed(result)
    assert result.rows_read == 8819 and result.requests.height == 8819 and result.rejected.height == 0
    r = result.requests
    assert r.schema["arrival_ts"] == pl.Datetime("us", "UTC")
    assert r["arrival_ts"][0] == dt.datetime(2023, 11, 16, 18, 17, 3, 979960, tzinfo=UTC)
    assert r["arrival_ts"][-1] == dt.datetime(2023, 11, 16, 19, 14, 19, 928016, tzinfo=UTC)
    assert r["arrival_s"][-1] == pytest.approx(3435.948056, abs=1e-6)
    first = r.head(3).select("request_id", "trace", "prompt_tokens", "output_tokens")
    assert_frame_equal(first, pl.DataFrame({
        "request_id": [f"AzureLLMInferenceTrace_code:{line}" for line in (2, 3, 4)],
        "trace": ["AzureLLMInferenceTrace_code"] * 3,
        "prompt_tokens": [4808, 3180, 110],
        "output_tokens": [10, 8, 27],
    }))
    assert r["prompt_tokens"].min() == 3 and r["prompt_tokens"].max() == 7437
    assert r["output_tokens"].min() == 6 and r["output_tokens"].max() == 1899


def test_conv_sample_2023():
    result = read_azure_csv(SAMPLES / "AzureLLMInferenceTrace_conv.csv")
    assert_well_formed(result)
    assert result.rows_read == 19366 and result.requests.height == 19366
    assert result.rejected.height == 0
    r = result.requests
    assert r["prompt_tokens"].max() == 14050 and r["output_tokens"].max() == 1000
    assert r["arrival_s"][-1] == pytest.approx(3501.722, abs=1e-3)


def test_reading_is_deterministic():
    a = read_azure_csv(SAMPLES / "AzureLLMInferenceTrace_code.csv")
    b = read_azure_csv(str(SAMPLES / "AzureLLMInferenceTrace_code.csv"))
    assert a.sha256 == b.sha256
    assert_frame_equal(a.requests, b.requests)


# ---- the 2024 and 2025 formats (notebook excerpts) ------------------------------------------------

@pytest.mark.parametrize(
    ("name", "first_ts", "last_ts", "first_tokens"),
    [
        ("AzureLLMInferenceTrace_code_1week.notebook_excerpt.csv",
         dt.datetime(2024, 5, 10, 0, 0, 0, 9930, tzinfo=UTC),
         dt.datetime(2024, 5, 16, 23, 59, 59, 929501, tzinfo=UTC), (2162, 5)),
        ("AzureLLMInferenceTrace_conv_1week.notebook_excerpt.csv",
         dt.datetime(2024, 5, 12, 0, 0, 0, 1163, tzinfo=UTC),
         dt.datetime(2024, 5, 18, 23, 59, 59, 995460, tzinfo=UTC), (1452, 3)),
        ("AzureLMMInferenceTrace_multimodal.notebook_excerpt.csv",
         dt.datetime(2024, 10, 15, 12, 0, 0, 269000, tzinfo=UTC),
         dt.datetime(2024, 10, 22, 11, 59, 59, 964000, tzinfo=UTC), (770, 491)),
    ],
)
def test_later_azure_formats(name, first_ts, last_ts, first_tokens):
    result = read_azure_csv(FIXTURES / name)
    assert_well_formed(result)
    assert result.rows_read == 10 and result.requests.height == 10 and result.rejected.height == 0
    r = result.requests
    assert r["arrival_ts"][0] == first_ts and r["arrival_ts"][-1] == last_ts
    assert r["arrival_s"][-1] == pytest.approx((last_ts - first_ts).total_seconds(), abs=1e-6)
    assert (r["prompt_tokens"][0], r["output_tokens"][0]) == first_tokens
    assert r["trace"][0] == name.removesuffix(".csv")


def test_multimodal_columns_are_mapped_by_name():
    """2025 puts NumImages second: the token columns must not be read from the wrong place."""
    r = read_azure_csv(FIXTURES / "AzureLMMInferenceTrace_multimodal.notebook_excerpt.csv").requests
    assert r["prompt_tokens"].to_list()[5:] == [4564, 1133, 664, 1172, 841]
    assert r["output_tokens"].to_list()[5:] == [137, 64, 326, 76, 63]


def test_2024_whole_second_timestamps_without_fraction(tmp_path):
    path = tmp_path / "mixed_precision.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2024-05-12 00:00:00+00:00,10,2\n"
                    "2024-05-12 00:00:00.001163+00:00,20,3\n")
    result = read_azure_csv(path)
    assert result.rejected.height == 0
    assert result.requests["arrival_s"].to_list() == [0.0, 0.001163]


def test_every_spelling_of_utc_is_utc_and_other_offsets_are_refused(tmp_path):
    """A log given Azure's column names to be recognised, its timestamps exported by DuckDB or
    PostgreSQL in a UTC session ("+00"), or written "+0000", had every row rejected as "not a UTC
    date-time"; an offset other than UTC is still refused (the format's clock is UTC), never
    shifted."""
    path = tmp_path / "exported.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2024-05-12 00:00:00.5+00,10,2\n"
                    "2024-05-12 00:00:01+0000,20,3\n"
                    "2024-05-12T00:00:02.25-00:00,30,4\n"
                    "2024-05-12 02:00:03+02,40,5\n")
    result = read_azure_csv(path)
    assert result.requests.select("prompt_tokens", "arrival_s").rows() == [(10, 0.0), (20, 0.5), (30, 1.75)]
    assert result.rejected.select("line", "reason").rows() == [
        (5, "TIMESTAMP is not a UTC date-time: '2024-05-12 02:00:03+02'")]


# ---- bad rows --------------------------------------------------------------------------------------

GOOD_AND_BAD = [
    # (line content, reason fragment or None for a good row)
    ("2023-11-16 18:17:03.9799600,4808,10", None),
    ("2023-11-16 18:17:04.0319600,3180", "expected 3 comma-separated fields, got 2"),
    ("2023-11-16 18:17:04.5000000,10,10,7", "expected 3 comma-separated fields, got 4"),
    ("yesterday at noon,10,10", "TIMESTAMP is not a UTC date-time: 'yesterday at noon'"),
    ("2023-13-45 25:61:00.0000000,10,10", "TIMESTAMP is not a UTC date-time"),
    ("2023-11-16 18:17:05.0000000,abc,10", "ContextTokens is not a whole number in range: 'abc'"),
    ("2023-11-16 18:17:05.5000000,10,12.5", "GeneratedTokens is not a whole number in range: '12.5'"),
    ("2023-11-16 18:17:06.0000000,0,10", "ContextTokens is 0: a request needs at least one prompt token"),
    ("2023-11-16 18:17:07.0000000,10,-3", "GeneratedTokens is -3: a token count cannot be negative"),
    ("2023-11-16 18:17:08.0000000,20000000,10", "ContextTokens is 20000000: beyond 10000000 tokens"),
    ("2023-11-16 18:17:09.0000000,10,20000000", "GeneratedTokens is 20000000: beyond"),
    ("2023-11-16 18:17:02.0000000,7,8", None),   # earlier than the first row: sorted to the front
    ("2023-11-16 18:17:10.0000000,9999999,1", None),
]


def _write(path: Path, lines: list[str]) -> Path:
    """CRLF endings and no final newline, like the real files."""
    path.write_bytes("\r\n".join(["TIMESTAMP,ContextTokens,GeneratedTokens", *lines]).encode())
    return path


def test_the_reasons_the_readme_quotes_are_the_readers(tmp_path):
    """README ("Bad input") quotes rejection reasons of token counts; each is, word for word, what
    reading a row with that count says."""
    quoted = re.findall(r"`((ContextTokens|GeneratedTokens) is (-?\d+): [^`]*)`", (ROOT / "README.md").read_text())
    assert quoted
    for reason, column, value in quoted:
        tokens = {"ContextTokens": "10", "GeneratedTokens": "10", column: value}
        path = _write(tmp_path / f"{column}.csv",
                      [f"2023-11-16 18:17:06.0000000,{tokens['ContextTokens']},{tokens['GeneratedTokens']}"])
        assert read_azure_csv(path).rejected["reason"].to_list() == [reason]


def test_bad_rows_are_rejected_with_line_text_and_reason(tmp_path):
    path = _write(tmp_path / "mixed.csv", [line for line, _ in GOOD_AND_BAD])
    result = read_azure_csv(path)
    assert_well_formed(result)
    assert result.rows_read == len(GOOD_AND_BAD)
    bad = [(i + 2, line, reason) for i, (line, reason) in enumerate(GOOD_AND_BAD) if reason]
    rejected = result.rejected.sort("line")
    assert rejected["line"].to_list() == [line_no for line_no, _, _ in bad]
    assert rejected["raw"].to_list() == [raw for _, raw, _ in bad]
    assert (rejected["source_file"] == str(path)).all()
    for got, (_, _, reason) in zip(rejected["reason"], bad):
        assert reason in got
    accepted = result.requests
    assert accepted["request_id"].to_list() == ["mixed:13", "mixed:2", "mixed:14"]
    assert accepted["arrival_s"].to_list() == pytest.approx([0.0, 1.97996, 8.0])
    assert accepted["prompt_tokens"].to_list() == [7, 4808, 9999999]
    assert "\r" not in "".join(rejected["raw"].to_list())


def test_lf_endings_final_newline_and_blank_lines(tmp_path):
    crlf = read_azure_csv(_write(tmp_path / "t.csv", [line for line, _ in GOOD_AND_BAD]))
    lf = tmp_path / "lf" / "t.csv"
    lf.parent.mkdir()
    lf.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                  + "\n".join(line for line, _ in GOOD_AND_BAD) + "\n\n")
    result = read_azure_csv(lf)
    assert_frame_equal(result.requests, crlf.requests)
    assert_frame_equal(result.rejected.drop("source_file"), crlf.rejected.drop("source_file"))
    assert result.rows_read == crlf.rows_read


def test_whitespace_around_fields_is_tolerated(tmp_path):
    path = _write(tmp_path / "spaces.csv", [" 2023-11-16 18:17:03.9799600 , 48 , 10 "])
    result = read_azure_csv(path)
    assert result.rejected.height == 0
    assert result.requests.select("prompt_tokens", "output_tokens").row(0) == (48, 10)


def test_only_bad_rows(tmp_path):
    path = _write(tmp_path / "allbad.csv", ["x,1,1", "2023-11-16 18:17:06.0000000,0,0"])
    result = read_azure_csv(path)
    assert result.rows_read == 2 and result.requests.height == 0 and result.rejected.height == 2
    assert result.requests.schema == pl.Schema(REQUESTS_SCHEMA)


def test_header_only_file(tmp_path):
    """A log with no traffic yet is a valid, empty trace."""
    path = tmp_path / "header_only.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
    result = read_azure_csv(path)
    assert result.rows_read == 0 and result.requests.height == 0 and result.rejected.height == 0
    assert result.requests.schema == pl.Schema(REQUESTS_SCHEMA)


def test_utf8_bom_is_accepted(tmp_path):
    """Spreadsheet exports start with a byte-order mark; it is not part of the header."""
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                     b"2023-11-16 18:17:03.9799600,48,10")
    result = read_azure_csv(path)
    assert result.requests.height == 1 and result.rejected.height == 0


def test_control_characters_inside_a_row_do_not_split_it(tmp_path):
    path = tmp_path / "ff.csv"
    path.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                     b"2023-11-16 18:17:03.9799600,48\x0c10,10\r\n"
                     b"2023-11-16 18:17:04.0000000,x,1\r\n"
                     b"2023-11-16 18:17:05.0000000,5,1")
    result = read_azure_csv(path)
    assert result.rows_read == 3
    rejected = result.rejected.sort("line")
    assert rejected["line"].to_list() == [2, 3]
    assert rejected["raw"][0] == "2023-11-16 18:17:03.9799600,48\x0c10,10"
    assert result.requests["request_id"].to_list() == ["ff:4"]


# ---- files that are not Azure traces ----------------------------------------------------------

@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("empty.csv", b""),
        ("binary.csv", bytes(range(256)) * 4),
        ("png.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"),
        ("burstgpt.csv", b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                         b"5,ChatGPT,472,18,490,Conversation log\n"),
        ("no_header.csv", b"2023-11-16 18:17:03.9799600,4808,10\r\n"),
    ],
)
def test_not_an_azure_trace(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceFormatError) as info:
        read_azure_csv(path)
    assert str(path) in str(info.value)
    assert "TIMESTAMP,ContextTokens,GeneratedTokens" in str(info.value)


def test_trace_names_keep_dates_and_drop_format_suffixes():
    from pipelines.formats.common import trace_name

    assert trace_name(Path("conv.2024-01-01.csv")) == "conv.2024-01-01"
    assert trace_name(Path("conv.2024-01-02.csv.gz")) == "conv.2024-01-02"
    assert trace_name(Path("AzureLLMInferenceTrace_code.csv")) == "AzureLLMInferenceTrace_code"
