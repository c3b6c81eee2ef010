"""A corpus of deliberately broken inputs: each must either ingest with every row accounted for
(read = accepted + rejected, reasons a person understands) or fail alone with one message that
names the file."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import warnings
from pathlib import Path

import polars as pl
import pytest
import zstandard

from pipelines.formats import TraceFormatError, read_trace
from pipelines.formats.common import Policies
from pipelines.formats.csvlog import split_fields
from pipelines.formats.rows import UNQUOTABLE, Labels, _days, _outlier_check, finish
from pipelines.formats.sidecar import file_options
from pipelines.formats.source import invalid_utf8_at
from pipelines.formats.units import per_second

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


# ---- files that are not traces: one clear error naming the file ---------------------------------

NOT_TRACES = [
    ("empty.csv", b"", None, "the file is empty"),
    ("blank.csv", b"\r\n\n  \n", None, "the file is empty"),
    ("garbage.csv", bytes(range(256)) * 64, None, "binary data"),
    ("latin1.csv", f"{HEADER}\n2023-11-16 18:17:03.9799600,4,5 caf\xe9\n".encode("latin-1"), "azure-llm", "not"),
    ("random.bin", b"\x13\x37" * 10_000, None, "cannot tell the log format"),
    ("azure_as_mooncake.csv", f"{HEADER}\n2023-11-16 18:17:03.9799600,4,5\n", "mooncake", "is not a JSON object"),
    ("mooncake_as_azure.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n', "azure-llm",
     "TIMESTAMP,ContextTokens,GeneratedTokens"),
    ("csv_as_llmperf.json", f"{HEADER}\n2023-11-16 18:17:03.9799600,4,5\n", "llmperf", "not a JSON array"),
    ("truncated_array.json", '[{"number_input_tokens": 5, "number_output_tokens": 1, "end_to_end_latency_s": 1.0},',
     None, "not a JSON array"),
    # an element that is not an object failed the file with Polars' words ("cannot deserialize
    # struct with nulls into a DataFrame"), naming neither the element nor what it is
    ("null_element.json", '[{"number_input_tokens": 5, "number_output_tokens": 1, "end_to_end_latency_s": 1.0},'
     ' null]', None, "not a JSON array of objects (element 2 is null, not an object)"),
    ("list_element.json", '[{"number_input_tokens": 5, "number_output_tokens": 1, "end_to_end_latency_s": 1.0},'
     ' {"number_input_tokens": 6, "number_output_tokens": 1, "end_to_end_latency_s": 1.0}, [1, 2]]', None,
     "not a JSON array of objects (element 3 is [1, 2], not an object)"),
    ("no_header.csv", "2023-11-16 18:17:03.9799600,4808,10\r\n", None, "cannot tell the log format"),
    ("no_generated.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.9799600,4808\n", None,
     "'TIMESTAMP,ContextTokens' (it has the other columns of an Azure LLM trace but lacks GeneratedTokens);"),
    ("renamed_response.csv", "Timestamp,Model,Request tokens,Answer tokens\n5,ChatGPT,472,18\n", None,
     "(it has the other columns of a BurstGPT log but lacks Response tokens);"),
    ("semicolons.csv", f"{HEADER.replace(',', ';')}\n2023-11-16 18:17:03.9799600;4808;10\n", None,
     "(no comma in it: a CSV log is comma-separated, not by tabs or semicolons);"),
    ("generic.csv", "timestamp,prompt,output\n0,4808,10\n", None, "first line 'timestamp,prompt,output'; expected"),
    # a Vidur trace with its arrival column renamed was called a token-length distribution
    ("vidur_renamed_arrival.csv", "arrival_at,num_prefill_tokens,num_decode_tokens\n0.0,4808,10\n", None,
     "arrived_at,num_prefill_tokens,num_decode_tokens (it lacks arrived_at)"),
    # a classic-Mac export ends lines with a bare CR: the whole file read as one line
    ("mac_endings.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\r0.0,4808,10\r1.0,5,5\r", None,
     "its lines end in a bare carriage return (CR, as a classic-Mac \"CSV (Macintosh)\" export writes);"
     " expected LF or CRLF line endings"),
    ("mac_endings.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\r'
     '{"timestamp": 5, "input_length": 5, "output_length": 1}\r', None, "(line 1 is 2 lines joined by bare CRs)"),
    ("vidur_length_stats.csv", "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n74,918,992,0.08\n",
     None, "(this is a token-length distribution with no arrival times, not a request log)"),
    # Windows PowerShell's `>` and Excel's "Unicode Text" write UTF-16: it was "binary data, not
    # a text log", which sends the user looking for a corrupt file instead of re-saving one
    ("utf16.csv", f"{HEADER}\r\n2023-11-16 18:17:03.9799600,4808,10\r\n".encode("utf-16"), None,
     "UTF-16 text (byte-order mark FF FE), not UTF-8; expected "),
    ("utf16be.csv", b"\xfe\xff" + f"{HEADER}\n2023-11-16 18:17:03.9799600,4808,10\n".encode("utf-16-be"), "azure-llm",
     "UTF-16 text (byte-order mark FE FF), not UTF-8; expected "),
    # a Windows-1252 dash in the first 64 KiB was "not UTF-8 text (byte 79)": no line to look at
    ("cp1252.csv", f"{HEADER}\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0,5,5 \u2013\n".encode("cp1252"),
     None, "not UTF-8 text (byte 102, line 3); expected "),
]


@pytest.mark.parametrize(("name", "content", "fmt", "message"), NOT_TRACES, ids=[n[0] for n in NOT_TRACES])
def test_not_a_trace(tmp_path, name, content, fmt, message):
    path = write(tmp_path / name, content)
    with pytest.raises(TraceFormatError) as info:
        read_trace(path, format=fmt)
    text = str(info.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_a_long_bare_cr_log_is_not_given_the_count_of_its_first_64_kib_as_its_lines(tmp_path):
    """A bare-CR log is read 64 KiB at a time for its first line: a 20,001-line Azure CSV was
    'line 1 is 1882 lines joined by bare CRs', the count of the head alone, said as the file's."""
    rows = "".join(f"2023-11-16 18:15:{i % 60:02d}.0000000,{i % 900 + 1},10\r" for i in range(20_000))
    path = write(tmp_path / "mac.csv", f"{HEADER}\r{rows}")
    with pytest.raises(TraceFormatError, match=r"\(line 1 is more than 1,8\d\d lines joined by bare CRs"
                                               r" in its first 64 KiB\)$"):
        read_trace(path)


def test_truncated_gzip_and_corrupt_zstd(tmp_path):
    body = f"{HEADER}\n" + "".join(f"2023-11-16 18:17:{i:02d}.0000000,{i + 1},2\n" for i in range(50))
    packed = gzip.compress(body.encode())
    path = write(tmp_path / "cut.csv.gz", packed[: len(packed) // 2])
    with pytest.raises(TraceFormatError, match=r"cut\.csv\.gz: the gzip stream is truncated or corrupt"):
        read_trace(path)
    zpacked = zstandard.ZstdCompressor().compress(body.encode())
    path = write(tmp_path / "cut.csv.zst", zpacked[: len(zpacked) // 2])
    with pytest.raises(TraceFormatError, match=r"cut\.csv\.zst: the zstd stream is truncated or corrupt"):
        read_trace(path)


def test_a_zstd_log_cut_after_its_first_blocks_fails_and_two_frames_read_whole(tmp_path):
    """zstandard's stream reader stops quietly where a frame is cut: a long log cut half-way
    read as its first half (rows after the cut vanished, uncounted). It fails, naming the file;
    a file of two frames one after the other (`zstd -c a b > ab`) still reads whole."""
    rows = [f"2023-11-16 18:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:02d}00000,{i % 997 + 1},"
            f"{i % 89 + 1}\n" for i in range(60_000)]
    body = (f"{HEADER}\n" + "".join(rows)).encode()
    packed = zstandard.ZstdCompressor().compress(body)
    path = write(tmp_path / "cut.csv.zst", packed[: len(packed) // 2])
    with pytest.raises(TraceFormatError, match=r"cut\.csv\.zst: the zstd stream is truncated or corrupt"):
        read_trace(path)
    half = len(body) // 2 + body[len(body) // 2:].index(b"\n") + 1
    two = zstandard.ZstdCompressor().compress(body[:half]) + zstandard.ZstdCompressor().compress(body[half:])
    assert read_trace(write(tmp_path / "two.csv.zst", two)).rows_read == 60_000


@pytest.mark.parametrize("compress", [gzip.compress, zstandard.ZstdCompressor().compress], ids=["gz", "zst"])
@pytest.mark.parametrize(("name", "body", "rows"), [
    ("azure.csv", f"{HEADER}\r\n2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,8", 2),
    ("mooncake.jsonl", '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}\n', 1),
    ("burst.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,API log\n", 1),
    ("vidur.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,4808,10\n", 1),
    ("llmperf.json", '[{"number_input_tokens": 5, "number_output_tokens": 2, "end_to_end_latency_s": 1.0,'
                     ' "ttft_s": 0.1, "error_code": null, "error_msg": ""}]', 1),
    ("aibrix.jsonl", '{"prompt_tokens": 5, "output_tokens": 2, "latency": 1.0, "start_time": 7.5, "ttft": 0.1}\n', 1),
    ("usage.jsonl", '{"created": 1700000000, "model": "m", "user": "u", "usage": {"prompt_tokens": 9,'
                    ' "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}}\n', 1),
])
def test_every_format_reads_compressed(tmp_path, compress, name, body, rows):
    plain = read_trace(write(tmp_path / name, body))
    packed = read_trace(write(tmp_path / f"{name}.{'gz' if compress is gzip.compress else 'zst'}",
                              compress(body.encode())))
    assert packed.format == plain.format and packed.requests.height == rows
    assert packed.requests.drop("request_id", "trace").equals(plain.requests.drop("request_id", "trace"))


# ---- traces with bad rows: every row accounted for ------------------------------------------------

def azure(tmp_path, name, lines, *, newline="\r\n", prefix=b""):
    return write(tmp_path / name, prefix + newline.join([HEADER, *lines]).encode())


def test_header_only(tmp_path):
    for fmt_file, text in [("h.csv", HEADER + "\r\n"),
                           ("b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type")]:
        result = read_trace(write(tmp_path / fmt_file, text))
        assert (result.rows_read, result.requests.height, result.rejected.height) == (0, 0, 0)


def test_bom_and_mixed_line_endings(tmp_path):
    path = write(tmp_path / "mixed.csv", b"\xef\xbb\xbf" + HEADER.encode() + b"\r\n"
                 b"2023-11-16 18:17:03.9799600,48,10\n"
                 b"2023-11-16 18:17:04.9799600,49,11\r\n"
                 b"\r\n"
                 b"2023-11-16 18:17:05.9799600,50,12")
    result = read_trace(path)
    assert result.rows_read == 3 and result.rejected.height == 0
    assert result.requests["request_id"].to_list() == ["mixed:2", "mixed:3", "mixed:5"]
    assert result.requests["output_tokens"].to_list() == [10, 11, 12]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["no-bom", "bom"])
def test_a_character_cut_at_the_64_kib_edge_is_not_an_encoding_error(tmp_path, bom):
    """The format check reads the first 64 KiB, which may end inside a two-byte character."""
    prefix = bom + f"{HEADER}\n2023-11-16 18:17:03.0000000,4,5\n2023-11-16 18:17:04.0000000,4,".encode()
    content = prefix + b"x" * (65_535 - len(prefix)) + "é\n".encode()   # 'é' is bytes 65,535 and 65,536
    result = read_trace(write(tmp_path / "edge.csv", content))
    assert (result.rows_read, result.rows.height, result.rejected.height) == (2, 1, 1)


def test_huge_integers_nan_and_inf(tmp_path):
    path = azure(tmp_path, "huge.csv", [
        "2023-11-16 18:17:03.0000000,99999999999999999999999,10",
        "2023-11-16 18:17:04.0000000,10,1e400",
        "2023-11-16 18:17:05.0000000,NaN,10",
        "2023-11-16 18:17:06.0000000,10,inf",
        "2023-11-16 18:17:07.0000000,10,10",
    ])
    result = read_trace(path)
    assert result.rows_read == 5 and result.requests.height == 1
    assert result.rejected.sort("line")["reason"].to_list() == [
        "ContextTokens is not a whole number in range: '99999999999999999999999'",
        "GeneratedTokens is not a whole number in range: '1e400'",
        "ContextTokens is not a whole number in range: 'NaN'",
        "GeneratedTokens is not a whole number in range: 'inf'",
    ]
    relative = write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                     "nan,5,5\ninf,5,5\n-1,5,5\n1e400,5,5\n0.5,5,5\n")
    result = read_trace(relative)
    assert result.requests.height == 1 and result.rejected.height == 4
    assert result.rejected.sort("line")["reason"].to_list() == [
        "arrived_at is not a number of seconds: 'nan'", "arrived_at is not a number of seconds: 'inf'",
        "arrived_at is '-1': negative, before the zero a relative clock counts up from",
        "arrived_at is not a number of seconds: '1e400'"]


def test_unsorted_and_tied_timestamps_keep_file_order_on_ties(tmp_path):
    path = azure(tmp_path, "ties.csv", [
        "2023-11-16 18:17:05.0000000,1,1",
        "2023-11-16 18:17:03.0000000,2,1",
        "2023-11-16 18:17:05.0000000,3,1",
        "2023-11-16 18:17:03.0000000,4,1",
    ])
    r = read_trace(path).requests
    assert r["prompt_tokens"].to_list() == [2, 4, 1, 3]
    assert r["arrival_s"].to_list() == [0.0, 0.0, 2.0, 2.0]


def test_azure_quirks_in_one_file(tmp_path):
    """2023 (7 digits), 2024 (6 digits or none, +00:00) and 2025 (T...Z) clocks, CRLF, no final newline."""
    path = azure(tmp_path, "clocks.csv", [
        "2023-11-16 18:17:03.9799600,1,1",
        "2023-11-16 18:17:04+00:00,2,1",
        "2023-11-16 18:17:04.500000+00:00,3,1",
        "2023-11-16T18:17:05.000Z,4,1",
    ])
    r = read_trace(path).requests
    assert r["arrival_s"].to_list() == pytest.approx([0.0, 0.02004, 0.52004, 1.02004])


def test_jsonl_torn_lines_and_wrong_types(tmp_path):
    path = write(tmp_path / "torn.jsonl",
                 '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}\n'
                 '{"timestamp": 10, "input_length": "many", "output_length": 3}\n'
                 '{"timestamp": 20, "input_length": 5, "output_length": 3, "hash_ids": "x"}\n'
                 '{"timestamp": 30, "input_length": 5, "output_len')
    result = read_trace(path)
    assert result.rows_read == 4 and result.requests.height == 1
    assert result.rejected.sort("line")["reason"].to_list() == [
        "input_length is not a whole number in range: 'many'",
        "hash_ids is not a list of integers: 'x'",
        "not a JSON object (a torn or corrupt line)",
    ]


def test_burstgpt_elapsed_time_and_session_columns(tmp_path):
    path = write(tmp_path / "v12.csv",
                 "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                 "5,abc,2.5,ChatGPT,472,18,490,Conversation log\n"
                 "6,,0.7,GPT-4,100,0,100,API log\n"
                 "7,,-3,GPT-4,100,5,105,API log\n")
    result = read_trace(path)
    assert result.format == "burstgpt" and result.counts["failed_rows"] == 1
    assert result.requests["observed_e2e_s"].to_list() == [2.5]
    assert result.rejected.sort("line")["reason"].to_list() == [
        "Response tokens is 0: no answer to replay (option zero_output='one' replays it as a one-token answer)",
        "Elapsed time is -3.0 s: not a latency in seconds (0 to 86400)",
    ]
    rejecting = read_trace(path, failed="reject")
    assert "the request failed (Response tokens 0); option failed='reject'" in rejecting.rejected["reason"].to_list()


def test_openai_usage_cached_tokens_and_tenant(tmp_path):
    path = write(tmp_path / "usage.jsonl",
                 '{"created": 1700000000, "model": "gpt-4o", "user": "team-a", "usage": {"prompt_tokens": 900,'
                 ' "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 512}}, "ttft_s": 0.2, "e2e_s": 1.5}\n'
                 '{"created": 1700000001.5, "model": "gpt-4o", "user": "team-b", "usage": {"prompt_tokens": 50,'
                 ' "completion_tokens": 3}}\n'
                 '{"created": 1700000002, "model": "gpt-4o", "usage": {"prompt_tokens": 50, "completion_tokens": 3,'
                 ' "prompt_tokens_details": {"cached_tokens": 50}}}\n')
    result = read_trace(path)
    r = result.requests
    assert r.select("cached_tokens", "tenant", "arrival_s", "observed_e2e_s").rows() == [
        (512, "team-a", 0.0, 1.5), (0, "team-b", 1.5, None)]
    assert str(r["arrival_ts"][0]) == "2023-11-14 22:13:20+00:00"
    assert result.rejected["reason"].to_list() == [
        "usage.prompt_tokens_details.cached_tokens is 50: must be fewer than the 50 prompt tokens"]


def test_a_blank_tenant_or_model_names_no_one(tmp_path):
    """An empty (or blank) tenant cell, or a JSON "user": "", names no tenant: null, as a missing
    one is, so chargeback has no tenant '' row of its own (README: it has no rows for requests
    whose log names none)."""
    csv = write(tmp_path / "team.csv", "ts,in,out,team,m\n0,100,10,acme,x\n1,100,10,,\n2,100,10,  , \n")
    result = read_trace(csv, format="csv", time_unit="s", columns={
        "arrival": "ts", "prompt_tokens": "in", "output_tokens": "out", "tenant": "team", "model": "m"})
    assert result.requests.select("tenant", "model").rows() == [("acme", "x"), (None, None), (None, None)]
    usage = write(tmp_path / "usage.jsonl",
                  '{"created": 1700000000, "model": "gpt-4o", "user": "", "usage": {"prompt_tokens": 9,'
                  ' "completion_tokens": 3}}\n')
    assert read_trace(usage).requests["tenant"].to_list() == [None]


def test_a_generic_log_without_a_cached_count_on_a_row_has_none_known(tmp_path):
    """cached_tokens is an optional column: a row whose cell is empty (CSV), whose field is
    absent or null (JSONL) or whose value is null (Parquet: pandas writes an int column with
    gaps so) knows of no prefix-cache hit, 0, as an OpenAI usage record without one does. Each
    such row was rejected, and in JSONL and Parquet with a reason naming no column ("fails a
    check, and a field its reason would quote is missing"), while the other optional columns
    (latencies, model, tenant) were null and kept."""
    mapping = {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out", "cached_tokens": "hit"}
    csv = write(tmp_path / "c.csv", "ts,in,out,hit\n0,100,10,40\n1,100,10,\n2,100,10, \n3,100,10,2.5\n")
    jsonl = write(tmp_path / "c.jsonl", '{"ts": 0, "in": 100, "out": 10, "hit": 40}\n'
                                        '{"ts": 1, "in": 100, "out": 10}\n'
                                        '{"ts": 2, "in": 100, "out": 10, "hit": null}\n'
                                        '{"ts": 3, "in": 100, "out": 10, "hit": 2.5}\n')
    pl.DataFrame({"ts": [0, 1, 2, 3], "in": [100] * 4, "out": [10] * 4, "hit": [40.0, None, None, 2.5]}
                 ).write_parquet(tmp_path / "c.parquet")
    for path, line in ((csv, 5), (jsonl, 4), (tmp_path / "c.parquet", 4)):   # a CSV's line 1 is its header
        result = read_trace(path, format=path.suffix[1:], time_unit="s", columns=mapping)
        assert result.requests.select("arrival_s", "cached_tokens").rows() == [(0.0, 40), (1.0, 0), (2.0, 0)], path
        assert result.rejected.select("line", "reason").rows() == [
            (line, "hit is not a whole number in range: '2.5'")], path


def test_a_jsonl_mapping_names_fields_whose_names_have_spaces(tmp_path):
    """pandas' to_json(orient="records", lines=True) of a BurstGPT frame keeps its column names,
    "Request tokens" among them: mapped, such a field read as absent on every row ("Request
    tokens is not a whole number in range: 'missing'" though the row holds 472). A dotted name
    is still a path into nested objects."""
    path = write(tmp_path / "b.jsonl", '{"Timestamp": 5, "Request tokens": 472, "Response tokens": 18,'
                                       ' "Log Type": "API log", "usage": {"e2e-s": 1.5}}\n')
    result = read_trace(path, format="jsonl", time_unit="s", columns={
        "arrival": "Timestamp", "prompt_tokens": "Request tokens", "output_tokens": "Response tokens",
        "tenant": "Log Type", "observed_e2e_s": "usage.e2e-s"})
    assert result.rejected.height == 0
    assert result.requests.select("prompt_tokens", "output_tokens", "tenant", "observed_e2e_s").rows() == [
        (472, 18, "API log", 1.5)]


def test_a_tenant_or_model_name_is_stripped_in_every_format(tmp_path):
    """A CSV cell is stripped, a JSON string was not: the same team written "team-a " in a JSONL
    log was a tenant of its own in chargeback, beside the team-a of its other requests."""
    mapping = {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out", "tenant": "team",
               "model": "m"}
    csv = write(tmp_path / "team.csv", "ts,in,out,team,m\n0,100,10, team-a , x \n")
    jsonl = write(tmp_path / "team.jsonl", '{"ts": 0, "in": 100, "out": 10, "team": " team-a ", "m": "x "}\n')
    for path, fmt in ((csv, "csv"), (jsonl, "jsonl")):
        result = read_trace(path, format=fmt, time_unit="s", columns=mapping)
        assert result.requests.select("tenant", "model").rows() == [("team-a", "x")], fmt
    usage = write(tmp_path / "usage.jsonl",
                  '{"created": 1700000000, "model": "gpt-4o ", "user": " team-a", "usage":'
                  ' {"prompt_tokens": 9, "completion_tokens": 3}}\n')
    assert read_trace(usage).requests.select("tenant", "model").rows() == [("team-a", "gpt-4o")]


def test_generic_parquet_and_jsonl_mappings(tmp_path):
    frame = pl.DataFrame({"t": [0, 1500, 750], "inp": [10, 20, -1], "out": [1, 2, 3]})
    frame.write_parquet(tmp_path / "own.parquet")
    mapping = {"arrival": "t", "prompt_tokens": "inp", "output_tokens": "out"}
    result = read_trace(tmp_path / "own.parquet", columns=mapping, time_unit="ms")
    assert result.format == "parquet"
    assert result.requests["arrival_s"].to_list() == [0.0, 1.5]
    assert result.rejected.row(0) == (str(tmp_path / "own.parquet"), 3, '{"t":750,"inp":-1,"out":3}',
                                      "inp is -1: a request needs at least one prompt token")
    path = write(tmp_path / "own.jsonl", '{"at": "2024-01-01T00:00:01Z", "u": {"in": 5}, "out": 2}\n'
                                         '{"at": "2024-01-01T00:00:00Z", "u": {"in": 7}, "out": 2}\n')
    r = read_trace(path, format="jsonl", time_unit="datetime",
                   columns={"arrival": "at", "prompt_tokens": "u.in", "output_tokens": "out"}).requests
    assert r["prompt_tokens"].to_list() == [7, 5] and r["arrival_s"].to_list() == [0.0, 1.0]
    with pytest.raises(ValueError, match="needs columns="):
        read_trace(tmp_path / "own.parquet")
    with pytest.raises(ValueError, match="time_unit="):
        read_trace(path, format="jsonl", columns={"arrival": "at", "prompt_tokens": "u.in", "output_tokens": "out"})


def test_unknown_options_and_policies_are_refused(tmp_path):
    path = azure(tmp_path, "a.csv", ["2023-11-16 18:17:03.0000000,1,1"])
    with pytest.raises(ValueError, match=r"option\(s\) \['block_tokens'\] do not apply to format 'azure-llm'"):
        read_trace(path, block_tokens=16)
    with pytest.raises(ValueError, match="duplicates='drop'"):
        read_trace(path, duplicates="drop")
    with pytest.raises(ValueError, match="format='nope'"):
        read_trace(path, format="nope")


# ---- whole-JSON formats: a missing or null field is a rejected row, never a lost one ----------------

LLMPERF_ROW = {"number_input_tokens": 5, "number_output_tokens": 2, "end_to_end_latency_s": 1.0, "ttft_s": 0.1}
VLLM_ROW = {"event_id": 0, "in_len": 5, "out_len": 13, "first_chunk_time": 0.1, "total_chunk_time": 1.0,
            "record_time": 10.0}


def llmperf(tmp_path: Path, rows: list[dict], **options):
    return read_trace(write(tmp_path / "llmperf.json", json.dumps(rows)), **options)


def vllm(tmp_path: Path, rows: list[dict], **options):
    entries = {str(i): {**row, "event_id": i} for i, row in enumerate(rows)}
    return read_trace(write(tmp_path / "detail_log.json", json.dumps(entries)),
                      **{"out_len_per_token": 6.5, **options})


def test_a_pretty_printed_burstgpt_vllm_log_is_recognised(tmp_path):
    """The log is one JSON document; saved indented (json.dump(..., indent=2), an editor's
    formatter) its first line is "{" alone, and detection said "cannot tell the log format from
    its first line '{'" although the reader reads it as it reads the one-line file."""
    entries = {str(i): {**VLLM_ROW, "event_id": i, "record_time": 10.0 + i} for i in range(3)}
    pretty = write(tmp_path / "pretty.json", json.dumps(entries, indent=2))
    one_line = write(tmp_path / "one_line.json", json.dumps(entries))
    got, expected = (read_trace(p, out_len_per_token=6.5) for p in (pretty, one_line))
    assert got.format == "burstgpt-vllm" and got.rows.height == 3
    assert got.requests.drop("trace", "request_id").equals(expected.requests.drop("trace", "request_id"))


@pytest.mark.parametrize(("reader", "bad_row", "reason"), [
    (llmperf, {k: v for k, v in LLMPERF_ROW.items() if k != "number_output_tokens"},
     "number_output_tokens is not a whole number in range: 'missing'"),
    (llmperf, {**LLMPERF_ROW, "number_input_tokens": None},
     "number_input_tokens is not a whole number in range: 'missing'"),
    (vllm, {**VLLM_ROW, "in_len": None}, "in_len is not a whole number in range: 'missing'"),
    (vllm, {**VLLM_ROW, "out_len": None}, "out_len / out_len_per_token is not a whole number in range: 'missing'"),
    (vllm, {**VLLM_ROW, "record_time": None},
     "record_time - total_chunk_time is not a number of seconds: 'missing - 1.0'"),
], ids=["llmperf-absent", "llmperf-null", "vllm-in_len", "vllm-out_len", "vllm-record_time"])
def test_missing_or_null_field_is_rejected_with_a_reason(tmp_path, reader, bad_row, reason):
    base = LLMPERF_ROW if reader is llmperf else VLLM_ROW
    result = reader(tmp_path, [base, bad_row])
    assert (result.rows_read, result.requests.height) == (2, 1)
    assert result.rejected.select("line", "reason").rows() == [(2, reason)]


def test_a_reason_that_cannot_be_written_still_rejects_the_row(tmp_path):
    """A reader that leaves a quoted text null must not lose the row: it gets a generic reason."""
    frame = pl.LazyFrame({"line": [1, 2], "raw": ["a", "b"], "arrival": [0.0, 1.0], "arrival_text": ["0", "1"],
                          "prompt_tokens": [5, None], "prompt_text": ["5", None],
                          "output_tokens": [1, 1], "output_text": ["1", "1"]})
    result = finish(frame, path=tmp_path / "t.csv", fmt="csv", sha256="0" * 64,
                    labels=Labels("t", "p", "o", clock="a number of seconds"), policies=Policies())
    assert result.requests.height == 1
    assert result.rejected.select("line", "reason").rows() == [(2, UNQUOTABLE)]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_generic_mapping_may_map_one_column_to_two_targets(tmp_path, fmt):
    frame = pl.DataFrame({"ts": [0, 1], "n": [5, 6], "lat": [1.0, 2.0]})
    path = tmp_path / f"log.{fmt}"
    {"csv": frame.write_csv, "jsonl": frame.write_ndjson, "parquet": frame.write_parquet}[fmt](path)
    result = read_trace(path, format=fmt, time_unit="s",
                        columns={"arrival": "ts", "prompt_tokens": "n", "output_tokens": "n",
                                 "observed_ttft_s": "lat", "observed_e2e_s": "lat"})
    assert result.requests.select("prompt_tokens", "output_tokens", "observed_ttft_s", "observed_e2e_s").rows() == [
        (5, 5, 1.0, 1.0), (6, 6, 2.0, 2.0)]



@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_generic_latencies_in_milliseconds_are_read_as_seconds(tmp_path, fmt):
    """A log that records its latencies in milliseconds (ttft_ms: 130) had no way to say so:
    read as 130 s, the calibration found a server a thousand times slower, every factor at its
    bound. latency_unit= names the unit, as time_unit= does the arrival's."""
    frame = pl.DataFrame({"ts": [0, 1], "n": [5, 6], "ttft_ms": [130.0, 95.5], "e2e_ms": [2500.0, 3000.0]})
    path = tmp_path / f"log.{fmt}"
    {"csv": frame.write_csv, "jsonl": frame.write_ndjson, "parquet": frame.write_parquet}[fmt](path)
    columns = {"arrival": "ts", "prompt_tokens": "n", "output_tokens": "n",
               "observed_ttft_s": "ttft_ms", "observed_e2e_s": "e2e_ms"}
    result = read_trace(path, format=fmt, time_unit="s", latency_unit="ms", columns=columns)
    assert result.requests.select("observed_ttft_s", "observed_e2e_s").rows() == [
        (0.13, 2.5), (0.0955, 3.0)]
    assert read_trace(path, format=fmt, time_unit="s", columns=columns).requests[
        "observed_ttft_s"].to_list() == [130.0, 95.5]   # seconds, the default
    with pytest.raises(ValueError, match=r"latency_unit='min': expected one of \['s', 'ms', 'us',"
                                         r" 'ns'\], the unit of the observed_ttft_s"):
        read_trace(path, format=fmt, time_unit="s", latency_unit="min", columns=columns)


def _rejected_reasons_of_a_millisecond_log(tmp_path, rows: str) -> list[str]:
    """The reasons read_trace rejects rows of a generic CSV with latencies in ms for (`rows`:
    lines of ts,n,ttft_ms,e2e_ms)."""
    path = tmp_path / "log.csv"
    path.write_text("ts,n,ttft_ms,e2e_ms\n" + rows)
    result = read_trace(path, format="csv", time_unit="s", latency_unit="ms",
                        columns={"arrival": "ts", "prompt_tokens": "n", "output_tokens": "n",
                                 "observed_ttft_s": "ttft_ms", "observed_e2e_s": "e2e_ms"})
    return result.rejected["reason"].to_list()


def test_a_rejected_millisecond_latency_says_its_value_in_seconds(tmp_path):
    """A millisecond log's bad row read 'ttft_ms is 0.9, more than e2e_ms 0.2' where the file
    holds 900 and 200: the values checked are seconds, so the reason says so."""
    assert _rejected_reasons_of_a_millisecond_log(
            tmp_path, "0,5,130,2500\n1,5,900,200\n2,5,100,100000000\n") == [
        "ttft_ms is 0.9 s, more than e2e_ms 0.2 s: the first token cannot come after the end of"
        " the answer",
        "e2e_ms is 100000.0 s: not a latency in seconds (0 to 86400); read with latency_unit"
        " 'ms': if the log's latencies are in another unit, its sidecar takes \"latency_unit\":"
        " \"s\", \"ms\", \"us\" or \"ns\""]


def test_a_rejected_latency_in_seconds_shows_no_float_noise(tmp_path):
    """950 ms read 'ttft_ms is 0.9500000000000001 s, more than e2e_ms 0.9 s', and -950 ms
    'e2e_ms is -0.9500000000000001 s': Polars divides by the unit as a multiplication by its
    reciprocal, one bit off. The reason shows the seconds to 15 significant digits."""
    assert _rejected_reasons_of_a_millisecond_log(tmp_path, "0,5,950,900\n1,5,100,-950\n") == [
        "ttft_ms is 0.95 s, more than e2e_ms 0.9 s: the first token cannot come after the end of"
        " the answer",
        "e2e_ms is -0.95 s: not a latency in seconds (0 to 86400)"]
    # rounded to the nanosecond, a difference below it read "1.0 s, more than 1.0 s"
    assert _rejected_reasons_of_a_millisecond_log(tmp_path, "0,5,1000.0000001,1000\n1,5,1,-1e-7\n") == [
        "ttft_ms is 1.0000000001 s, more than e2e_ms 1.0 s: the first token cannot come after the"
        " end of the answer",
        "e2e_ms is -1e-10 s: not a latency in seconds (0 to 86400)"]


def test_a_latency_beyond_a_day_names_the_setting_that_reads_its_unit(tmp_path):
    """A generic log in milliseconds read as seconds (its sidecar gives no latency_unit) had each
    row rejected 'observed_ttft_s is 96377.0 s: not a latency in seconds (0 to 86400)', naming
    no fix; the reason names the unit it was read in and the sidecar key that sets it. Formats
    whose latency unit is fixed (AIBrix, OpenAI usage) take no such key and name none; every
    row read is accepted or rejected all the same."""
    path = generic_csv(tmp_path, [{"first": 130, "total": 2500}, {"first": 96377, "total": 99000}])
    result = read_trace(path, **GENERIC_CSV)
    assert result.rejected["reason"].to_list() == [
        "first is 96377.0 s: not a latency in seconds (0 to 86400); read with latency_unit 's': if"
        " the log's latencies are in another unit, its sidecar takes \"latency_unit\": \"s\","
        " \"ms\", \"us\" or \"ns\""]
    assert result.requests.height + result.rejected.height == 2
    assert read_trace(path, **GENERIC_CSV, latency_unit="ms").rejected.height == 0
    (reason,) = read_trace(jsonl(tmp_path, "aibrix.jsonl", [AIBRIX_ROW, {**AIBRIX_ROW, "latency": 90000.0}])
                           ).rejected["reason"].to_list()
    assert "latency_unit" not in reason


MOONCAKE_LINE = '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}\n'


@pytest.mark.parametrize(("name", "body", "option", "value", "message"), [
    *[("m.jsonl", MOONCAKE_LINE, "block_tokens", value, "a positive whole multiple of 16")
      for value in ("abc", 100, -512, 0, True, 512.5, float("inf"))],
    ("l.json", json.dumps([LLMPERF_ROW]), "concurrency", True, "a whole number of clients >= 1"),
    ("l.json", json.dumps([LLMPERF_ROW]), "concurrency", 2.5, "a whole number of clients >= 1"),
    *[("v.json", json.dumps({"0": VLLM_ROW}), "out_len_per_token", value, "a finite number > 0")
      for value in (True, float("inf"), float("nan"), "6.5", -1)],
])
def test_bad_format_options_are_one_message_naming_file_and_option(tmp_path, name, body, option, value, message):
    path = write(tmp_path / name, body)
    with pytest.raises(ValueError) as info:
        read_trace(path, **{option: value})
    text = str(info.value)
    assert text.startswith(f"{path}: ") and option in text and message in text and repr(value) in text


def test_whole_float_counts_are_the_counts_they_say(tmp_path):
    """A sidecar's JSON may write a count as 5.0: five clients, as catalog.build takes 32.0
    sequences (it was refused as not "a whole number of clients")."""
    rows = [{**LLMPERF_ROW, "end_to_end_latency_s": float(i)} for i in range(1, 7)]
    assert llmperf(tmp_path, rows, concurrency=2.0).requests.equals(llmperf(tmp_path, rows, concurrency=2).requests)
    log = write(tmp_path / "m.jsonl", MOONCAKE_LINE)
    block = read_trace(log, block_tokens=16.0).prefix_block_tokens
    assert block == 16 and type(block) is int


def test_block_tokens_from_a_sidecar_is_checked(tmp_path):
    log = write(tmp_path / "m.jsonl", MOONCAKE_LINE)
    write(tmp_path / "m.jsonl.fleetspend.json", '{"block_tokens": "abc"}')
    with pytest.raises(ValueError, match=r"m\.jsonl: block_tokens='abc': expected .* multiple of 16"):
        read_trace(log, **file_options(log))
    write(tmp_path / "m.jsonl.fleetspend.json", '{"block_tokens": 16}')
    assert read_trace(log, **file_options(log)).prefix_block_tokens == 16


@pytest.mark.parametrize(("reader", "field", "label"), [
    (llmperf, "number_input_tokens", "number_input_tokens"),
    (llmperf, "number_output_tokens", "number_output_tokens"),
    (vllm, "in_len", "in_len"),
    (vllm, "out_len", "out_len / out_len_per_token"),
])
def test_decimal_token_counts_are_rejected_not_truncated(tmp_path, reader, field, label):
    base = LLMPERF_ROW if reader is llmperf else VLLM_ROW
    result = reader(tmp_path, [base, {**base, field: 100.7}, {**base, field: 100.0}, {**base, field: "12"}])
    assert result.rejected.select("line", "reason").rows() == [(2, f"{label} is not a whole number in range: '100.7'")]
    assert result.requests.height == 3


STOPPED = ("arrival unknown: element 3 before it on the same client has no usable end_to_end_latency_s, "
           "and the closed-loop clock stops there")


@pytest.mark.parametrize("latency", [1e12, -5.0, None, "abc"])
def test_llmperf_unusable_latency_stops_its_client_clock_only(tmp_path, latency):
    """Two clients: elements 1, 3, 5 on one, 2, 4, 6 on the other; element 3's latency is broken."""
    rows = [{**LLMPERF_ROW, "end_to_end_latency_s": float(i)} for i in range(1, 7)]
    rows[2]["end_to_end_latency_s"] = latency
    result = llmperf(tmp_path, rows, concurrency=2)
    assert result.rejected.sort("line").select("line", "reason").rows() == [
        (3, f"end_to_end_latency_s is not a latency in seconds (0 to 86400) to rebuild arrivals from: "
            f"'{'missing' if latency is None else latency}'"),
        (5, STOPPED)]
    r = result.requests.sort("request_id")
    assert r["request_id"].to_list() == ["llmperf:1", "llmperf:2", "llmperf:4", "llmperf:6"]
    assert r["arrival_s"].to_list() == [0.0, 0.0, 2.0, 6.0]   # the other client's clock is untouched


def test_llmperf_rows_rejected_for_their_tokens_still_advance_the_clock(tmp_path):
    rows = [LLMPERF_ROW, {**LLMPERF_ROW, "number_input_tokens": 0, "end_to_end_latency_s": 3.0}, LLMPERF_ROW]
    result = llmperf(tmp_path, rows)
    assert result.rejected["line"].to_list() == [2]
    assert result.requests["arrival_s"].to_list() == [0.0, 4.0]


AIBRIX_ROW = {"prompt_tokens": 5, "output_tokens": 2, "latency": 1.0, "start_time": 7.5, "ttft": 0.1}
USAGE_ROW = {"created": 1700000000, "usage": {"prompt_tokens": 9, "completion_tokens": 3}, "ttft_s": 0.1, "e2e_s": 1.0}
GENERIC_CSV = {"format": "csv", "time_unit": "s",
               "columns": {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out",
                           "observed_ttft_s": "first", "observed_e2e_s": "total"}}


def jsonl(tmp_path: Path, name: str, rows: list[dict]) -> Path:
    return write(tmp_path / name, "".join(json.dumps(row) + "\n" for row in rows))


def generic_csv(tmp_path: Path, rows: list[dict]) -> Path:
    return write(tmp_path / "g.csv", "ts,in,out,first,total\n" + "".join(
        f"{i},5,2,{row.get('first', '')},{row.get('total', '')}\n" for i, row in enumerate(rows)))


@pytest.mark.parametrize(("name", "good", "bad", "options", "reason"), [
    ("aibrix.jsonl", AIBRIX_ROW, {**AIBRIX_ROW, "ttft": "x"}, {}, "ttft is not a number: 'x'"),
    ("aibrix.jsonl", AIBRIX_ROW, {**AIBRIX_ROW, "latency": True}, {}, "latency is not a number: 'true'"),
    ("aibrix.jsonl", AIBRIX_ROW, {**AIBRIX_ROW, "ttft": -0.5}, {},
     "ttft is -0.5 s: not a latency in seconds (0 to 86400)"),
    # beyond a day (README "Bad input"): milliseconds read as seconds, say
    ("aibrix.jsonl", AIBRIX_ROW, {**AIBRIX_ROW, "latency": 90000.0}, {},
     "latency is 90000.0 s: not a latency in seconds (0 to 86400)"),
    ("usage.jsonl", USAGE_ROW, {**USAGE_ROW, "ttft_s": "x"}, {}, "ttft_s is not a number: 'x'"),
    ("usage.jsonl", USAGE_ROW, {**USAGE_ROW, "e2e_s": [1]}, {}, "e2e_s is not a number: '[1]'"),
    ("g.csv", {"first": 0.1, "total": 1}, {"first": "x", "total": 1}, GENERIC_CSV, "first is not a number: 'x'"),
    ("g.csv", {"first": 0.1, "total": 1}, {"first": 0.1, "total": "inf"}, GENERIC_CSV,
     "total is inf s: not a latency in seconds (0 to 86400)"),
    ("llmperf.json", LLMPERF_ROW, {**LLMPERF_ROW, "ttft_s": "x"}, {}, "ttft_s is not a number: 'x'"),
    ("detail_log.json", VLLM_ROW, {**VLLM_ROW, "first_chunk_time": "x"}, {}, "first_chunk_time is not a number: 'x'"),
    # the first token cannot come after the whole answer, in any format with both latencies
    ("aibrix.jsonl", AIBRIX_ROW, {**AIBRIX_ROW, "ttft": 5.0}, {},
     "ttft is 5.0 s, more than latency 1.0 s: the first token cannot come after the end of the answer"),
    ("usage.jsonl", USAGE_ROW, {**USAGE_ROW, "ttft_s": 2.0}, {},
     "ttft_s is 2.0 s, more than e2e_s 1.0 s: the first token cannot come after the end of the answer"),
    ("g.csv", {"first": 0.1, "total": 1}, {"first": 3, "total": 1}, GENERIC_CSV,
     "first is 3.0 s, more than total 1.0 s: the first token cannot come after the end of the answer"),
    ("llmperf.json", LLMPERF_ROW, {**LLMPERF_ROW, "ttft_s": 2.0}, {},
     "ttft_s is 2.0 s, more than end_to_end_latency_s 1.0 s: the first token cannot come after the end of the answer"),
    ("detail_log.json", VLLM_ROW, {**VLLM_ROW, "first_chunk_time": 2.0}, {},
     "first_chunk_time is 2.0 s, more than total_chunk_time 1.0 s: the first token cannot come after the end of "
     "the answer"),
])
def test_observed_latencies_are_checked_in_every_format(tmp_path, name, good, bad, options, reason):
    if name == "llmperf.json":
        result = llmperf(tmp_path, [good, bad, good])
    elif name == "detail_log.json":
        result = vllm(tmp_path, [good, bad, good])
    else:
        path = generic_csv(tmp_path, [good, bad, good]) if name == "g.csv" else jsonl(tmp_path, name, [good, bad, good])
        result = read_trace(path, **options)
    assert result.rejected["reason"].to_list() == [reason]
    assert result.requests.height == 2 and result.requests["observed_ttft_s"].is_not_null().all()


def test_absent_observed_latencies_are_fine(tmp_path):
    rows = [AIBRIX_ROW, {k: v for k, v in AIBRIX_ROW.items() if k != "ttft"}, {**AIBRIX_ROW, "latency": None}]
    assert read_trace(jsonl(tmp_path, "aibrix.jsonl", rows)).rejected.height == 0
    result = read_trace(generic_csv(tmp_path, [{"first": 0.1, "total": 1}, {}]), **GENERIC_CSV)
    assert result.rejected.height == 0 and result.requests["observed_e2e_s"].to_list() == [1.0, None]


def test_an_observed_latency_of_zero_is_kept_as_written(tmp_path):
    """README (requests): a log's 0 s is stored as 0, not null and not rejected; calibration
    counts it as not measured, and an analyst's percentiles must filter it out."""
    result = read_trace(generic_csv(tmp_path, [{"first": 0, "total": 0}, {"first": 0.1, "total": 1}]),
                        **GENERIC_CSV)
    assert result.rejected.height == 0
    assert result.requests.select("observed_ttft_s", "observed_e2e_s").rows() == [(0.0, 0.0), (0.1, 1.0)]

WINDOW = ("outside 2000-01-01 to 2100-01-01 UTC, the window a request's arrival can fall in (a wrong unit or a "
          "broken clock)")
TEN_YEARS = ("beyond 10 years (315360000 s) from the clock's zero, longer than a relative clock runs "
             "(a wrong unit or a broken clock; a Unix time is read with time_unit='unix_s' or 'unix_ms')")
# A format of a relative clock has no such time_unit (Mooncake's refused 'unix_ms', BurstGPT's
# and Vidur's have no time_unit): the reason named an option that fails the file when followed.
TEN_YEARS_FIXED_CLOCK = TEN_YEARS.replace(
    "a Unix time is read with time_unit='unix_s' or 'unix_ms'",
    "a log of Unix times is read as format 'csv' or 'jsonl' with a column mapping and time_unit='unix_s' or 'unix_ms'")


@pytest.mark.parametrize(("name", "body", "options", "reason"), [
    ("usage.jsonl", [USAGE_ROW, {**USAGE_ROW, "created": 1700000000000}], {},
     f"created is '1700000000000': {WINDOW}"),
    ("usage.jsonl", [USAGE_ROW, {**USAGE_ROW, "created": 900000000}], {}, f"created is '900000000': {WINDOW}"),
    ("azure.csv", f"{HEADER}\n2023-11-16 18:17:03.0000000,5,5\n9999-12-31 23:59:59,5,5\n", {},
     f"TIMESTAMP is '9999-12-31 23:59:59': {WINDOW}"),
    ("burst.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                  "5,ChatGPT,472,18,490,API log\n1e300,ChatGPT,472,18,490,API log\n", {},
     f"Timestamp is '1e300': {TEN_YEARS_FIXED_CLOCK}"),
    ("m.jsonl", MOONCAKE_LINE + MOONCAKE_LINE.replace('"timestamp": 0', '"timestamp": 400000000000'), {},
     f"timestamp is '400000000000': {TEN_YEARS_FIXED_CLOCK.replace('315360000 s', '315360000000 ms')}"),
    ("g.csv", "ts,in,out\n0,5,5\n1715299200,5,5\n",
     {"format": "csv", "time_unit": "s", "columns": {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out"}},
     f"ts is '1715299200': {TEN_YEARS}"),
    ("g.csv", "ts,in,out\n2024-01-01T00:00:00,5,5\n2100-01-01T00:00:00,5,5\n",
     {"format": "csv", "time_unit": "datetime",
      "columns": {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out"}},
     f"ts is '2100-01-01T00:00:00': {WINDOW}"),
])
def test_arrivals_outside_a_plausible_window_are_rejected(tmp_path, name, body, options, reason):
    path = jsonl(tmp_path, name, body) if isinstance(body, list) else write(tmp_path / name, body)
    result = read_trace(path, **options)
    assert result.rejected["reason"].to_list() == [reason]
    assert len(result.requests.rows()) == 1   # every value converts to Python (year 55,800 did not)


ROOT = Path(__file__).resolve().parents[2]
AZURE_SAMPLE = ROOT / "data" / "samples" / "AzureLLMInferenceTrace_code.csv"
BULK = "the middle half of this file's arrivals widened by 1 day each side"


@pytest.mark.parametrize(("line", "typo"), [(500, "2033"), (2, "2013"), (8820, "2024")])
def test_a_mistyped_year_is_rejected_not_replayed_over_years(tmp_path, line, typo):
    """One row of the real Azure sample dated 2033 (or 2013, or a year on) instead of 2023 was
    accepted: within 2000-2100, it stretched the trace's replay over ten years of idle fleet
    (5.8 GB; the what-if failed past 25 M timeline cells, and a one-year slip passed with the
    figures of a fleet idle for a year). It is rejected with its reason; every row is counted."""
    lines = AZURE_SAMPLE.read_text().splitlines(keepends=True)
    lines[line - 1] = typo + lines[line - 1][4:]
    result = read_trace(write(tmp_path / "AzureLLMInferenceTrace_code.csv", "".join(lines)))
    assert result.rows_read == 8819 == result.requests.height + result.rejected.height
    [reason] = result.rejected.filter(pl.col("line") == line)["reason"].to_list()
    assert reason == (f"TIMESTAMP is '{lines[line - 1].split(',')[0]}': outside 2023-11-15 18:31 to "
                      f"2023-11-17 18:51 UTC, {BULK} (ten times its length, a day at least): alone in "
                      f"time, likely a mistyped date; replayed, it would price the fleet idle over the gap")
    assert result.rejected.height == 1 and result.requests["arrival_s"].max() < 3500


def test_a_relative_clock_far_from_its_bulk_is_rejected(tmp_path):
    body = "".join(f"{t:.1f},5,5\n" for t in (*range(100), 2.0e8))
    result = read_trace(write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" + body))
    assert result.rejected["reason"].to_list() == [
        f"arrived_at is '200000000.0': outside -86,375 to 86,475 s, {BULK} (ten times its length, a day "
        f"at least): alone in time, likely a mistyped date; replayed, it would price the fleet idle over "
        f"the gap"]


@pytest.mark.parametrize(("unit", "window"), [("ms", "-86,375,000 to 86,475,000 ms"),
                                               ("ns", "-86,375,000,000,000 to 86,475,000,000,000 ns")])
def test_a_relative_clock_s_window_is_in_the_file_s_own_unit(tmp_path, unit, window):
    """A log in milliseconds with one arrival ten days on read "ts is '864000000': outside -86,375
    to 86,475 s": the file's value in its unit beside a window in seconds, a thousand times off."""
    scale = int(per_second(unit))
    body = "".join(f"{t * scale},5,5\n" for t in range(100)) + f"{864_000 * scale},5,5\n"
    result = read_trace(write(tmp_path / "g.csv", "ts,in,out\n" + body), format="csv", time_unit=unit,
                        columns={"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out"})
    [reason] = result.rejected["reason"].to_list()
    assert reason.startswith(f"ts is '{864_000 * scale}': outside {window}, {BULK}")


def test_an_arrival_alone_in_time_is_found_without_a_deprecated_polars_call(tmp_path):
    """The stray arrivals were matched with `is_in` on a Series of the column's own dtype, which
    Polars deprecates as ambiguous: a DeprecationWarning from rows.py on every file with a stray,
    which pyproject's error filter did not turn into a failure (Polars warns while it evaluates)."""
    body = "".join(f"{t:.1f},5,5\n" for t in (*range(100), 2.0e8))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = read_trace(write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" + body))
    assert result.rejected["line"].to_list() == [102] and result.requests.height == 100
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == []


def test_a_second_session_days_after_the_first_is_kept(tmp_path):
    """800 requests in one hour and 200 two days later: the rule rejected all 200 as 'alone in
    time, likely a mistyped date'. Arrivals outside the window are rejected only when they are
    at most 1% of the file's (a typo is a row or a few); a fifth of the log is a session."""
    body = "".join(f"{t * 4.5:.1f},5,5\n" for t in range(800))
    body += "".join(f"{2 * 86_400 + t * 4.5:.1f},5,5\n" for t in range(200))
    result = read_trace(write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" + body))
    assert result.requests.height == 1000 and result.rejected.height == 0
    # one stray row among the 1,000 (0.1%) is still a typo
    result = read_trace(write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                              + body + f"{400 * 86_400},5,5\n"))
    assert result.requests.height == 1000 and result.rejected.height == 1


def test_a_mistyped_year_in_a_small_file_is_rejected(tmp_path):
    """One row of 50 is 2% of the file: under the 1% share alone, a file of fewer than 100
    arrivals kept a row dated 2033 among 2023's and its replay spanned ten years. A single row
    far off is a typo in any file; two of ten two days on are still a session."""
    lines = AZURE_SAMPLE.read_text().splitlines(keepends=True)[:51]
    lines[20] = "2033" + lines[20][4:]
    result = read_trace(write(tmp_path / "AzureLLMInferenceTrace_code.csv", "".join(lines)))
    assert result.rejected["line"].to_list() == [21] and result.requests.height == 49
    assert result.requests["arrival_s"].max() < 3500
    body = "".join(f"{t * 360.0:.1f},5,5\n" for t in range(8))
    body += "".join(f"{2 * 86_400 + t * 360.0:.1f},5,5\n" for t in range(2))
    result = read_trace(write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" + body))
    assert result.requests.height == 10 and result.rejected.height == 0


def test_a_long_relative_clock_s_window_reads_without_exponents(tmp_path):
    """A relative log spanning 23 days with one arrival 9.5 years on: its reason read 'outside
    -9.5e+06 to 1.15e+07 s, ... widened by 116 days'; with 116 times the span, '1.16e+03 days'."""
    body = "".join(f"{t * 1000},5,5\n" for t in range(2000)) + "300000000,5,5\n"
    result = read_trace(write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" + body))
    [reason] = result.rejected["reason"].to_list()
    assert "outside -9,500,000 to 11,500,000 s, the middle half of this file's arrivals widened by 116" \
        " days each side" in reason and "e+" not in reason
    body = "".join(f"{t * 100},5,5\n" for t in range(2000)) + "300000000,5,5\n"
    result = read_trace(write(tmp_path / "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" + body))
    [reason] = result.rejected["reason"].to_list()
    assert "widened by 11.6 days each side" in reason
    assert _days(100 * 86_400) == "100 days" and _days(1_160 * 86_400) == "1,160 days"
    assert _days(86_400) == _days(86_400 + 30) == "1 day"   # not '1 days' a few seconds over


def test_requests_hours_after_the_rest_are_kept():
    """AIBrix's client log sends its last two requests 2.85 hours after the 50 others: real
    traffic, within a day of the bulk."""
    result = read_trace(ROOT / "tests" / "fixtures" / "public" / "aibrix_output.jsonl")
    assert result.requests.height == 52 and "alone in time" not in " ".join(result.rejected["reason"])


def test_arrivals_all_within_their_window_are_not_sorted_into_runs(monkeypatch):
    """The usual log has no arrival outside its window, and so no run to find: sorting and
    grouping every arrival into runs cost 0.6 s of each read of a 27M-row week (0.1 s without)."""
    def no_runs(*_, **__):
        raise AssertionError("arrivals grouped into runs though none is outside the window")
    monkeypatch.setattr(pl.DataFrame, "group_by", no_runs)
    arrivals = pl.Series("arrival", [float(t) for t in range(1000)])
    assert _outlier_check(arrivals, Labels("arrived_at", "p", "o")) is None
    with pytest.raises(AssertionError, match="grouped into runs"):   # one far off: runs are found
        _outlier_check(arrivals.append(pl.Series([2.0e8])), Labels("arrived_at", "p", "o"))


DATETIME_CSV = {"format": "csv", "time_unit": "datetime",
                "columns": {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out"}}


def test_generic_datetimes_are_iso_8601_row_by_row(tmp_path):
    """No row decides how the others are read: offsets are converted to UTC, no zone is UTC,
    and text that is not ISO 8601 is rejected on its own line."""
    path = write(tmp_path / "d.csv", "ts,in,out\n"
                 "2024-01-01T05:00:00+05:00,1,1\n"      # an offset on the first row: 00:00 UTC
                 "01/02/2024 00:00,2,1\n"
                 "2024-01-01T00:00:01Z,3,1\n"
                 "2024-01-01 00:00:02.5,4,1\n"
                 "2024-01-01T00:00:03-0100,5,1\n"       # 01:00:03 UTC
                 "2024-01-01,6,1\n"
                 "2024-13-01T00:00:00,7,1\n")
    result = read_trace(path, **DATETIME_CSV)
    assert result.rejected.select("line", "reason").rows() == [
        (3, "ts is not an ISO 8601 date-time: '01/02/2024 00:00'"),
        (8, "ts is not an ISO 8601 date-time: '2024-13-01T00:00:00'")]
    r = result.requests
    assert r["prompt_tokens"].to_list() == [1, 6, 3, 4, 5]
    assert r["arrival_s"].to_list() == [0.0, 0.0, 1.0, 2.5, 3603.0]
    assert str(r["arrival_ts"][0]) == "2024-01-01 00:00:00+00:00"


def test_generic_datetimes_as_databases_and_python_logging_write_them(tmp_path):
    """Two ISO 8601 forms were rejected on every row: an offset of whole hours written "+02"
    (what DuckDB's and PostgreSQL's CSV export of a TIMESTAMPTZ column writes:
    `2024-05-10 02:00:00.5+02`), and a decimal comma before the fraction (ISO 8601's own
    preference, and Python logging's asctime: `2024-05-10 00:00:00,123`, in a JSON log)."""
    path = write(tmp_path / "export.csv", "ts,in,out\n"
                 "2024-05-10 02:00:00.5+02,1,1\n"   # 00:00:00.5 UTC
                 "2024-05-10 00:00:01+00,2,1\n"
                 "2024-05-09 20:30:02-03,3,1\n"     # 23:30:02 UTC the day before
                 "2024-05-10 00:00:03+2,4,1\n")     # one digit is no ISO 8601 offset
    result = read_trace(path, **DATETIME_CSV)
    assert result.requests.select("prompt_tokens", "arrival_ts").rows() == [
        (3, dt.datetime(2024, 5, 9, 23, 30, 2, tzinfo=dt.timezone.utc)),
        (1, dt.datetime(2024, 5, 10, 0, 0, 0, 500000, tzinfo=dt.timezone.utc)),
        (2, dt.datetime(2024, 5, 10, 0, 0, 1, tzinfo=dt.timezone.utc))]
    assert result.rejected.select("line", "reason").rows() == [
        (5, "ts is not an ISO 8601 date-time: '2024-05-10 00:00:03+2'")]
    logged = write(tmp_path / "app.jsonl", '{"asctime": "2024-05-10 00:00:00,123", "in": 1, "out": 1}\n'
                                           '{"asctime": "2024-05-10T00:00:01,5Z", "in": 2, "out": 1}\n')
    r = read_trace(logged, format="jsonl", time_unit="datetime",
                   columns={"arrival": "asctime", "prompt_tokens": "in", "output_tokens": "out"}).requests
    assert r["arrival_ts"].to_list() == [dt.datetime(2024, 5, 10, 0, 0, 0, 123000, tzinfo=dt.timezone.utc),
                                         dt.datetime(2024, 5, 10, 0, 0, 1, 500000, tzinfo=dt.timezone.utc)]


@pytest.mark.parametrize("zone", [None, "Asia/Kolkata", "UTC"])
def test_generic_parquet_datetime_column_is_used_as_it_is(tmp_path, zone):
    arrival = pl.Series("t", [dt.datetime(2024, 1, 1, 5, 30), dt.datetime(2024, 1, 1, 5, 30, 1, 500)],
                        dtype=pl.Datetime("ns")).dt.replace_time_zone(zone)   # 05:30 in India is 00:00 UTC
    pl.DataFrame([arrival, pl.Series("i", [5, 6]), pl.Series("o", [1, 2])]).write_parquet(tmp_path / "p.parquet")
    r = read_trace(tmp_path / "p.parquet", time_unit="datetime",
                   columns={"arrival": "t", "prompt_tokens": "i", "output_tokens": "o"}).requests
    assert str(r["arrival_ts"][0]) == ("2024-01-01 00:00:00+00:00" if zone == "Asia/Kolkata"
                                       else "2024-01-01 05:30:00+00:00")
    assert r["arrival_s"].to_list() == [0.0, 1.0005]


VIDUR = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,5,5\n1.5,6,6\n"


@pytest.mark.parametrize("start", ["2024-01-01T00:00:00Z", "2024-01-01T05:30:00+05:30", "2024-01-01 00:00"])
def test_start_time_may_be_iso_text_as_in_a_sidecar(tmp_path, start):
    r = read_trace(write(tmp_path / "v.csv", VIDUR), start_time=start).requests
    assert [str(ts) for ts in r["arrival_ts"]] == ["2024-01-01 00:00:00+00:00", "2024-01-01 00:00:01.500000+00:00"]


@pytest.mark.parametrize(("start", "expected"), [
    ("yesterday", "expected an ISO 8601 date-time text"),
    (1704067200, "expected an ISO 8601 date-time text"),
    ("9999-12-31T00:00:00Z", "outside 2000-01-01 to 2100-01-01 UTC"),
])
def test_bad_start_time_is_one_message_naming_file_and_option(tmp_path, start, expected):
    path = write(tmp_path / "v.csv", VIDUR)
    with pytest.raises(ValueError) as info:
        read_trace(path, start_time=start)
    assert str(info.value).startswith(f"{path}: start_time={start!r}: {expected}")


@pytest.mark.parametrize(("columns", "message"), [
    ({"arrival": 1, "prompt_tokens": "in", "output_tokens": "out"}, "columns=: 'arrival' is mapped to 1; expected"),
    ({"arrival": "ts", "prompt_tokens": None, "output_tokens": "out"}, "'prompt_tokens' is mapped to None; expected"),
    # a misspelt key was told only the list of keys, as if there were no mapping
    ({"arival": "ts", "prompt_tokens": "in", "output_tokens": "out"},
     "; it lacks 'arrival' and has 'arival' (did you mean 'arrival'?), not a field"),
    ({"prompt_tokens": "in", "output_tokens": "out"}, "'observed_ttft_s', 'observed_e2e_s']); it lacks 'arrival'"),
])
def test_bad_column_mapping_is_one_message_naming_the_option(tmp_path, columns, message):
    path = write(tmp_path / "g.csv", "ts,in,out\n0,5,5\n")
    with pytest.raises(ValueError) as info:
        read_trace(path, format="csv", time_unit="s", columns=columns)
    assert message in str(info.value)


def test_jsonl_nan_and_infinity_get_their_own_reason(tmp_path):
    path = write(tmp_path / "m.jsonl", MOONCAKE_LINE
                 + '{"timestamp": NaN, "input_length": 600, "output_length": 3}\n'
                 + '{"timestamp": 5, "input_length": 600, "output_length": -Infinity}\n'
                 + '{"timestamp": 6, "input_length": 600, "output_len\n')
    assert read_trace(path).rejected.select("line", "reason").rows() == [
        (2, "a NaN or Infinity value: non-finite numbers are not JSON and are not accepted"),
        (3, "a NaN or Infinity value: non-finite numbers are not JSON and are not accepted"),
        (4, "not a JSON object (a torn or corrupt line)")]


def test_jsonl_nan_on_the_first_line_is_a_rejected_row_not_a_failed_file(tmp_path):
    path = write(tmp_path / "m.jsonl", '{"timestamp": NaN, "input_length": 600, "output_length": 3}\n'
                 + MOONCAKE_LINE)
    result = read_trace(path, format="mooncake")
    assert result.rows_read == 2 and result.rows.height == 1
    assert result.rejected.select("line", "reason").rows() == [
        (1, "a NaN or Infinity value: non-finite numbers are not JSON and are not accepted")]


def test_a_boolean_is_not_a_token_count(tmp_path):
    path = write(tmp_path / "l.json", json.dumps([{"number_input_tokens": True, "number_output_tokens": 10,
                                                   "end_to_end_latency_s": 2.0}]))
    result = read_trace(path)
    assert result.rows.height == 0
    assert result.rejected["reason"].to_list() == [
        "number_input_tokens is not a whole number in range: 'true'"]


# ---- whole-JSON formats: true/false among numbers, and NaN/Infinity, are the row's fault ----------

NOT_LATENCY = "end_to_end_latency_s is not a latency in seconds (0 to 86400) to rebuild arrivals from"
NOT_ARRIVAL = "record_time - total_chunk_time is not a number of seconds"


@pytest.mark.parametrize(("reader", "field", "value", "reason"), [
    (llmperf, "number_input_tokens", True, "number_input_tokens is not a whole number in range: 'true'"),
    (llmperf, "number_output_tokens", False, "number_output_tokens is not a whole number in range: 'false'"),
    (llmperf, "end_to_end_latency_s", True, f"{NOT_LATENCY}: 'true'"),
    (llmperf, "ttft_s", False, "ttft_s is not a number: 'false'"),
    (vllm, "in_len", True, "in_len is not a whole number in range: 'true'"),
    (vllm, "out_len", False, "out_len / out_len_per_token is not a whole number in range: 'false'"),
    (vllm, "first_chunk_time", False, "first_chunk_time is not a number: 'false'"),
    (vllm, "total_chunk_time", True, f"{NOT_ARRIVAL}: '10.0 - true'"),
    (vllm, "record_time", True, f"{NOT_ARRIVAL}: 'true - 1.0'"),
])
def test_a_boolean_among_numbers_is_a_rejected_row_not_a_one(tmp_path, reader, field, value, reason):
    """pl.read_json alone reads `true` among numbers as 1 (a one-token prompt, a 1-second latency)."""
    base = LLMPERF_ROW if reader is llmperf else VLLM_ROW
    result = reader(tmp_path, [base, {**base, field: value}])
    assert (result.rows_read, result.rows.height, result.rejected.height) == (2, 1, 1)
    assert result.rejected.select("line", "reason").rows() == [(2, reason)]
    assert result.requests.drop("request_id").equals(reader(tmp_path, [base]).requests.drop("request_id"))


@pytest.mark.parametrize(("reader", "field", "value", "reason"), [
    (llmperf, "number_input_tokens", float("nan"), "number_input_tokens is not a whole number in range: 'NaN'"),
    (llmperf, "number_output_tokens", float("inf"), "number_output_tokens is not a whole number in range: 'Infinity'"),
    (llmperf, "end_to_end_latency_s", float("-inf"), f"{NOT_LATENCY}: '-Infinity'"),
    (llmperf, "ttft_s", float("nan"), "ttft_s is NaN s: not a latency in seconds (0 to 86400)"),
    (vllm, "in_len", float("inf"), "in_len is not a whole number in range: 'Infinity'"),
    (vllm, "out_len", float("nan"), "out_len / out_len_per_token is not a whole number in range: 'NaN'"),
    (vllm, "first_chunk_time", float("inf"), "first_chunk_time is inf s: not a latency in seconds (0 to 86400)"),
    (vllm, "total_chunk_time", float("nan"), f"{NOT_ARRIVAL}: '10.0 - NaN'"),
    (vllm, "record_time", float("-inf"), f"{NOT_ARRIVAL}: '-Infinity - 1.0'"),
])
def test_nan_or_infinity_rejects_its_row_not_the_file(tmp_path, reader, field, value, reason):
    """json.dumps writes NaN / Infinity for non-finite floats; they are not JSON, and pl.read_json
    refuses the whole document for one of them."""
    base = LLMPERF_ROW if reader is llmperf else VLLM_ROW
    result = reader(tmp_path, [base, {**base, field: value}])
    assert (result.rows_read, result.rows.height, result.rejected.height) == (2, 1, 1)
    assert result.rejected.select("line", "reason").rows() == [(2, reason)]


def test_a_keyed_log_numbers_its_rows_in_file_order_beyond_32_keys(tmp_path):
    """pl.read_json keeps an object's key order up to 32 keys and scrambles it beyond (the public
    detail logs have 500): rows are numbered in the file's order, the same on every run."""
    keys = [str(k) for k in (7, 3, 91, 0, 12, *range(100, 140))]   # not sorted, not numeric order
    entries = {key: {**VLLM_ROW, "event_id": int(key), "in_len": 100 + i} for i, key in enumerate(keys)}
    path = write(tmp_path / "detail_log.json", json.dumps(entries))
    result = read_trace(path, out_len_per_token=6.5)
    assert result.rows.sort("line")["prompt_tokens"].to_list() == [100 + i for i in range(len(keys))]


def test_nan_in_a_field_no_reader_uses_leaves_the_row_alone(tmp_path):
    result = llmperf(tmp_path, [LLMPERF_ROW, {**LLMPERF_ROW, "inter_token_latency_s": float("nan")}])
    assert (result.rows_read, result.rows.height, result.rejected.height) == (2, 2, 0)


def test_true_and_nan_inside_a_text_field_are_text(tmp_path):
    """Only bare values change: a string that says NaN or true (an error message, a generated
    text, an escaped quote before them) is read as written."""
    message = 'got NaN, true, \\"Infinity\\"'
    result = llmperf(tmp_path, [LLMPERF_ROW, {**LLMPERF_ROW, "error_code": -100, "error_msg": message,
                                              "GEN_TEXT": ': NaN, "x": true}'}], failed="reject")
    assert result.rejected.select("line", "reason").rows() == [
        (2, f"the request failed (error_code -100: {message}); option failed='reject'")]
    assert json.loads(result.rejected["raw"][0])["GEN_TEXT"] == ': NaN, "x": true}'


def test_whole_json_documents_are_read_as_utf8_with_or_without_a_bom(tmp_path):
    body = json.dumps([LLMPERF_ROW, {**LLMPERF_ROW, "error_msg": "x" * 70_000 + "é"}], ensure_ascii=False)
    assert read_trace(write(tmp_path / "bom.json", b"\xef\xbb\xbf" + body.encode())).rows.height == 2
    path = write(tmp_path / "latin1.json", body.encode("latin-1"))   # past the 64 KiB head_text checks
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: not UTF-8 text (byte {body.encode('latin-1').index(0xe9)})")
    bom = write(tmp_path / "bom_latin1.json", b"\xef\xbb\xbf" + body.encode("latin-1"))
    with pytest.raises(TraceFormatError, match=rf"not UTF-8 text \(byte {3 + body.encode('latin-1').index(0xe9)}\)"):
        read_trace(bom)   # the byte is counted from the start of the file, its BOM included


@pytest.mark.parametrize("name, header, row", [
    ("late.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "2023-11-16 18:15:46.6805900,{n},10\n"),
    ("late.jsonl", "", '{{"timestamp": {n}, "input_length": 10, "output_length": 5, "hash_ids": [1]}}\n'),
])
def test_a_line_log_not_utf8_past_its_head_names_the_byte_and_line(tmp_path, name, header, row):
    """Past the 64 KiB head_text checks, Polars' scan fails with 'invalid utf-8 sequence' and no
    place: the message said only that, for a file of any size; it names the byte and line."""
    lines = [header] + [row.format(n=n + 1) for n in range(3000)]
    lines[2500] = lines[2500].replace("10", "1\xe9", 1)
    body = "".join(lines).encode("latin-1")
    path = write(tmp_path / name, gzip.compress(body))   # offsets are of the decompressed text
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: not UTF-8 text (byte {body.index(0xe9)},"
                                      f" line {2500 + (header != '')}); expected ")


def test_invalid_utf8_at_reads_across_a_character_cut_at_its_chunk_edge(tmp_path):
    """A valid two-byte character straddling the 1 MiB read is not the invalid byte."""
    body = b"a\n" * ((1 << 19) - 1) + b"x\xc3\xa9\n" + b"b\xff\n"   # \xc3 is byte 1 MiB - 1
    assert invalid_utf8_at(write(tmp_path / "edge.csv", body)) == (body.index(b"\xff"), (1 << 19) + 1)
    assert invalid_utf8_at(write(tmp_path / "cut.csv", body[:-3] + b"\xc3")) == (len(body) - 3, (1 << 19) + 1)
    assert invalid_utf8_at(write(tmp_path / "fine.csv", body[:-3])) is None


def test_a_key_written_twice_in_a_keyed_log_fails_the_file_naming_it(tmp_path):
    """pl.read_json keeps the last of two entries with one key: the first would vanish uncounted."""
    entry = json.dumps(VLLM_ROW)
    path = write(tmp_path / "detail_log.json", f'{{"1": {entry}, "2": {entry}, "1": {entry}}}')
    with pytest.raises(TraceFormatError) as info:
        read_trace(path, out_len_per_token=6.5)
    assert str(info.value).startswith(f"{path}: key(s) ['1'] appear more than once")


def test_a_broken_document_is_located_by_line_and_column_as_written(tmp_path):
    """Bare words are quoted before Polars reads the document; the position in the message is the
    file's own, not the rewritten text's."""
    path = write(tmp_path / "llmperf.json", '[{"number_input_tokens": NaN, "ttft_s": true,\n'
                                            '  "number_output_tokens": 2 "end_to_end_latency_s": 1.0}]')
    with pytest.raises(TraceFormatError) as info:
        read_trace(path, format="llmperf")
    assert "(Expecting ',' delimiter at line 2 column 29)" in str(info.value)


# ---- whole-valued decimals are the counts they say, in every format alike ----------------------

def test_a_whole_valued_decimal_is_the_count_it_says_in_every_format(tmp_path):
    """10.0 and 1e3 are whole numbers (pandas writes an int column with gaps as floats); 10.5 is
    rejected, never truncated. Whole-JSON logs already read 100.0 as 100; CSV and JSONL refused it."""
    csv = read_trace(azure(tmp_path, "a.csv", ["2023-11-16 18:17:03.0000000,10.0,1e3",
                                               "2023-11-16 18:17:04.0000000,10.5,5"]))
    assert csv.requests.select("prompt_tokens", "output_tokens").rows() == [(10, 1000)]
    assert csv.rejected["reason"].to_list() == ["ContextTokens is not a whole number in range: '10.5'"]
    jsonl = read_trace(write(tmp_path / "m.jsonl", '{"timestamp": 0, "input_length": 600.0, "output_length": 3}\n'
                             '{"timestamp": 1, "input_length": 6.5, "output_length": 3}\n'), format="mooncake")
    assert jsonl.requests["prompt_tokens"].to_list() == [600]
    assert jsonl.rejected["reason"].to_list() == ["input_length is not a whole number in range: '6.5'"]
    pl.DataFrame({"ts": [1.7e9, 1.7e9 + 1, 1.7e9 + 2], "in": [10.0, 5.5, float("nan")], "out": [5, 5, 5]}
                 ).write_parquet(tmp_path / "g.parquet")
    parquet = read_trace(tmp_path / "g.parquet", format="parquet", time_unit="unix_s",
                         columns={"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out"})
    assert parquet.requests["prompt_tokens"].to_list() == [10]
    assert parquet.rejected["reason"].to_list() == ["in is not a whole number in range: '5.5'",
                                                   "in is not a whole number in range: 'NaN'"]


def test_a_parquet_row_with_a_nan_is_not_a_duplicate_of_one_with_a_null(tmp_path):
    """A Parquet row's raw text is the row as JSON, which has no NaN: json_encode wrote NaN as
    null, so a row whose latency is NaN (rejected) and a row whose latency is null (none
    observed, kept) had the same raw text: the second was counted an exact duplicate, and
    rejected as one under duplicates='reject', and the first's reason quoted a NaN its raw
    text did not show."""
    pl.DataFrame({"ts": [0.0, 0.0], "in": [10, 10], "out": [5, 5], "e2e": [float("nan"), None]}
                 ).write_parquet(tmp_path / "n.parquet")
    result = read_trace(tmp_path / "n.parquet", format="parquet", time_unit="s", duplicates="reject",
                        columns={"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out",
                                 "observed_e2e_s": "e2e"})
    assert result.counts["exact_duplicates"] == 0
    assert result.requests.select("arrival_s", "observed_e2e_s").rows() == [(0.0, None)]
    assert result.rejected.select("line", "raw", "reason").rows() == [
        (1, '{"ts":0.0,"in":10,"out":5,"e2e":"NaN"}', "e2e is NaN s: not a latency in seconds (0 to 86400)")]


def test_a_list_or_object_where_a_value_belongs_fails_its_file_with_one_message(tmp_path):
    """A Parquet column of lists mapped as a count or an arrival (token ids, say), an LLMPerf
    error_code written as a list, a BurstGPT-vLLM field written as an object: each raised a Polars
    error read_trace did not catch (InvalidOperationError, SchemaError), a traceback that failed
    the whole folder's ingest."""
    pl.DataFrame({"ts": [0.0, 1.0], "ids": [[1, 2], [3]], "out": [5, 5]}).write_parquet(tmp_path / "ids.parquet")
    with pytest.raises(TraceFormatError) as info:
        read_trace(tmp_path / "ids.parquet", format="parquet", time_unit="s",
                   columns={"arrival": "ts", "prompt_tokens": "ids", "output_tokens": "out"})
    assert str(info.value) == (f"{tmp_path / 'ids.parquet'}: column 'ids' is List(Int64), not one value per"
                               f" row; expected a parquet file with the mapped columns ['ids', 'out', 'ts']")
    listed = write(tmp_path / "listed.json", json.dumps([LLMPERF_ROW, {**LLMPERF_ROW, "error_code": [429]}]))
    vllm = write(tmp_path / "vllm.json", json.dumps({"0": VLLM_ROW, "1": {**VLLM_ROW, "event_id": 1, "in_len": {"n": 5}}}))
    for path, options in ((listed, {}), (vllm, {"out_len_per_token": 6.5})):
        with pytest.raises(TraceFormatError) as info:
            read_trace(path, **options)
        text = str(info.value)
        assert text.startswith(f"{path}: could not be read (") and "; expected " in text and "\n" not in text


def test_jsonl_logs_joined_with_their_boms_keep_every_row(tmp_path):
    """`cat a.jsonl b.jsonl` of two logs saved with a UTF-8 BOM puts b's BOM at the start of a
    line inside the file: that row, a whole JSON object, was rejected as "not a JSON object (a
    torn or corrupt line)". A BOM is dropped at the start of every line, as it is at the
    start of the file."""
    row = '{{"timestamp": {}, "input_length": 600, "output_length": 5}}\n'
    path = write(tmp_path / "joined.jsonl", b"\xef\xbb\xbf" + row.format(0).encode()
                 + b"\xef\xbb\xbf" + row.format(10).encode())
    result = read_trace(path)
    assert result.rejected.height == 0 and result.requests["arrival_s"].to_list() == [0.0, 0.01]


def test_a_folder_given_as_a_trace_file_is_named_as_a_folder(tmp_path):
    """read_trace on a folder said "no such file", which it is not."""
    with pytest.raises(TraceFormatError, match="is a folder: expected one trace file"):
        read_trace(tmp_path)
    with pytest.raises(TraceFormatError, match="no such file"):
        read_trace(tmp_path / "absent.csv")


def test_quoted_csv_fields_are_read_without_their_quotes(tmp_path):
    """A BurstGPT log saved by a spreadsheet quotes text fields and maybe its header: the model
    was ingested as '"ChatGPT"', quotes and all, and a quoted header was not recognised. A
    quoted field holding a comma cannot be split as one field: its row is rejected, saying so."""
    path = write(tmp_path / "burst.csv",
                 '"Timestamp"," Model ","Request tokens","Response tokens","Total tokens","Log Type"\n'
                 '5,"ChatGPT","472",18,490,"Conversation log"\n'
                 '6,"Say ""hi""",10,2,12,API log\n'
                 '7,GPT-4,100,20,120,"Conversation, log"\n')
    result = read_trace(path)
    assert result.requests.select("model", "tenant", "prompt_tokens").rows() == [
        ("ChatGPT", "Conversation log", 472), ('Say "hi"', "API log", 10)]
    assert result.rejected.select("line", "reason").rows() == [
        (4, "expected 6 comma-separated fields, got 7 (a comma inside a quoted field is not read as text)")]


def test_a_short_row_of_a_quoted_csv_is_not_blamed_on_a_quoted_comma(tmp_path):
    """A comma inside quotes makes a row longer, never shorter: a quoted log's row cut short (the
    last line of an interrupted upload) was rejected as 'got 3 (a comma inside a quoted field is
    not read as text)', pointing at a comma that is not there."""
    path = write(tmp_path / "burst.csv",
                 '"Timestamp"," Model ","Request tokens","Response tokens","Total tokens","Log Type"\n'
                 '5,"ChatGPT",472,18,490,"Conversation log"\n'
                 '6,"ChatGPT",472\n')
    assert read_trace(path).rejected.select("line", "reason").rows() == [
        (3, "expected 6 comma-separated fields, got 3")]


def test_each_csv_field_is_stripped_once():
    """split_fields strips a field, then unquotes it: unquoting reads the field six times, and
    when it was handed the strip itself Polars ran the strip six times per field (Azure's 27M-row
    week went from 9.5 s to 11.5 s of read_trace). The plan holds one strip per wanted field."""
    rows = pl.LazyFrame({"raw": ['1,"a",3']})
    plan = split_fields(rows, ["a", "b", "c"], {"a": "x", "b": "y"}).explain()
    assert plan.count("strip_chars") == 2


@pytest.mark.parametrize("damage", [
    lambda line: line[:-2] + "\x00" + line[-2:],   # inside the last field: '...,1\x000' read as 1
    lambda line: "\x00" * len(line),               # a line of NULs, as a crash leaves: read as blank
])
def test_a_nul_byte_past_the_head_fails_the_file_naming_byte_and_line(tmp_path, damage):
    """Past the 64 KiB head_text checks, read_lines split a line at a NUL and kept what came
    before it: a row read with a cut token count, or a NUL-filled row dropped uncounted."""
    lines = [f"{HEADER}\n"] + [f"2023-11-16 18:15:{n % 60:02d}.6805900,{n + 1},10\n" for n in range(3000)]
    lines[2500] = damage(lines[2500][:-1]) + "\n"
    body = "".join(lines).encode()
    path = write(tmp_path / "nul.csv", body)
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: binary data, not a text log: a NUL byte at byte"
                                      f" {body.index(0)}, line 2501 (")


def test_mooncake_hashes_beyond_the_prompts_blocks_are_a_rejected_row_naming_block_tokens(tmp_path):
    """A log of 16-token blocks in float seconds (Alibaba Bailian's release of the format) is
    detected as Mooncake: read at Mooncake's 512 tokens a block, each of a 100-token prompt's 7
    hashes was credited as 512 cached tokens, without a word. A row with more hashes than its
    prompt fills blocks is rejected, naming the option; with block_tokens=16 it reads."""
    path = write(tmp_path / "bailian.jsonl",
                 '{"timestamp": 1.75, "input_length": 100, "output_length": 10, "hash_ids": [1, 2, 3, 4, 5, 6, 7]}\n'
                 '{"timestamp": 2.5, "input_length": 600, "output_length": 3, "hash_ids": [8, 9]}\n')
    result = read_trace(path)
    assert result.format == "mooncake" and result.rows.height == 1
    assert result.rejected.select("line", "reason").rows() == [
        (1, "hash_ids holds 7 blocks, more than the 1 that input_length 100 fills at block_tokens=512:"
            " is block_tokens right? (Mooncake: 512; logs of 16-token blocks need block_tokens=16)")]
    right = read_trace(path, time_unit="s", block_tokens=16)
    assert right.rows.height == 2 and right.rows["arrival_s"].to_list() == [0.0, 0.75]


@pytest.mark.parametrize(("name", "content", "options", "quoted"), [
    ("azure.csv", f"{HEADER},Region\r\n2023-11-16 18:17:03.9799600,4808,10,eu\r\n", {},
     f"header '{HEADER},Region' is not an Azure LLM trace CSV"),
    ("burst.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Region\n"
                  "5,ChatGPT,472,18,490,Conversation log,eu\n", {},
     "header 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Region' is not"),
    ("vidur.csv", "Arrived_At,Num_Prefill_Tokens\n0.5,100\n", {"format": "vidur"},
     "header 'Arrived_At,Num_Prefill_Tokens' is not a Vidur"),
    ("own.csv", "TS,In,Out\n0,100,10\n",
     {"format": "csv", "time_unit": "s", "columns": {"arrival": "TS", "prompt_tokens": "Inn", "output_tokens": "Out"}},
     "no column(s) ['Inn'] in header 'TS,In,Out'"),
])
def test_a_refused_csv_header_is_quoted_as_the_file_writes_it(tmp_path, name, content, options, quoted):
    """A header a reader refuses was quoted lower-cased ('timestamp,contexttokens,...,region'),
    as the readers match it, not as the file holds it: a user searching the file for it found
    nothing. The message quotes the file's line, and a generic log's missing column as mapped."""
    path = write(tmp_path / name, content)
    with pytest.raises(TraceFormatError) as info:
        read_trace(path, **options)
    assert f"{path}: {quoted}" in str(info.value)
