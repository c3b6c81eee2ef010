"""The roofline against published measurements (bench/validation/published_measurements.csv),
with the catalog's default factors: the figures docs/physics.md reports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipelines.roofline import load_catalog
from pipelines.roofline.caveats import CAVEATS, caveats
from pipelines.roofline.frontend import FRONTEND_S
from pipelines.roofline.step import graph_batch, step_cost
from pipelines.roofline import validation
from pipelines.roofline.validation import (
    CLOSED_LOOP_ROUNDS,
    METRICS,
    WARM_UP_ROUNDS,
    closed_loop_steady,
    predict,
    read_measurements,
    summary,
    validate,
)

TABLE = Path(__file__).resolve().parents[2] / "bench" / "validation" / "published_measurements.csv"
KV_CAPACITY = TABLE.with_name("trtllm_kv_capacity.csv")
VLLM_KV_CAPACITY = TABLE.with_name("vllm_kv_capacity.csv")
MEDIAN_TTFT = TABLE.with_name("inferencex_median_ttft.csv")


@pytest.fixture(scope="module")
def validated():
    return validate(load_catalog(), read_measurements(TABLE))


@pytest.fixture(scope="module")
def hopper_and_cdna3():
    """The default efficiency factors of Llama-3.1-405B FP8 on 8 x H200 and on 8 x MI300X."""
    catalog = load_catalog()
    return tuple(catalog.build(model="llama-3.1-405b", gpu=gpu, tp=8, weights="fp8").efficiency
                 for gpu in ("h200-sxm", "mi300x"))


def test_table_is_sourced_and_broad(validated):
    assert validated.height >= 40
    assert validated["source"].n_unique() >= 4
    assert validated["url"].str.starts_with("https://").all()
    assert set(validated["metric"]) == set(METRICS)
    assert validated["model"].n_unique() >= 4 and validated["gpu"].n_unique() >= 4


def test_median_errors_are_the_documented_ones(validated):
    """The issue's 10% target holds for TTFT and max-load throughput; time per output token
    misses it (10.7%), and closed-loop throughput (12.2%, no target of the issue's) has its
    median on one of dstack's early-2025 DeepSeek rows, on the rows of the two groups the physics
    does not reach, DeepSeek-V3 under tensor parallelism and MI300X decode batches: every metric
    is within 10% without them. (The figures themselves:
    test_the_documents_state_the_validation_figures.)"""
    medians = dict(summary(validated).select("metric", "median_abs_error").iter_rows())
    assert medians["ttft_s"] < 0.10 and medians["max_throughput_tok_s"] < 0.10
    assert medians["output_tok_s"] < 0.13
    assert medians["tpot_s"] < 0.12
    reached = validated.filter((pl.col("model") != "deepseek-v3") & (pl.col("gpu") != "mi300x"))
    assert summary(reached).filter(pl.col("median_abs_error") > 0.10).height == 0


def _one_line(path: Path) -> str:
    """A document's text with its line breaks and indents folded into single spaces."""
    return " ".join(path.read_text().split())


def test_the_documents_state_the_validation_figures(validated):
    """docs/physics.md §5's results table, bench/README.md's and the README's medians are the
    figures `summary` gives, as they round (the bounds above leave room: TTFT could drift from
    7.2% to 9.9% and the documents would still say 7.2%)."""
    root = TABLE.parents[2]
    physics, readme = _one_line(root / "docs" / "physics.md"), _one_line(root / "README.md")
    bench = _one_line(root / "bench" / "README.md")
    stats = {m: (n, 100 * med, 100 * worst) for m, n, med, worst in summary(validated).iter_rows()}
    labels = {"ttft_s": "TTFT", "tpot_s": "time per output token",
              "max_throughput_tok_s": "max-load throughput",
              "output_tok_s": "output tokens/s at a fixed concurrency"}
    for metric, label in labels.items():
        rows, median, worst = stats[metric]
        assert f"| {label} | {rows} | {median:.1f}% | {worst:.3g}% |" in physics, metric
        assert f"| {label} | {rows} | {median:.1f}% | {worst:.3g}% |" in bench, metric
    median = {m: f"{stats[m][1]:.1f}%" for m in labels}
    assert (f"within a median {median['ttft_s']} (TTFT, client-measured rows including the serving"
            f" front end), {median['tpot_s']} (time per output token), "
            f"{median['max_throughput_tok_s']} (max-load throughput) and {median['output_tok_s']}"
            f" (output tokens/s") in readme
    reached = validated.filter((pl.col("model") != "deepseek-v3") & (pl.col("gpu") != "mi300x"))
    near = {m: f"{100 * med:.1f}%" for m, _, med, _ in summary(reached).iter_rows()}
    assert (f"The other rows outside DeepSeek and MI300X ({reached.height}) are within"
            f" {near['ttft_s']} / {near['tpot_s']} / {near['max_throughput_tok_s']} /"
            f" {near['output_tok_s']}") in readme
    assert (f"the other {reached.height} rows are within {near['ttft_s']} (TTFT), {near['tpot_s']}"
            f" (TPOT), {near['max_throughput_tok_s']} (max-load throughput) and"
            f" {near['output_tok_s']} (closed-loop throughput)") in physics
    assert (f"Without DeepSeek and MI300X ({reached.height} rows; 219 before): TTFT"
            f" {near['ttft_s']}, TPOT {near['tpot_s']}, max-load throughput"
            f" {near['max_throughput_tok_s']}, closed-loop {near['output_tok_s']} median") in bench
    beyond = validated.filter(pl.col("error").abs() > 0.35).height
    assert f"Rows worse than 35%: {beyond} of {validated.height}" in physics


def test_the_documents_state_the_splitwise_decode_rows_after_the_per_sequence_overhead(validated):
    """docs/physics.md section 5 said the per-sequence overhead took SplitwiseSim's batch-1 TPOT
    rows at tp 2-4 from +12..+14% to -6..+1%: they were -6..+1% before it too, the +12..+14%
    being tp 8's batch-1 rows, which it left where they were. The sentence now says each
    group's figures as the validation gives them."""
    physics = _one_line(TABLE.parents[2] / "docs" / "physics.md")
    rows = validated.filter((pl.col("source") == "splitwise-sim") & (pl.col("metric") == "tpot_s"))

    def pct(error: float) -> str:
        return f"{100 * error:+.0f}".replace("-", "\u2212")

    def span(frame: pl.DataFrame) -> str:
        return f"{pct(frame['error'].min())}..{pct(frame['error'].max())}%"

    low_tp = rows.filter(pl.col("tp") <= 4)
    tp8 = rows.filter((pl.col("tp") == 8) & (pl.col("batch") == 1)).sort("gpu")["error"]
    assert (f"at tp 2\u20134: batch 16 from \u221212..\u22129% to {span(low_tp.filter(pl.col('batch') == 16))},"
            f" batch 1 {span(low_tp.filter(pl.col('batch') == 1))} before and after (tp 8's batch-1"
            f" rows {pct(tp8[0])}% / {pct(tp8[1])}%, as before)") in physics


SPLITWISE_RUNS = TABLE.parents[2] / "tests" / "fixtures" / "splitwise" / "perf_model_llama2_70b.csv"
SPLITWISE_HARDWARE = {"a100-80gb-sxm": "a100-80gb", "h100-sxm": "h100-80gb"}


def test_splitwise_decode_rows_are_the_runs_of_their_own_output_length():
    """A SplitwiseSim TPOT row is the median token_time of the perf_model.csv runs of its own
    prompt, batch, tp and output length. The batch-1 rows had been the median of all 45 rows of
    their prompt and batch: 30 of them runs of 256 to 8,192 output tokens, and the 5 runs of
    128 listed three times, so 2 x A100's row said 59.9 ms where its 128-token runs take
    54.9 ms. (A TTFT row may pool output lengths: the prefill does not see them.)"""
    runs = pl.read_csv(SPLITWISE_RUNS).unique()
    rows = read_measurements(TABLE).filter((pl.col("source") == "splitwise-sim")
                                           & (pl.col("metric") == "tpot_s"))
    assert rows.height == 12
    for row in rows.iter_rows(named=True):
        own = runs.filter((pl.col("hardware") == SPLITWISE_HARDWARE[row["gpu"]])
                          & (pl.col("tensor_parallel") == row["tp"])
                          & (pl.col("prompt_size") == row["prompt_tokens"])
                          & (pl.col("batch_size") == row["batch"])
                          & (pl.col("token_size") == row["output_tokens"]))
        assert own.height == 5
        assert row["measured"] == pytest.approx(own["token_time"].median() / 1e3, abs=1e-6), row


# docs/physics.md section 5's per-source medians: (source, metric) -> the words before the figure
PER_SOURCE_WORDS = {
    ("splitwise-sim", "ttft_s"): "SplitwiseSim TTFT", ("splitwise-sim", "tpot_s"): "TPOT",
    ("tensorrt-llm-perf-overview", "max_throughput_tok_s"): "TensorRT-LLM throughput",
    ("tensorrt-llm-perf-overview", "ttft_s"): "online TTFT",
    ("tensorrt-llm-perf-overview", "tpot_s"): "online ITL",
    ("nvidia-nim-benchmarking", "ttft_s"): "NIM TTFT", ("nvidia-nim-benchmarking", "tpot_s"): "ITL",
    ("nvidia-nim-benchmarking", "output_tok_s"): "output tokens/s",
    ("vllm-ci-benchmark", "tpot_s"): "vLLM CI",
    ("iog-foundation-llm-inference-benchmarks", "ttft_s"): "IOG Foundation TTFT",
    ("iog-foundation-llm-inference-benchmarks", "tpot_s"): "TPOT",
    ("oracle-oci-mi300x", "tpot_s"): "Oracle MI300X TPOT",
    ("oracle-oci-mi300x", "max_throughput_tok_s"): "throughput",
    ("rocm-blog-llm-inference-mi300x", "max_throughput_tok_s"): "AMD ROCm blog MI300X throughput",
    ("rocm-blog-llm-inference-mi300x", "tpot_s"): "TPOT",
    ("rocm-vllm-dev-docker-readme", "tpot_s"): "ROCm README TPOT",
    ("qwen2.5-speed-benchmark", "tpot_s"): "Qwen2.5-72B on A100",
    ("france-travail-benchmark-llm-serving", "output_tok_s"): "France Travail output tokens/s",
    ("inferencex", "tpot_s"): "InferenceX DeepSeek-R1 TPOT",
    ("dstack-deepseek-r1-benchmark", "ttft_s"): "dstack DeepSeek-R1 TTFT",
    ("dstack-deepseek-r1-benchmark", "tpot_s"): "TPOT",
    ("dstack-deepseek-r1-benchmark", "output_tok_s"): "output tokens/s",
    ("dstack-deepseek-r1-benchmark", "max_throughput_tok_s"): "max-load throughput",
    ("tensorrt-llm-perf-overview-v0.12", "max_throughput_tok_s"): "v0.12",
    ("tensorrt-llm-perf-overview-v0.15", "max_throughput_tok_s"): "v0.15",
    ("tensorrt-llm-perf-overview-v0.20", "max_throughput_tok_s"): "v0.20",
    ("tensorrt-llm-perf-overview-devguide", "max_throughput_tok_s"): "1.x developer guide",
}


def test_the_documents_state_the_per_source_medians(validated):
    """docs/physics.md section 5's per-source medians are `--sources`' figures, to one decimal
    below 20% and whole above. Dated 2026-12-01, they had kept that day's first figures through
    the day's later changes (v0.20 13.4% where it was 5.2%, NIM TTFT 6.5% where it was 8.8%)."""
    physics = _one_line(TABLE.parents[2] / "docs" / "physics.md")
    start = physics.index("Per source (median |error|, `bench/validation.py --sources`")
    paragraph = physics[start:physics.index("Independence:", start)]
    medians = {(s, m): 100 * med for s, m, _, med, _ in
               summary(validated, by=("source", "metric")).iter_rows()}
    assert set(medians) - set(PER_SOURCE_WORDS) == {
        ("france-travail-benchmark-llm-serving", "ttft_s")}  # one row: its signed error, below
    for key, words in PER_SOURCE_WORDS.items():
        figure = f"{medians[key]:.1f}%" if medians[key] < 20 else f"{medians[key]:.0f}%"
        assert f"{words} {figure}" in paragraph, (key, figure)
    france = validated.filter((pl.col("source") == "france-travail-benchmark-llm-serving")
                              & (pl.col("metric") == "ttft_s"))["error"][0]
    assert f"TTFT {100 * france:+.0f}%".replace("-", "\u2212") in paragraph


def test_summary_per_source_partitions_the_table(validated):
    """The per-source summary covers every row once, and its worst errors are the table's."""
    per_source = summary(validated, by=("source", "metric"))
    assert per_source["rows"].sum() == validated.height
    assert per_source.height == validated.select("source", "metric").n_unique()
    assert per_source["worst_abs_error"].max() == validated["error"].abs().max()


# Rows beyond 35% that docs/physics.md §5 explains one by one, not by a class of deployment:
# (source, model, gpu, tp, metric, prompt, output, concurrency).
EXPLAINED_ROWS = {
    ("splitwise-sim", "llama-2-70b", "a100-80gb-sxm", 8, "ttft_s", 8192, 128, None),
    ("splitwise-sim", "llama-2-70b", "h100-sxm", 8, "ttft_s", 8192, 128, None),
    # TensorRT-LLM v0.12's fp16 70B on 2 x A100: ~5 GB of KV room per GPU, fewer sequences than
    # the model's pool (v0.15 measured the same configuration within -3..-12%)
    ("tensorrt-llm-perf-overview-v0.12", "llama-2-70b", "a100-80gb-sxm", 2,
     "max_throughput_tok_s", 128, 4096, None),
    ("tensorrt-llm-perf-overview-v0.12", "llama-3.1-70b", "a100-80gb-sxm", 2,
     "max_throughput_tok_s", 2048, 2048, None),
    # France Travail's 30 clients of 32-token prompts on vLLM 0.6.3: +39% where the same run's
    # other shapes are +7..+12%; what the short-prompt loop pays is not found
    ("france-travail-benchmark-llm-serving", "llama-3.1-8b", "a100-80gb-sxm", 1,
     "output_tok_s", 32, 128, 30),
}


def test_rows_beyond_35_percent_are_caveats_or_explained(validated):
    """Every row beyond 35% falls under a physics caveat (caveats.py: the warning the roofline
    table and the report carry) or is one of the rows docs/physics.md §5 explains; a new one is
    a regression. Each caveat is earned: some row that only it covers misses by more than 35%."""
    catalog = load_catalog()
    worst = [(row, caveats(d), d) for row in validated.filter(pl.col("error").abs() > 0.35)
             .iter_rows(named=True) for d in [validation.deployment_for(catalog, row)]]
    unexplained = [row for row, found, _ in worst if not found and (
        row["source"], row["model"], row["gpu"], row["tp"], row["metric"], row["prompt_tokens"],
        row["output_tokens"], row["concurrency"]) not in EXPLAINED_ROWS]
    assert not unexplained, unexplained
    beyond = {(r["source"], r["model"], r["gpu"], r["tp"], r["metric"], r["prompt_tokens"],
               r["output_tokens"], r["concurrency"]) for r, _, _ in worst}
    assert EXPLAINED_ROWS <= beyond   # each explanation still has its row
    for caveat in CAVEATS:
        assert any(found == [caveat.says(d)] for _, found, d in worst), caveat.name


def test_current_stack_deepseek_decode_is_the_caveats_figure(validated):
    """DeepSeek-R1 under tensor parallelism on the NVIDIA stacks of late 2025 to March 2026
    (InferenceX: SGLang 0.5.6-0.5.9 and TensorRT-LLM on H200 and B200): the modelled time per
    output token is between 28% too short and 26% too long, median 3% too long, as the mla-moe
    caveat says; on MI300X 1.7-2.7 x too short; on the early-2025 stacks (dstack) 1.8-4.4 x."""
    rows = validated.filter(pl.col("source") == "inferencex")
    nvidia = rows.filter(pl.col("gpu") != "mi300x")
    assert nvidia.height == 69 and set(nvidia["gpu"]) == {"h200-sxm", "b200"}
    assert -0.285 < nvidia["error"].min() and nvidia["error"].max() < 0.26
    assert 0.02 < nvidia["error"].median() < 0.03
    mi300x = 1.0 / (1.0 + rows.filter(pl.col("gpu") == "mi300x")["error"])
    assert 1.65 < mi300x.min() and mi300x.max() < 2.75
    dstack = validated.filter((pl.col("source") == "dstack-deepseek-r1-benchmark")
                              & (pl.col("metric") == "tpot_s"))
    slower = 1.0 / (1.0 + dstack["error"])
    assert 1.75 < slower.min() and slower.max() < 4.45
    caveat = next(c.text for c in CAVEATS if c.name == "mla-moe")
    assert "28% too short and 26% too long (median 3% too long)" in caveat
    assert "1.7-2.7 x" in caveat and "1.8-4.4 x" in caveat


def test_deepseek_time_to_first_token_is_the_caveats_figure():
    """InferenceX's median TTFT of its DeepSeek-R1 runs at 4 clients (the least queueing; every
    stack, H200, B200 and MI300X) is 1.7-4.0 x the model's TTFT of the same closed-loop run, 65-134
    ms more at 1k-token prompts, as the mla-moe caveat and the README say; every median sits on a
    time-per-output-token row of the table, the run it was measured in."""
    medians = pl.read_csv(MEDIAN_TTFT)
    assert medians.height == 75 and medians["url"].str.starts_with("https://").all()
    measured = read_measurements(TABLE)
    four = validation.validate_median_ttft(load_catalog(), measured,
                                           medians.filter(pl.col("concurrency") == 4))
    assert four.height == 15 and set(four["gpu"]) == {"h200-sxm", "b200", "mi300x"}
    ratio = f"{four['ratio'].min():.1f}-{four['ratio'].max():.1f} x"
    short = four.filter(pl.col("prompt_tokens") < 1024)["excess_s"] * 1000
    excess = f"{short.min():.0f}-{short.max():.0f} ms more at 1k-token prompts"
    assert (ratio, excess) == ("1.7-4.0 x", "65-134 ms more at 1k-token prompts")
    caveat = next(c.text for c in CAVEATS if c.name == "mla-moe")
    assert f"median TTFT at 4 clients is {ratio} the modelled ({excess})" in caveat
    readme = _one_line(TABLE.parents[2] / "README.md")
    assert f"median TTFT at 4 clients {ratio.replace('-', '–').replace(' x', ' ×')} the modelled" in readme
    with pytest.raises(ValueError, match="no tpot_s row"):
        validation.validate_median_ttft(load_catalog(), measured, medians.head(1).with_columns(
            mean_tpot_s=pl.lit(1.0)))


def test_the_heavy_decode_caveat_and_the_readme_state_the_same_medians(validated):
    """The high-tp-heavy-decode caveat, the README and the device step timing's docstring give
    one set of figures for the max-load
    rows at tp 4-8 whose outputs are at least as long as their prompts (outside DeepSeek and
    MI300X, B200 included, as both name it): the signed median of all of them, of the
    TensorRT-engine editions' (engine trtllm-bench) and of the PyTorch-backend ones'."""
    heavy = validated.filter((pl.col("metric") == "max_throughput_tok_s")
                             & (pl.col("model") != "deepseek-v3") & (pl.col("gpu") != "mi300x")
                             & pl.col("tp").is_between(4, 8)
                             & (pl.col("output_tokens") >= pl.col("prompt_tokens")))
    median = {engine: f"{100 * heavy.filter(pl.col('engine') == engine)['error'].median():.0f}%"
              for engine in ("trtllm-bench", "trtllm-bench-pytorch")}
    overall = f"{100 * heavy['error'].median():.0f}%"
    worst = f"{100 * heavy['error'].max():.0f}%"
    caveat = next(c.text for c in CAVEATS if c.name == "high-tp-heavy-decode")
    assert (f"is a median {overall} and up to {worst} too high ({median['trtllm-bench']} on the"
            f" TensorRT-engine editions v0.12-v0.17, A100 and L40S; {median['trtllm-bench-pytorch']}"
            f" on the PyTorch-backend ones") in caveat
    readme = _one_line(TABLE.parents[2] / "README.md")
    assert (f"a median {overall} too high, up to {worst}, B200 included:"
            f" {median['trtllm-bench']} on the TensorRT-engine editions of v0.12–v0.17, A100 and"
            f" L40S, {median['trtllm-bench-pytorch']} on the PyTorch-backend ones") in readme
    timing = _one_line(TABLE.parents[2] / "bench" / "device" / "step_timing.py")
    assert (f"max-load throughput is a median {overall} too high, {median['trtllm-bench']} on the"
            f" TensorRT-engine editions") in timing


def test_rows_state_their_server_limits():
    """A row whose source states the server's limits (InferenceX's --max-running-requests,
    --chunked-prefill-size, --mem-fraction-static) is predicted with them; a row without keeps
    its engine's defaults."""
    catalog = load_catalog()
    row = {"engine": "sglang", "model": "deepseek-v3", "gpu": "h200-sxm", "tp": 8,
           "weight_dtype": "fp8", "kv_dtype": "bf16"}
    stated = validation.deployment_for(catalog, {**row, "max_seqs": 256,
                                                 "max_batched_tokens": 32768,
                                                 "kv_memory_fraction": 0.82})
    default = validation.deployment_for(catalog, {**row, "max_seqs": None})
    assert (stated.scheduler.max_seqs, stated.scheduler.max_batched_tokens,
            stated.scheduler.kv_memory_fraction) == (256, 32768, 0.82)
    assert default.scheduler == validation.deployment_for(catalog, row).scheduler
    assert stated.kv_capacity_tokens < default.kv_capacity_tokens
    table = read_measurements(TABLE)
    assert set(validation.SCHEDULER_COLUMNS) <= set(table.columns)
    assert table.filter(pl.col("max_batched_tokens").is_not_null())["source"].unique().to_list() \
        == ["inferencex"]


def test_tensorrt_llm_kv_capacity_reproduces_the_measured_maximum_batches():
    """NVIDIA's measured TensorRT-LLM maximum batches (Llama-3.1-8B on H100, tp 1/2/4, 2K/4K in
    and out, 0.8 of free memory) within 2% each: the pool is a fraction of the memory *free*
    after weights, activations and the runtime. Read as a fraction of total memory, as vLLM reads
    it, the same settings are up to 5.8% off, growing with tp."""
    catalog, table = load_catalog(), pl.read_csv(KV_CAPACITY)
    sized = validation.validate_kv_capacity(catalog, table)
    assert sized.height == 12 and set(sized["tp"]) == {1, 2, 4}
    assert sized["error"].abs().max() < 0.02, sized
    as_vllm = sized.with_columns(engine=pl.lit("vllm"))
    assert validation.validate_kv_capacity(catalog, as_vllm)["error"].abs().max() > 0.05


def test_vllm_kv_capacity_is_above_what_vllm_sized():
    """vLLM's startup logs (vLLM 0.2 to 0.19; H100, A100, RTX 4090): the `total` rule sizes every
    pool larger than vLLM did, by 3% to 28%. vLLM multiplies CUDA's total (nvidia-smi's less the
    driver's reserved memory, 0.3-0.55 GiB on an H100) and subtracts its profiled activation
    peak, 0.6-4.1 GiB above the estimate depending on the release, and its non-torch memory, 2.1
    GiB per GPU at tp 2 in 0.19: a known gap, not fitted (docs/physics.md section 2). Each logged
    pool is CUDA's total x the fraction less the logged parts, as transcribed."""
    sized = validation.validate_vllm_kv_capacity(load_catalog(), pl.read_csv(VLLM_KV_CAPACITY))
    assert sized.height == 7 and set(sized["gpu"]) == {"h100-sxm", "a100-80gb-sxm", "rtx-4090"}
    assert sized["error"].min() > 0.02 and sized["error"].max() < 0.30, sized
    parts = sized.drop_nulls("cuda_total_gib")
    rebuilt = (parts["cuda_total_gib"] * parts["kv_memory_fraction"] - parts["weights_gib"]
               - parts["activation_gib"] - parts["non_torch_gib"])
    assert parts.height == 5 and (rebuilt - parts["kv_pool_gib"]).abs().max() < 0.02


def test_mi300x_large_batches_with_the_derived_compute_efficiency(validated, hopper_and_cdna3):
    """Llama-3.1-405B on 8 x MI300X at batch 64-256 and at max load: within 40% with the cdna3
    compute efficiency derived like its bandwidth one (0.45 reported x 0.55 / 0.93, the NVIDIA
    ratio of serving to reported = 0.27), still too fast (the per-sequence cost docs/physics.md
    section 5 describes). With the reported 0.45 taken as a serving figure they were -22..-41%
    (TPOT) and +56 / +63% (throughput)."""
    rows = validated.filter((pl.col("source") == "oracle-oci-mi300x")
                            & ((pl.col("batch") >= 64) | pl.col("batch").is_null()))
    assert rows.height == 5
    assert rows["error"].abs().max() < 0.40, rows
    assert (rows.filter(pl.col("metric") == "tpot_s")["error"] < 0).all()
    hopper, cdna3 = hopper_and_cdna3
    assert cdna3.compute_efficiency == pytest.approx(round(0.45 * hopper.compute_efficiency / 0.93, 2))


def test_mi300x_small_batch_decode_is_all_reduce_bound_as_on_h100(validated, hopper_and_cdna3):
    """Llama-3.1-70B / 405B on 8 x MI300X at batch 1-32, all three MI300X sources: within 25%
    with hopper's all-reduce latency and its log2(tp) rounds over a fully connected fabric. With
    tp - 1 ring rounds the 70B's batch-1 steps were +45..+61%; with the old 30 us estimate per
    ring hop the 405B's batch-1 step carried 53 ms of all-reduce latency, 2.5 x too slow."""
    rows = validated.filter((pl.col("gpu") == "mi300x") & (pl.col("model") != "deepseek-v3")
                            & (pl.col("batch") <= 32))
    assert rows.height == 18 and rows["source"].n_unique() == 3
    assert rows["error"].abs().max() < 0.25, rows
    hopper, cdna3 = hopper_and_cdna3
    assert (cdna3.allreduce_latency_s, cdna3.allreduce_rounds) == (
        hopper.allreduce_latency_s, hopper.allreduce_rounds) == (12e-6, "log2")


def test_pcie_tensor_parallel_rows_within_a_quarter(validated):
    """70B on 4 x L40S: the all-reduces over PCIe run at the bus bandwidth NCCL achieves there
    (0.55 of the line rate), which brought the v0.17 rows from +33..+51% to within 21%; the
    v0.15 rows of the same configuration, added later, are within 22%."""
    l40s = validated.filter((pl.col("gpu") == "l40s") & (pl.col("tp") == 4))
    assert l40s.height == 14 and l40s["source"].n_unique() == 2
    assert l40s["error"].abs().max() < 0.25, l40s


def test_independent_rtx_4090_serving_rows(validated):
    """A third party's vLLM serving runs on a GPU no factor was set from: TTFT within 11% (its
    ~206-token prefills sit near the ridge point, where the softened GEMM roofline adds up to 9%);
    TPOT over-predicted (the ada bandwidth efficiency is an estimate, docs/physics.md)."""
    rows = validated.filter(pl.col("source") == "iog-foundation-llm-inference-benchmarks")
    assert rows.height == 8 and set(rows["gpu"]) == {"rtx-4090"}
    ttft = rows.filter(pl.col("metric") == "ttft_s")["error"]
    tpot = rows.filter(pl.col("metric") == "tpot_s")["error"]
    assert ttft.abs().max() < 0.11, ttft
    assert (tpot > 0.0).all() and tpot.max() < 0.30, tpot


def test_client_rows_include_the_front_end(validated):
    """Client-measured TTFTs carry the front end (HTTP, template, tokenization); engine rows
    do not; the time per output token is the same at both ends."""
    catalog = load_catalog()
    row = {"engine": "trtllm", "model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 2,
           "weight_dtype": "fp8", "kv_dtype": "fp8", "metric": "ttft_s", "prompt_tokens": 500,
           "output_tokens": 2000, "batch": 1, "measured_at": "engine"}
    client = {**row, "measured_at": "client"}
    assert predict(catalog, client) - predict(catalog, row) == pytest.approx(FRONTEND_S)
    tpot = {**row, "metric": "tpot_s"}
    assert predict(catalog, {**tpot, "measured_at": "client"}) == predict(catalog, tpot)
    with pytest.raises(ValueError, match="client"):
        predict(catalog, {**row, "measured_at": "proxy"})
    assert set(validated["measured_at"]) == {"engine", "client"}
    with pytest.raises(ValueError, match="measured_at"):
        validate(catalog, read_measurements(TABLE).drop("measured_at"))


def test_served_rows_replay_a_poisson_stream():
    """A row with a request rate is predicted by the replay: its TTFT includes waiting for the
    step in flight, so it exceeds the lone prefill."""
    catalog = load_catalog()
    row = {"engine": "trtllm-serving", "model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4,
           "weight_dtype": "bf16", "kv_dtype": "bf16", "metric": "ttft_s",
           "prompt_tokens": 467, "output_tokens": 256, "batch": None, "qps": 2.0,
           "measured_at": "engine"}
    lone = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4).prefill_s(467)
    assert predict(catalog, row) > lone * 1.1
    assert predict(catalog, row) == predict(catalog, row)  # fixed seed
    with pytest.raises(ValueError, match="max_throughput_tok_s"):
        predict(catalog, {**row, "metric": "max_throughput_tok_s"})


H200_TP8_70B = {"engine": "trtllm-bench", "model": "llama-3.1-70b", "gpu": "h200-sxm", "tp": 8,
                "weight_dtype": "fp8", "kv_dtype": "fp8", "metric": "max_throughput_tok_s",
                "prompt_tokens": 128, "output_tokens": 4096, "batch": None,
                "measured_at": "engine"}


def test_a_finite_max_load_run_pays_its_partial_last_wave():
    """A max-load row with a request count is that many requests queued at t = 0: a count the
    KV cache admits at once runs as the steady state does (within the few percent by which the
    replay's prefill beside the decodes differs from the formula's prefill-then-decode), and
    ten requests more decode alone for nearly as long as the full wave, which the steady state
    never pays."""
    catalog = load_catalog()
    d = validation.deployment_for(catalog, H200_TP8_70B)
    batch = d.max_concurrency(128, 4096)
    steady = predict(catalog, H200_TP8_70B)
    assert steady == pytest.approx(d.max_throughput_tok_s(128, 4096))
    one_wave = predict(catalog, {**H200_TP8_70B, "requests": batch})
    assert one_wave == pytest.approx(steady, rel=0.04)
    with_tail = predict(catalog, {**H200_TP8_70B, "requests": batch + 10})
    assert with_tail < 0.9 * one_wave
    assert with_tail == pytest.approx(validation.finite_run_tok_s(d, batch + 10, 128, 4096))
    with pytest.raises(ValueError, match=r"requests \(a finite max-load run\).*'tpot_s'"):
        predict(catalog, {**H200_TP8_70B, "metric": "tpot_s", "batch": 1, "requests": 100})


def test_the_documented_finite_run_is_what_the_replay_gives():
    """validation's docstring follows one finite run through its waves: the v0.20 perf
    overview's 1,500 requests of 128 + 4,096 tokens on 8 x H200. It had said the KV cache held
    ~1,490 and the 10 left over decoded alone "for as long" as the full wave; with the PyTorch
    flow's limits and padding, 5 are left over and decode for 41 s after a 336-s wave."""
    rows = read_measurements(TABLE).filter(
        (pl.col("source") == "tensorrt-llm-perf-overview-v0.20") & (pl.col("gpu") == "h200-sxm")
        & (pl.col("tp") == 8) & (pl.col("prompt_tokens") == 128)
        & (pl.col("output_tokens") == 4096))
    assert rows.height == 1
    row = rows.row(0, named=True)
    d = validation.deployment_for(load_catalog(), row)
    requests = validation._identical(np.zeros(row["requests"]), 128, 4096)
    done = validation.replay(requests, validation._at_client(d, 0.0))
    wave = done.filter(pl.col("admitted_s") < done["finished_s"].min())
    doc = " ".join(validation.__doc__.split())
    assert (f"{row['requests']:,} requests of 128 + 4,096 tokens on 8 x H200 (the v0.20 perf"
            f" overview's 70B row), whose KV cache holds {wave.height:,} of them, are one full"
            f" wave of {wave['finished_s'].max():.0f} s and {row['requests'] - wave.height}"
            f" requests decoding alone for {done['finished_s'].max() - wave['finished_s'].max():.0f}"
            f" s more, {round(predict(load_catalog(), row), -2):,.0f} output tokens/s where the"
            f" steady state gives {round(d.max_throughput_tok_s(128, 4096), -2):,.0f} (measured"
            f" {row['measured']:,.0f})") in doc


def test_trtllm_bench_rows_carry_the_perf_overview_request_counts(validated):
    """The perf overview's `$num_requests` table (the same in every edition for the shapes it
    lists) is on its rows; the shapes no edition lists (v0.20's 1,024 / 2,048, the developer
    guide's 1,000 / 1,000) have none and keep the steady-state formula."""
    counted = validated.filter(pl.col("requests").is_not_null())
    assert set(counted["metric"]) == {"max_throughput_tok_s"}
    bench = validated.filter(pl.col("engine").str.starts_with("trtllm-bench")
                             & ~pl.col("source").str.ends_with("devguide"))
    table = set(bench.filter(pl.col("requests").is_not_null())
                .select("prompt_tokens", "output_tokens", "requests").unique().rows())
    assert table == {(128, 128, 30000), (128, 2048, 3000), (128, 4096, 1500), (1000, 2000, 1500),
                     (2048, 128, 3000), (2048, 2048, 1500), (5000, 500, 1500),
                     (1000, 1000, 3000), (500, 2000, 3000), (20000, 2000, 1000)}
    uncounted = bench.filter(pl.col("requests").is_null())
    assert set(zip(uncounted["prompt_tokens"], uncounted["output_tokens"])) == {(1024, 2048)}


def test_unknown_engine_and_metric_are_named():
    catalog = load_catalog()
    row = {"engine": "llama.cpp", "model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 1,
           "weight_dtype": "bf16", "kv_dtype": "bf16", "metric": "ttft_s",
           "prompt_tokens": 100, "output_tokens": 10, "batch": 1, "measured_at": "engine"}
    with pytest.raises(ValueError, match="llama.cpp"):
        predict(catalog, row)
    with pytest.raises(ValueError, match="itl_s"):
        predict(catalog, {**row, "engine": "vllm", "metric": "itl_s"})


NIM_70B = {"engine": "trtllm", "model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 2,
           "weight_dtype": "fp8", "kv_dtype": "fp8", "prompt_tokens": 5000, "output_tokens": 500,
           "batch": None, "qps": None, "measured_at": "client"}


def test_closed_loop_saturates_at_the_max_load_throughput():
    """Closed-loop clients beyond what the KV cache holds: the output throughput settles at the
    analytic max-load throughput, and every extra client waits one more request's share of it
    (Little's law: 100 more clients add 100 / requests-per-second to the TTFT)."""
    catalog = load_catalog()
    at = {c: {m: predict(catalog, {**NIM_70B, "metric": m, "concurrency": c})
              for m in ("ttft_s", "output_tok_s")} for c in (150, 250)}
    analytic = validation.deployment_for(catalog, NIM_70B).max_throughput_tok_s(5000, 500)
    # within 6%: the replay mixes each arriving prompt's prefill into the running decodes'
    # steps, the analytic formula runs the batch in waves (prefill all, then decode all); 5.0%
    # apart here (922 and 878 output tokens/s)
    for c in at:
        assert at[c]["output_tok_s"] == pytest.approx(analytic, rel=0.06)
    requests_per_s = at[250]["output_tok_s"] / 500
    assert at[250]["ttft_s"] - at[150]["ttft_s"] == pytest.approx(100 / requests_per_s, rel=0.05)


def test_closed_loop_at_one_client_is_the_lone_request():
    catalog = load_catalog()
    d = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=2, weights="fp8")
    lone_ttft = predict(catalog, {**NIM_70B, "metric": "ttft_s", "concurrency": 1})
    assert lone_ttft == pytest.approx(d.prefill_s(5000) + FRONTEND_S, rel=0.01)


def test_a_row_is_open_or_closed_loop():
    catalog = load_catalog()
    with pytest.raises(ValueError, match="not both"):
        predict(catalog, {**NIM_70B, "metric": "ttft_s", "qps": 1.0, "concurrency": 5})
    with pytest.raises(ValueError, match="needs a concurrency"):
        predict(catalog, {**NIM_70B, "metric": "output_tok_s"})


def test_closed_loop_each_client_sends_when_its_previous_request_ends():
    """The fixed point: request r * C + k (client k's r-th) arrives when client k's previous
    request ends; the steady rounds leave out the first two and the last."""
    catalog = load_catalog()
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm")
    start = np.array([0.0, 0.3, 0.7])
    steady = closed_loop_steady(d, start, 500, 50)
    clients, arrival, e2e = len(start), steady["arrival_s"].to_numpy(), steady["e2e_s"].to_numpy()
    assert steady.height == clients * (CLOSED_LOOP_ROUNDS - WARM_UP_ROUNDS - 1)
    np.testing.assert_allclose(arrival[clients:], arrival[:-clients] + e2e[:-clients], atol=1e-9)


def test_a_closed_loop_that_does_not_settle_is_named(monkeypatch):
    monkeypatch.setattr(validation, "MAX_PASSES", 1)
    d = load_catalog().build(model="llama-3.1-8b", gpu="h100-sxm")
    with pytest.raises(ValueError, match="did not settle in 1 replays"):
        closed_loop_steady(d, np.array([0.0, 0.5]), 500, 50)


def _step_timing_columns() -> tuple[str, ...]:
    """CSV_COLUMNS of bench/device/step_timing.py, read without importing it (it needs PyTorch,
    which only the GPU machine has)."""
    script = TABLE.parents[1] / "device" / "step_timing.py"
    tree = ast.parse(script.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "CSV_COLUMNS":
            return ast.literal_eval(node.value)
    raise AssertionError(f"{script} defines no CSV_COLUMNS")


def _timed(cases: list[dict]) -> pl.DataFrame:
    """Rows as bench/device/step_timing.py writes them (its columns, its head layouts)."""
    heads = {"llama-3.1-8b": (32, 32, 8, 1), "llama-3.1-70b-tp8-shard": (80, 8, 1, 8),
             "attention-8q-1kv": (1, 8, 1, 8), "attention-64q-8kv": (1, 64, 8, 1),
             "copy": (0, 0, 0, 1)}
    rows = []
    for i, c in enumerate(cases):
        layers, q, kv, tp = heads[c["shape"]]
        rows.append({"case": i, "tp": tp, "layers": layers, "q_heads": q, "kv_heads": kv,
                     "head_dim": 128, "new_tokens": 1, "context_tokens": 0, "batch": 1,
                     "kv_bytes": 0, "min_s": c.get("median_s"), "replays": 10,
                     "attention_backend": "FLASH_ATTENTION", "cuda_graph": True,
                     "status": "ok", **c})
    columns = _step_timing_columns()
    seconds = {"median_s": pl.Float64, "min_s": pl.Float64}
    return pl.DataFrame(rows, schema_overrides=seconds).select(columns)


def test_device_step_timings_against_the_step_formula():
    """The comparison bench/validation.py --steps prints for a GPU run of
    bench/device/step_timing.py: each mode is its term of the formula, the attention-only
    shapes scale the tp-8 deployment's attention to their layers and heads, and a skipped case
    stays in the table without an error."""
    catalog = load_catalog()
    decode = dict(batch=1024, context_tokens=1024, median_s=0.05)
    timed = validation.validate_step_timings(catalog, _timed([
        dict(shape="llama-3.1-70b-tp8-shard", phase="decode", mode=m, **decode)
        for m in ("full", "gemm", "attn")] + [
        dict(shape=a, phase="attention", mode="attn", kv_bytes=2 * 1024 * kv * 1025 * 128 * 2,
             **decode) for a, kv in (("attention-8q-1kv", 1), ("attention-64q-8kv", 8))] + [
        dict(shape="copy", phase="copy", mode="copy", kv_bytes=8 << 30, median_s=0.002),
        dict(shape="llama-3.1-8b", phase="decode", mode="full", batch=256, context_tokens=4096,
             median_s=None, status="skipped: KV cache 137 GB over the cap"),
    ]), "h200-sxm")
    assert timed.height == 7
    model = timed["model_s"].to_list()
    d = catalog.build(model="llama-3.1-70b", gpu="h200-sxm", tp=8, weights="bf16", kv_cache="bf16")
    launches = 80 * d.efficiency.layer_overhead_s
    assert model[0] == pytest.approx(model[1] + model[2])
    assert model[1] - launches == pytest.approx(
        max(step_cost(d.coefficients, 1024.0, 1024.0, 0.0, 0.0, 0.0)[:2]))
    # 80 layers of one KV head each; 8 KV heads (and 8 x the query heads) cost 8 x one
    assert model[2] == pytest.approx(80 * model[3])
    assert model[4] == pytest.approx(8 * model[3])
    # the attention reads 1,025 tokens of 512 KV bytes (K and V, bf16) per layer and sequence
    assert model[3] == pytest.approx(1024 * 1025 * 512 / d.effective_bandwidth, rel=1e-3)
    assert model[5] is None and timed["bandwidth_fraction"][5] == pytest.approx(
        (8 << 30) / 0.002 / 4.8e12)
    assert model[6] is not None and timed["error"][6] is None


def test_device_step_timings_of_a_smoke_run_are_refused_by_name():
    with pytest.raises(ValueError, match="shape 'tiny'.*smoke run"):
        validation.validate_step_timings(load_catalog(), _timed([
            dict(shape="llama-3.1-8b", phase="decode", mode="full", median_s=0.01)]).with_columns(
            shape=pl.lit("tiny")), "h200-sxm")


def test_trtllm_bench_limits_follow_its_tuning_heuristic():
    """trtllm-bench's sizing for Llama-70B FP8 on 8 x H200 at 128 / 4,096 tokens, by hand from
    tuning.py: 2 x 80 layers x 8 heads x 128 x 1 B = 1.526e-4 GiB per token; (8 x 140.4 GiB -
    70.6e9 B = 65.75 GiB) x 0.95 = 1,004.6 GiB of cache; / (1.526e-4 x 4,224) = 1,559 requests:
    a max batch of 1,792 (256 x 7), max tokens 1,559 x (1 + 128 / 4,096) = 1,607 -> 2,048 (at
    least the prompt + the max batch, 1,920). The overview's CUDA-graph sizes up to min(1,792, 2,048),
    padded to 1,792 above 1,024. A trtllm-bench-pytorch row is predicted with them."""
    catalog = load_catalog()
    d = catalog.build(model="llama-3.1-70b", gpu="h200-sxm", tp=8, weights="fp8",
                      kv_cache="fp8")
    limits = validation.trtllm_bench_limits(d, 128, 4096)
    assert limits == {"max_seqs": 1792, "max_batched_tokens": 2048,
                      "graph_batch_sizes": validation.PERF_OVERVIEW_GRAPH_SIZES}
    row = {**H200_TP8_70B, "engine": "trtllm-bench-pytorch"}
    scheduler = validation.deployment_for(catalog, row).scheduler
    assert (scheduler.max_seqs, scheduler.max_batched_tokens) == (1792, 2048)
    assert scheduler.graph_batch_sizes == (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024,
                                           1792)
    # a long prompt: max tokens at least the prompt + the max batch, the cap the max batch
    long = validation.trtllm_bench_limits(d, 20000, 2000)
    assert long["max_batched_tokens"] >= 20000 + long["max_seqs"]
    row = {**row, "prompt_tokens": 20000, "output_tokens": 2000}
    assert validation.deployment_for(catalog, row).scheduler.graph_batch_sizes[-1] == long[
        "max_seqs"]
    # a limit the row states reaches the cap too
    stated = validation.deployment_for(catalog, {**row, "max_seqs": 100}).scheduler
    assert stated.graph_batch_sizes == (1, 2, 4, 8, 16, 32, 64, 100)
    assert not validation.deployment_for(catalog, H200_TP8_70B).scheduler.graph_batch_sizes


def test_the_documented_padding_example_is_what_the_limits_give():
    """docs/physics.md section 5's example of TensorRT-LLM padding only up to its max batch: the
    405B on 8 x H200 at 500 / 2,000 tokens, whose batch of about 1,100 sequences the overview's
    list alone would pad to 2,048, runs as the graph of trtllm-bench's max batch."""
    catalog = load_catalog()
    row = {"engine": "trtllm-bench-pytorch", "model": "llama-3.1-405b", "gpu": "h200-sxm",
           "tp": 8, "weight_dtype": "fp8", "kv_dtype": "fp8", "prompt_tokens": 500,
           "output_tokens": 2000}
    d = validation.deployment_for(catalog, row)
    batch = d.max_concurrency(500, 2000)
    padded = int(graph_batch(d.scheduler.graph_sizes, float(batch)))
    assert 1024 < batch < padded == d.scheduler.max_seqs < 2048
    physics = _one_line(TABLE.parents[2] / "docs" / "physics.md")
    assert (f"(the 405B on 8 × H200 at 500 / 2,000: a max batch of {padded:,}, so its {batch:,}"
            f" sequences run as the {padded:,} graph, where the first try ran the model's 1,102"
            f" as 2,048)") in physics


def test_a_bad_measurement_table_gets_one_message_naming_the_file_and_the_row(tmp_path):
    """A cell the typed columns cannot read names the file, the cell and what was expected;
    every row the model cannot predict is named by its line in one message, before anything is
    replayed, so a user's own table is fixed in one pass."""
    header = ("engine,model,gpu,tp,weight_dtype,kv_dtype,metric,prompt_tokens,output_tokens,"
              "measured,measured_at,requests")
    bad_cell = tmp_path / "mine.csv"
    bad_cell.write_text(f'{header}\ntrtllm-bench,llama-3.1-8b,h100-sxm,1,fp8,fp8,'
                        f'max_throughput_tok_s,128,128,20000,engine,"1,500"\n')
    with pytest.raises(ValueError, match=r"mine\.csv.*1,500.*requests.*plain whole numbers"):
        read_measurements(bad_cell)
    bad_row = tmp_path / "engine.csv"
    bad_row.write_text(f"{header}\ntrtllm-bench,llama-3.1-8b,h100-sxm,1,fp8,fp8,"
                       f"max_throughput_tok_s,128,128,20000,engine,1500\n"
                       f"llama.cpp,llama-3.1-8b,h100-sxm,1,bf16,bf16,ttft_s,100,10,0.02,"
                       f"engine,\n"
                       f"vllm,llama-3.1-8b,h100-sxm,1,bf16,bf16,tpot_s,100,10,0.02,engine,50\n")
    with pytest.raises(ValueError) as raised:
        validate(load_catalog(), read_measurements(bad_row))
    lines = str(raised.value).splitlines()
    assert lines[0] == "2 row(s) of the measurement table cannot be predicted:"
    assert re.match(r"row 3 .*llama-3\.1-8b on h100-sxm, ttft_s.*llama\.cpp", lines[1]), lines
    assert re.match(r"row 4 .*tpot_s.*requests \(a finite max-load run\)", lines[2]), lines


@pytest.mark.parametrize(("cells", "named"), [
    ("128,128,\"20,000\"", r"20,000.*measured"),
    ("\"1,024\",128,20000", r"1,024.*prompt_tokens"),
    ("128,128,20 ktok/s", r"20 ktok/s.*measured"),
])
def test_a_required_number_cell_it_cannot_read_is_named_when_the_table_is_read(tmp_path, cells,
                                                                               named):
    """The required number columns are typed like the optional ones: a "20,000" in `measured`
    was read as text and ended in a Polars traceback after every row was predicted."""
    table = tmp_path / "mine.csv"
    table.write_text("engine,model,gpu,tp,weight_dtype,kv_dtype,metric,prompt_tokens,"
                     "output_tokens,measured,measured_at\n"
                     f"trtllm-bench,llama-3.1-8b,h100-sxm,1,fp8,fp8,max_throughput_tok_s,{cells},"
                     "engine\n")
    with pytest.raises(ValueError, match=rf"mine\.csv.*{named}.*plain numbers in measured"):
        read_measurements(table)


def test_an_empty_measurement_file_is_one_message(tmp_path):
    """An empty file says so and what it should hold, not Polars' NoDataError."""
    empty = tmp_path / "mine.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"mine\.csv is empty: expected a header row of engine"):
        read_measurements(empty)


def test_an_empty_required_cell_or_no_rows_is_one_message_before_any_prediction(tmp_path):
    """An empty prompt_tokens failed in int() with a TypeError traceback; a header-only table
    printed an empty summary as if it were a result."""
    header = ("engine,model,gpu,tp,weight_dtype,kv_dtype,metric,prompt_tokens,output_tokens,"
              "measured,measured_at\n")
    table = tmp_path / "mine.csv"
    table.write_text(f"{header}vllm,llama-3.1-8b,h100-sxm,1,bf16,bf16,ttft_s,128,128,0.012,engine\n"
                     "vllm,llama-3.1-8b,h100-sxm,1,bf16,bf16,ttft_s,,128,0.012,\n")
    with pytest.raises(ValueError, match=r"row 3 \(line 3 of the CSV\) has no prompt_tokens,"
                                         r" measured_at: every row needs engine"):
        validate(load_catalog(), read_measurements(table))
    table.write_text(header)
    with pytest.raises(ValueError, match="measurement table has no rows"):
        validate(load_catalog(), read_measurements(table))


def test_a_table_without_a_source_column_is_summarised_under_its_file_name(tmp_path):
    """bench/validation.py counts and groups rows by source: a user's table without that column
    predicted every row, then ended in a ColumnNotFoundError traceback."""
    table = tmp_path / "mine.csv"
    table.write_text("engine,model,gpu,tp,weight_dtype,kv_dtype,metric,prompt_tokens,"
                     "output_tokens,measured,measured_at\n"
                     "vllm,llama-3.1-8b,h100-sxm,1,bf16,bf16,ttft_s,128,128,0.012,engine\n")
    validated = validate(load_catalog(), read_measurements(table))
    assert validated["source"].to_list() == ["mine.csv"]
    assert summary(validated, by=("source", "metric"))["rows"].to_list() == [1]


@pytest.mark.parametrize("argv", [["--table"], ["--steps"], ["--steps", "x.csv", "--gpu"]])
def test_a_validation_flag_without_its_value_is_a_usage_message(argv):
    """`bench/validation.py --table` with the path forgotten was an IndexError traceback."""
    import importlib.util

    path = TABLE.parents[1] / "validation.py"
    spec = importlib.util.spec_from_file_location("validation_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with pytest.raises(SystemExit, match=rf"{argv[-1]} needs a value\n.*--table PATH"):
        bench.main(argv)


@pytest.mark.parametrize(("cells", "named"), [
    ("ttft_s,128,128,0.012,engine,,0,", r"qps=0\.0: expected a number above 0"),
    ("ttft_s,128,128,0.012,engine,,,0", r"concurrency=0: expected a number above 0"),
    ("ttft_s,128,128,0,engine,,,", r"measured=0\.0: expected a number above 0"),
    ("ttft_s,128,128,0.012,engine,,-1,", r"qps=-1\.0: expected a number above 0"),
    ("tpot_s,128,1,0.01,engine,,,", r"output_tokens=1: a tpot_s row needs at least 2"),
])
def test_a_value_no_measurement_can_have_is_one_message_naming_the_line(tmp_path, cells, named):
    """A qps of 0 or a one-token tpot_s was a ZeroDivisionError traceback, a concurrency of 0 a
    NumPy message, a measured 0 an infinite error in the summary."""
    table = tmp_path / "mine.csv"
    table.write_text("engine,model,gpu,tp,weight_dtype,kv_dtype,metric,prompt_tokens,"
                     "output_tokens,measured,measured_at,batch,qps,concurrency\n"
                     f"trtllm,llama-3.1-8b,h100-sxm,1,bf16,bf16,{cells}\n")
    with pytest.raises(ValueError, match=rf"row 2 \(line 2 of the CSV.*\): {named}"):
        validate(load_catalog(), read_measurements(table))


def test_an_unreadable_cell_is_named_by_its_line_and_a_malformed_row_is_not_blamed_on_numbers(
        tmp_path):
    """bench/README.md promises the line: Polars named the cell but only a byte offset. A row
    of more fields than the header is no number's fault, so it gets no advice on numbers."""
    header = ("engine,model,gpu,tp,weight_dtype,kv_dtype,metric,prompt_tokens,output_tokens,"
              "measured,measured_at\n")
    row = "vllm,llama-3.1-8b,h100-sxm,1,bf16,bf16,ttft_s,128,128,{},engine\n"
    table = tmp_path / "mine.csv"
    table.write_text(header + row.format("0.012") + row.format('"2,5"'))
    with pytest.raises(ValueError, match=r"mine\.csv: line 3: cannot read '2,5' in measured;"
                                         r" expected plain whole numbers in tp"):
        read_measurements(table)
    table.write_text(header + row.format("0.012,extra"))
    with pytest.raises(ValueError, match=r"mine\.csv: found more fields") as raised:
        read_measurements(table)
    assert "plain" not in str(raised.value)
