"""Every public request log: exact row counts, and a documented reason for each rejected row.

The excerpts in tests/fixtures/public/ always run; the full files of ../shared/traces/ (see its
README) run when that folder is present (FLEETSPEND_PUBLIC_TRACES moves it).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.formats import FORMATS, TraceFormatError, read_trace
from pipelines.formats.common import REJECTED_SCHEMA, REQUESTS_SCHEMA
from tests.public_traces import SHARED

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"public traces not present at {SHARED}")


def check(result, read, accepted, fmt):
    assert result.format == fmt
    assert (result.rows_read, result.requests.height, result.rejected.height) == (read, accepted, read - accepted)
    assert result.requests.schema == pl.Schema(REQUESTS_SCHEMA)
    assert result.rejected.schema == pl.Schema(REJECTED_SCHEMA)
    r = result.requests
    if r.height:
        assert r["arrival_s"][0] == 0.0 and r["arrival_s"].is_sorted()
        assert r["request_id"].n_unique() == r.height
    return result


def test_formats_listed():
    assert set(FORMATS) == {"azure-llm", "burstgpt", "burstgpt-vllm", "mooncake", "vidur", "llmperf", "aibrix",
                            "openai-usage", "csv", "jsonl", "parquet"}


# ---- excerpts copied into the repository -----------------------------------------------------------

def test_mooncake_excerpt_keeps_hashes_block_size_and_the_duplicate():
    result = check(read_trace(PUBLIC / "mooncake_conversation.excerpt.jsonl"), 14, 14, "mooncake")
    assert result.prefix_block_tokens == 512 and result.file_row()["prefix_block_tokens"] == 512
    assert result.counts["exact_duplicates"] == 1
    first = result.requests.row(0, named=True)
    assert (first["prompt_tokens"], first["output_tokens"]) == (6758, 500)
    assert first["prefix_hashes"] == list(range(14))
    r = result.requests.with_columns(blocks=pl.col("prefix_hashes").list.len())
    assert (r["blocks"] == (r["prompt_tokens"] + 511) // 512).all()
    assert r["arrival_s"].max() == pytest.approx(2369.999)   # ms -> s
    rejecting = read_trace(PUBLIC / "mooncake_conversation.excerpt.jsonl", duplicates="reject")
    assert rejecting.rejected["reason"].to_list() == ["exact duplicate of an earlier line; option duplicates='reject'"]
    assert rejecting.rejected["line"].to_list() == [13]


def test_aibrix_rejects_rows_without_start_time_and_sorts_by_arrival():
    result = check(read_trace(PUBLIC / "aibrix_output.jsonl"), 54, 52, "aibrix")
    assert result.rejected["line"].to_list() == [1, 2]
    assert (result.rejected["reason"] == "start_time is not a number of seconds: 'missing'").all()
    r = result.requests
    assert r["arrival_ts"].is_null().all()
    assert r["observed_e2e_s"].is_not_null().all() and r["observed_ttft_s"].is_not_null().all()
    assert (r["observed_ttft_s"] <= r["observed_e2e_s"]).all()
    assert r.height == 52 and r["arrival_s"].is_sorted()
    start = dt.datetime(2025, 2, 1, tzinfo=dt.timezone.utc)
    with_start = read_trace(PUBLIC / "aibrix_output.jsonl", start_time=start).requests
    assert with_start["arrival_ts"][0] == start


def test_llmperf_rate_limited_rows_are_rejected():
    result = check(read_trace(PUBLIC / "lepton_7b.json", concurrency=5), 150, 20, "llmperf")
    assert result.counts["failed_rows"] == 130
    assert result.rejected["reason"].str.starts_with("the request failed (error_code 429").all()
    assert result.rejected["reason"].str.ends_with("and never ran: nothing to replay").all()


def test_llmperf_failure_reason_quotes_the_error_message_only_when_there_is_one(tmp_path):
    """Lepton's 429 rows have an empty error_msg: no 'error_code 429: )' as if a message were lost;
    Perplexity's JSON error body (its 429 rows in ray-project/llmperf-leaderboard
    raw_data/individual/perplexity_70b.json, Apache-2.0) is cut with '...', not silently mid-JSON."""
    lepton = read_trace(PUBLIC / "lepton_7b.json", concurrency=5).rejected["reason"]
    assert (lepton == "the request failed (error_code 429) and never ran: nothing to replay").all()
    body = ('{"error":{"message":"Token rate limit exceeded, please try again later.",'
            '"type":"token_rate_limit_exceeded","code":429}}')
    record = {"error_code": 429, "error_msg": body, "inter_token_latency_s": 0, "ttft_s": 0,
              "end_to_end_latency_s": 0, "number_output_tokens": 1, "number_input_tokens": 550}
    log = tmp_path / "perplexity.json"
    log.write_text(json.dumps([record]))
    (reason,) = read_trace(log).rejected["reason"].to_list()
    assert reason == f"the request failed (error_code 429: {body[:80]}...) and never ran: nothing to replay"


def test_llmperf_bedrock_short_outputs_follow_the_failed_policy():
    kept = check(read_trace(PUBLIC / "bedrock_13b.json", concurrency=5), 150, 150, "llmperf")
    assert kept.counts["failed_rows"] == 97
    rejected = read_trace(PUBLIC / "bedrock_13b.json", concurrency=5, failed="reject")
    assert rejected.rejected.height == 97
    assert rejected.rejected["reason"].str.contains("error_code -100: Output too few tokens").all()


def test_llmperf_closed_loop_arrivals():
    """Client i mod c sends its next request when its previous one ends."""
    r = read_trace(PUBLIC / "bedrock_13b.json", concurrency=5).requests.sort("request_id")
    one = read_trace(PUBLIC / "bedrock_13b.json", concurrency=1).requests
    e2e = one.sort("arrival_s")["observed_e2e_s"]
    assert one["arrival_s"][-1] == pytest.approx(e2e[:-1].sum())
    assert r["arrival_s"].max() < one["arrival_s"].max() / 2


def test_vidur_excerpt_matches_the_azure_sample():
    vidur = check(read_trace(PUBLIC / "vidur_splitwise_code.excerpt.csv"), 20, 20, "vidur").requests
    azure = read_trace(ROOT / "data" / "samples" / "AzureLLMInferenceTrace_code.csv").requests.head(20)
    assert vidur["prompt_tokens"].to_list() == azure["prompt_tokens"].to_list()
    assert vidur["arrival_s"].to_list() == pytest.approx(azure["arrival_s"].to_list(), abs=1e-6)


def test_generic_csv_mapping_on_splitwise_sim_trace():
    result = read_trace(PUBLIC / "splitwise_sim_test_trace.csv", format="csv", time_unit="s",
                        columns={"arrival": "arrival_timestamp", "prompt_tokens": "prompt_size",
                                 "output_tokens": "token_size"})
    check(result, 3, 3, "csv")
    assert_frame_equal(result.requests.select("arrival_s", "prompt_tokens", "output_tokens"),
                       pl.DataFrame({"arrival_s": [0.0, 2.0, 3.0], "prompt_tokens": [4096, 2048, 2048],
                                     "output_tokens": [32, 8, 16]}))
    with pytest.raises(TraceFormatError, match="cannot tell the log format"):
        read_trace(PUBLIC / "splitwise_sim_test_trace.csv")


# ---- the full public files -------------------------------------------------------------------------

EXPECTED = [
    # (file, format, rows read, accepted, options)
    ("azure-llm-2023/AzureLLMInferenceTrace_code.csv", "azure-llm", 8819, 8819, {}),
    ("azure-llm-2023/AzureLLMInferenceTrace_conv.csv", "azure-llm", 19366, 19366, {}),
    ("azure-llm-2024/AzureLLMInferenceTrace_code_1week.notebook_excerpt.csv", "azure-llm", 10, 10, {}),
    ("azure-llm-2024/AzureLLMInferenceTrace_conv_1week.notebook_excerpt.csv", "azure-llm", 10, 10, {}),
    ("azure-lmm-2025/AzureLMMInferenceTrace_multimodal.notebook_excerpt.csv", "azure-llm", 10, 10, {}),
    ("mooncake/conversation_trace.jsonl", "mooncake", 12031, 12031, {}),
    ("mooncake/synthetic_trace.jsonl", "mooncake", 3993, 3993, {}),
    ("burstgpt/burstgpt_sample.csv", "burstgpt", 54, 51, {}),
    ("aibrix-client-output/output.jsonl", "aibrix", 54, 52, {}),
    ("burstgpt-vllm-replay-logs/detail_log_scale100_prompt500.json", "burstgpt-vllm", 500, 500,
     {"out_len_per_token": 6.56}),
    ("burstgpt-vllm-replay-logs/detail_log_scale1000_prompt500.json", "burstgpt-vllm", 500, 500,
     {"out_len_per_token": 6.48}),
    ("vidur-processed-traces/splitwise_code.csv", "vidur", 8819, 8819, {}),
    ("vidur-processed-traces/splitwise_conv.csv", "vidur", 19366, 19366, {}),
    *[(f"llmperf-leaderboard/individual/{name}.json", "llmperf", read, accepted, {"concurrency": 5})
      for name, read, accepted in [
          ("anyscale_13b", 150, 150), ("anyscale_70b", 150, 150), ("anyscale_7b", 150, 150),
          ("bedrock_13b", 150, 150), ("bedrock_70b", 150, 150), ("fireworks_13b", 150, 150),
          ("fireworks_70b", 150, 150), ("fireworks_7b", 150, 150), ("groq_70b", 150, 150),
          ("lepton_13b", 150, 20), ("lepton_70b", 150, 20), ("lepton_7b", 150, 20),
          ("perplexity_70b", 150, 148), ("replicate_13b", 150, 150), ("replicate_70b", 145, 145),
          ("replicate_7b", 150, 150), ("together_13b", 150, 149), ("together_70b", 150, 150),
          ("together_7b", 150, 150)]],
]


@needs_shared
@pytest.mark.parametrize(("name", "fmt", "read", "accepted", "options"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_public_request_log(name, fmt, read, accepted, options):
    check(read_trace(SHARED / name, **options), read, accepted, fmt)


@needs_shared
def test_every_public_request_log_is_covered():
    """A request log added to the shared folder must get an expected count here."""
    logs = {str(p.relative_to(SHARED)) for p in SHARED.rglob("*") if p.is_file() and p.suffix != ".md"}
    not_request_logs = {p for p in logs if p.startswith(("servegen/", "etalon-processed-traces/",
                                                         "llmperf-leaderboard/summary/",
                                                         "burstgpt-vllm-replay-logs/vllm_log_"))
                        or p in {"splitwise-sim/perf_model.csv", "splitwise-sim/test_trace.csv",
                                 "burstgpt-vllm-replay-logs/server_log.json",
                                 "vidur-processed-traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"}}
    assert logs - not_request_logs == {e[0] for e in EXPECTED}


@needs_shared
def test_burstgpt_sample_rejects_the_zero_rows_with_reasons():
    result = read_trace(SHARED / "burstgpt/burstgpt_sample.csv")
    assert result.counts == {"exact_duplicates": 0, "zero_output_rows": 3, "failed_rows": 3}
    reasons = result.rejected.sort("line")["reason"].to_list()
    assert result.rejected.sort("line")["line"].to_list() == [22, 37, 50]
    assert reasons == ["Request tokens is 0: a request needs at least one prompt token"] * 2 + [
        "Response tokens is 0: no answer to replay (option zero_output='one' replays it as a one-token answer)"]
    r = result.requests
    assert set(r["model"].unique()) == {"ChatGPT", "GPT-4"}
    assert set(r["tenant"].unique()) == {"Conversation log", "API log"}
    kept = read_trace(SHARED / "burstgpt/burstgpt_sample.csv", zero_output="one")
    assert kept.rejected.height == 2 and kept.requests.height == 52
    assert kept.requests.filter(pl.col("request_id").str.ends_with(":50"))["output_tokens"].to_list() == [1]


@needs_shared
@pytest.mark.parametrize("name", [
    "etalon-processed-traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
    "vidur-processed-traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
    "servegen/reason/deepseek-r1/chunk-1-trace.csv",
    "splitwise-sim/perf_model.csv",
    "llmperf-leaderboard/summary/groq_70b.json",
    "burstgpt-vllm-replay-logs/server_log.json",
    "burstgpt-vllm-replay-logs/vllm_log_scale100_prompt500.csv",
])
def test_non_request_logs_are_refused_with_a_message(name):
    with pytest.raises(TraceFormatError) as info:
        read_trace(SHARED / name)
    assert str(SHARED / name) in str(info.value)


@needs_shared
def test_burstgpt_vllm_detail_log_matches_the_calibration_fixture():
    """Same numbers as tests/fixtures/observed/ (converted separately, README there)."""
    path = SHARED / "burstgpt-vllm-replay-logs/detail_log_scale100_prompt500.json"
    with pytest.raises(ValueError, match="needs out_len_per_token="):
        read_trace(path)
    r = read_trace(path, out_len_per_token=6.56).requests.sort("arrival_s")
    other = pl.read_csv(ROOT / "tests/fixtures/observed/burstgpt_vllm_llama32_1b_scale100.csv").sort("arrival_s")
    for column in ("arrival_s", "observed_ttft_s", "observed_e2e_s"):
        assert r[column].to_list() == pytest.approx(other[column].to_list(), abs=1e-6)
    assert r["prompt_tokens"].to_list() == other["prompt_tokens"].to_list()
    assert (r["output_tokens"] - other["output_tokens"]).abs().max() <= 1   # their ratio is 6.56 rounded
