"""Calibration of efficiency factors on observed latencies (pipelines/roofline/calibration.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from pipelines.roofline import load_catalog
from pipelines.roofline.calibration import (
    ALL_SHAPES,
    BOUNDS,
    PARAMETERS,
    REQUEST_METRICS,
    UNIT_SLIP_RATIO,
    CalibrationError,
    calibrate_candidates,
    calibrate_requests,
    calibrate_steps,
    engine_log_step_line,
    format_table,
    parameter,
    perf_model_steps,
    predict_requests,
    predict_steps,
    with_parameters,
)
from tests.public_traces import SHARED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BUCKETS = pl.read_csv(Path(__file__).resolve().parents[2] / "data" / "reference" / "shape_buckets.csv")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def burstgpt(scale: int) -> pl.DataFrame:
    return pl.read_csv(FIXTURES / "observed" / f"burstgpt_vllm_llama32_1b_scale{scale}.csv",
                       schema_overrides={"request_id": pl.String})


def test_steps_recover_known_factors(catalog):
    """Synthetic measurements made with known factors: the fit finds them again."""
    truth = {"compute_efficiency": 0.52, "bandwidth_efficiency": 0.61, "step_overhead_s": 0.004,
             "sequence_overhead_s": 2e-4}
    base = catalog.deployment("splitwise-70b-h100-tp2")
    steps = perf_model_steps(pl.read_csv(FIXTURES / "splitwise" / "perf_model_llama2_70b.csv"),
                             "llama2-70b", "h100-80gb", 2)
    steps = steps.with_columns(observed_s=pl.Series(predict_steps(with_parameters(base, truth), steps)))
    result = calibrate_steps(base, steps, BUCKETS)
    for name, value in truth.items():
        assert result.parameters()[name][1] == pytest.approx(value, rel=0.02), name
    assert result.cost_after < 1e-3 < result.cost_before


def test_measured_steps_are_predicted_as_the_replay_runs_them(catalog):
    """A decode step is Deployment.decode_step_s, CUDA-graph padding included (docs/physics.md
    section 1): a deployment that pads is fitted to the steps its replay runs, not to unpadded
    ones. A prefill is never padded."""
    d = catalog.build(model="llama-3.1-70b", gpu="h200-sxm", tp=8, weights="fp8", kv_cache="fp8",
                      graph_batch_sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
    steps = pl.DataFrame({"kind": ["decode", "decode", "prefill"], "batch": [600, 512, 4],
                          "prompt_tokens": [0, 0, 1000], "context_tokens": [2000, 2000, 0]})
    predicted = predict_steps(d, steps)
    assert predicted[0] == pytest.approx(d.decode_step_s(600, 600 * 2000), rel=1e-12)
    assert predicted[1] == pytest.approx(d.decode_step_s(512, 512 * 2000), rel=1e-12)
    assert predicted[2] == pytest.approx(d.prefill_batch_s(4, 1000), rel=1e-12)


@pytest.mark.parametrize(("hardware", "deployment"), [("a100-80gb", "splitwise-70b-a100-tp2"),
                                                      ("h100-80gb", "splitwise-70b-h100-tp2")])
def test_perf_model_held_out_half_within_ten_percent(catalog, hardware, deployment):
    steps = perf_model_steps(pl.read_csv(FIXTURES / "splitwise" / "perf_model_llama2_70b.csv"),
                             "llama2-70b", hardware, 2)
    result = calibrate_steps(catalog.deployment(deployment), steps, BUCKETS)
    for metric in ("prefill", "decode"):
        before, after = result.held_out_error(metric)
        assert after <= 0.10, (metric, before, after)
    shapes = set(result.errors["shape"])
    assert ALL_SHAPES in shapes and "decode batch 16 / medium prompt" in shapes


def test_burstgpt_ttft_calibration_improves_the_held_out_half(catalog):
    """The BurstGPT-on-vLLM log (Llama-3.2-1B): the catalog defaults miss its TTFT by ~80%
    (a 2024 vLLM's per-step cost and the HTTP path); after fitting on one half, the other half's
    median TTFT is within 15% of the observed median. Where in 3-11% the fit stops is not
    determined by the log (docs/physics.md section 6): changing step times by 7e-11 (the series
    in step.gemm_seconds) moved it from 2.9% to 11%."""
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), burstgpt(100),
                                BUCKETS, fit_metrics=("ttft",))
    before, after = result.held_out_error("ttft", "shape_error")
    assert before > 0.5 and after < 0.15, (before, after)
    assert result.after.efficiency.step_overhead_s > result.before.efficiency.step_overhead_s


def test_burstgpt_per_request_ttft_follows_the_load_once_the_per_sequence_cost_is_fitted(catalog):
    """The log's TTFTs grow from ~30 ms on an idle server to ~150 ms with 140 requests running:
    its vLLM spends ~0.3 ms per running sequence on every step (its engine log, next test). With
    only per-step costs the fit could not follow the load (held-out per-request error 48%, no
    better than each shape's median, 51%); fitting the per-sequence cost brings it to ~15%, at a
    cost per sequence within the range the engine log shows."""
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), burstgpt(100),
                                BUCKETS, fit_metrics=("ttft",))
    _, after = result.held_out_error("ttft")
    baseline = result.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("split") == "held_out")
                                    & (pl.col("metric") == "ttft"))["error_baseline"][0]
    assert after < 0.2 < 0.5 < baseline, (after, baseline)
    assert 1e-4 < result.after.efficiency.sequence_overhead_s < 6e-4
    table = format_table(result.errors)
    assert "held_out" in table and "ttft" in table and "e2e" in table


def test_the_fitted_per_sequence_cost_is_the_one_the_engine_log_measured(catalog):
    """An independent check of the fitted per-sequence cost: the same run's vLLM engine log
    (tests/fixtures/README.md) samples throughput every ~0.5 s. Where it only decoded (no prompt
    tokens, none waiting), a step took num_running / generation_throughput seconds; a straight
    line through those samples gives ~4.4 ms + ~0.34 ms per running sequence, a 1B model's
    weights and KV cache being ~3-8 ms of it. The fit on TTFTs alone lands within a quarter of
    that slope, from a catalog value 300 x smaller."""
    intercept, slope, samples = engine_log_step_line(
        pl.read_csv(FIXTURES / "observed" / "burstgpt_vllm_engine_log_scale100.csv"))
    assert 2.5e-4 < slope < 4e-4 and 2e-3 < intercept < 7e-3 and samples > 250, (slope, intercept)
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), burstgpt(100),
                                BUCKETS, fit_metrics=("ttft",))
    assert result.before.efficiency.sequence_overhead_s < slope / 100
    assert result.after.efficiency.sequence_overhead_s == pytest.approx(slope, rel=0.25)


def test_the_documents_state_each_overheads_ceiling():
    """The README's `calibration.at_bound` column and docs/physics.md section 6 said an overhead
    is at its bound at 1 s, and that the fit has four free factors, after the per-sequence
    overhead joined the fit with a ceiling of 10 ms: a reader saw `at_bound` true on a
    sequence_overhead_s of 10 ms that the text said could not be at its bound."""
    root = Path(__file__).resolve().parents[2]
    readme, physics = (" ".join((root / f).read_text().split()) for f in ("README.md", "docs/physics.md"))
    assert BOUNDS["sequence_overhead_s"] == (1e-7, 0.01)
    assert BOUNDS["step_overhead_s"][1] == BOUNDS["net_one_way_s"][1] == 1.0
    assert "or an overhead at its ceiling, 1 s, or 10 ms for sequence_overhead_s" in readme
    assert "five free factors can make a wrong GPU fit" in readme
    assert "overheads to (10 µs, 1 s), the per-sequence overhead to (0.1 µs, 10 ms)" in physics
    assert "or an overhead at its ceiling (1 s; 10 ms for the per-sequence overhead)" in physics
    assert "The step formula has no per-sequence term" not in physics


def test_the_readme_says_to_copy_every_fitted_parameter_into_deployments_csv(tmp_path):
    """To price a fleet with a fit, the README listed the deployments.csv columns to copy the
    fitted factors into: the four of the first fit, not sequence_overhead_s, so a user copying
    the BurstGPT fit kept the catalog's 1 us a sequence where the fit found ~0.3 ms. Each
    listed column, added to the shipped file where it has none, sets the deployment's value."""
    root = Path(__file__).resolve().parents[2]
    readme = " ".join((root / "README.md").read_text().split())
    listed = readme.split("(the optional efficiency overrides ", 1)[1].split(": every", 1)[0]
    assert [p for p in PARAMETERS if f"`{p}`" not in listed] == []
    shutil.copytree(root / "data" / "reference", tmp_path, dirs_exist_ok=True)
    fitted = dict(zip(PARAMETERS, (0.41, 0.52, 0.0019, 3.2e-4, 0.0135), strict=True))
    rows = pl.read_csv(tmp_path / "deployments.csv", infer_schema_length=0)
    rows.with_columns(**{p: pl.when(pl.col("deployment") == "burstgpt-vllm-1b-4090")
                         .then(pl.lit(str(v))).otherwise(pl.col(p) if p in rows.columns else None)
                         for p, v in fitted.items()}).write_csv(tmp_path / "deployments.csv")
    d = load_catalog(tmp_path).deployment("burstgpt-vllm-1b-4090")
    assert {p: parameter(d, p) for p in PARAMETERS} == fitted


def test_an_engine_log_without_two_batch_sizes_or_its_columns_is_refused():
    one_size = pl.DataFrame({"prompt_throughput": [0.0, 0.0], "generation_throughput": [200.0, 210.0],
                             "num_running": [1, 1], "num_pending": [0, 0]})
    with pytest.raises(CalibrationError, match="2 pure-decode samples at fewer than two batch sizes"):
        engine_log_step_line(one_size)
    with pytest.raises(CalibrationError, match=r"engine_log lacks column\(s\) \['num_pending'\]"):
        engine_log_step_line(one_size.drop("num_pending"))
    with pytest.raises(CalibrationError, match=r"column\(s\) \['prompt_throughput'\] are not numbers"):
        engine_log_step_line(one_size.with_columns(prompt_throughput=pl.Series(["0", "n/a"])))


def test_requests_without_observations_are_refused(catalog):
    bare = burstgpt(100).with_columns(observed_ttft_s=pl.lit(None, pl.Float64),
                                      observed_e2e_s=pl.lit(None, pl.Float64))
    with pytest.raises(CalibrationError, match="observed"):
        calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), bare, BUCKETS)


@pytest.mark.parametrize("metrics", [("itl",), "itl"], ids=["tuple", "one-string"])
def test_unknown_fit_metric_is_named(catalog, metrics):
    """A single metric given as a string is that metric, not its letters ('i', 't', 'l')."""
    with pytest.raises(CalibrationError, match=r"fit_metrics \['itl'\]"):
        calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), burstgpt(100), BUCKETS,
                           fit_metrics=metrics)


@pytest.mark.parametrize(("ids", "named"), [
    (["0", "1", "2"] * 33 + ["3"], "'0' is used twice"),
    ([None] + [str(i) for i in range(99)], "request_id is empty"),
], ids=["repeated", "missing"])
def test_request_ids_that_do_not_name_one_request_each_are_refused(catalog, ids, named):
    """Predictions are matched to observations by request_id: two logs concatenated, each
    numbered from 0, used to calibrate silently on latencies paired with the wrong requests."""
    log = burstgpt(100).head(100).with_columns(request_id=pl.Series(ids, dtype=pl.String))
    with pytest.raises(CalibrationError, match=named):
        calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), log, BUCKETS,
                           fit_metrics=("ttft",))


@pytest.mark.parametrize(("value", "named"), [
    (-0.5, r"observed ttft is -0.5 s: expected a finite latency"),
    (float("nan"), "observed ttft is nan s"),
    (float("inf"), "observed ttft is inf s"),
], ids=["negative", "nan", "inf"])
def test_a_latency_no_request_can_take_is_named(catalog, value, named):
    """A negative latency was dropped without a word (the fit ran on the rest), NaN or inf
    stopped scipy with 'Residuals are not finite in the initial point'."""
    log = burstgpt(100).head(20).with_columns(
        observed_ttft_s=pl.when(pl.int_range(pl.len()) == 3).then(value)
        .otherwise(pl.col("observed_ttft_s")))
    with pytest.raises(CalibrationError, match=named):
        calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), log, BUCKETS)


def test_the_halves_alternate_over_the_observed_requests(catalog):
    """A log whose every other request (in arrival order) carries latencies: the halves were
    numbered over all requests, so all 10 observed ones fell in the held-out half and the log
    was refused with '0 observations in the fit half'."""
    log = burstgpt(100).head(20).sort("arrival_s")
    odd = pl.int_range(pl.len()) % 2 == 1
    partial = log.with_columns(observed_ttft_s=pl.when(odd).then(pl.col("observed_ttft_s")),
                               observed_e2e_s=pl.when(odd).then(pl.col("observed_e2e_s")))
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), partial, BUCKETS,
                                fit_metrics=("ttft",))
    overall = result.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("metric") == "ttft"))
    assert dict(overall.select("split", "observations").iter_rows()) == {"fit": 5, "held_out": 5}


def test_each_metrics_observations_alternate_between_the_halves(catalog):
    """A log that times every request end to end but carries TTFT on every other one only (a mix
    of streamed and unstreamed requests, say): alternating over the requests with any
    observation put all 10 TTFTs in the held-out half, and a fit on TTFT was refused with '0
    observations in the fit half'. Each metric's observations alternate; the time per output
    token of the 10 requests observed on both takes the half of their e2e, the held-out one."""
    log = burstgpt(100).head(20).sort("arrival_s")
    odd = pl.int_range(pl.len()) % 2 == 1
    partial = log.with_columns(observed_ttft_s=pl.when(odd).then(pl.col("observed_ttft_s")))
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), partial, BUCKETS,
                                fit_metrics=("ttft",))
    overall = result.errors.filter(pl.col("shape") == ALL_SHAPES)
    assert {(m, s): n for s, m, n in overall.select("split", "metric", "observations").iter_rows()} == {
        ("ttft", "fit"): 5, ("ttft", "held_out"): 5, ("e2e", "fit"): 10, ("e2e", "held_out"): 10,
        ("tpot", "held_out"): 10}


@pytest.mark.parametrize("change", [
    {"observed_e2e_s": pl.lit(None, pl.Float64)},                # TTFT logged alone
    {"output_tokens": pl.lit(1)},                                # one-token answers
    {"observed_ttft_s": pl.col("observed_e2e_s")},               # unstreamed: TTFT is the e2e
    {"observed_ttft_s": pl.when(pl.int_range(pl.len()) % 2 == 1).then(pl.col("observed_ttft_s"))},
], ids=["no-e2e", "one-token", "ttft-is-e2e", "every-tpot-held-out"])
def test_a_fit_metric_the_fit_half_lacks_is_refused_not_dropped(catalog, change):
    """Fitted on TTFT and TPOT, a log that gives no TPOT in the fit half was fitted on TTFT
    alone without a word, its fit_metrics (and the asset's metadata) naming tpot. The last
    log times TTFT on every other request: its TPOTs, in their e2e's half, are all held out."""
    log = burstgpt(100).head(20).sort("arrival_s").with_columns(**change)
    with pytest.raises(CalibrationError, match=r"^fit_metrics names tpot, of which the fit half"
                                               r" holds no observation \(observations in the log"):
        calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), log, BUCKETS,
                           fit_metrics=("ttft", "tpot"))


def test_by_default_a_log_is_fitted_on_the_default_metrics_it_observes(catalog):
    """A log of end-to-end times alone (an unstreamed API's) is fitted on e2e, and says so in
    its fit_metrics, where naming TTFT for it is refused (the test above); with both, both."""
    d, log = catalog.deployment("burstgpt-vllm-1b-4090"), burstgpt(100).head(30)
    unstreamed = calibrate_requests(d, log.with_columns(observed_ttft_s=None), BUCKETS)
    assert unstreamed.fit_metrics == ("e2e",)
    assert set(unstreamed.errors["metric"]) == {"e2e"}
    assert calibrate_requests(d, log, BUCKETS).fit_metrics == ("ttft", "e2e")


def _halves(log: pl.DataFrame, column: str) -> dict[str, str]:
    """request_id -> the half its `column` observation falls in: the observed ones alternate
    in arrival order, the first in the fit half (the module docstring's split)."""
    observed = log.sort("arrival_s", maintain_order=True).filter(pl.col(column) > 0)
    return {r: ("fit", "held_out")[n % 2] for n, r in enumerate(observed["request_id"])}


def test_the_time_per_output_token_is_derived_alike_from_log_and_replay(catalog):
    """TPOT, (e2e - ttft) / (output tokens - 1), the decode stage alone: reported per half
    beside TTFT and e2e from the log's two latencies and from the replay's, each request in the
    half of its e2e observation (a one-token answer has none). Every third request here answers
    in one token, so a TPOT of its own alternation would fall in the other half from its e2e
    on most requests: a held-out TPOT the fit had seen through e2e."""
    d = catalog.deployment("burstgpt-vllm-1b-4090")
    log = burstgpt(100).head(60).with_columns(output_tokens=pl.when(
        pl.int_range(pl.len()) % 3 == 0).then(1).otherwise(pl.col("output_tokens")))
    result = calibrate_requests(d, log, BUCKETS, fit_metrics=("ttft",))
    replayed = predict_requests(d, log)
    frame = log.join(replayed, on="request_id").filter(pl.col("output_tokens") >= 2).with_columns(
        observed=(pl.col("observed_e2e_s") - pl.col("observed_ttft_s")) / (pl.col("output_tokens") - 1),
        predicted=(pl.col("e2e") - pl.col("ttft")) / (pl.col("output_tokens") - 1),
        split=pl.col("request_id").replace_strict(_halves(log, "observed_e2e_s")))
    assert frame["tpot"].to_list() == pytest.approx(frame["predicted"].to_list(), rel=1e-12)
    tpot = result.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("metric") == "tpot"))
    assert tpot.height == 2
    for row in tpot.iter_rows(named=True):
        half = frame.filter(pl.col("split") == row["split"])
        assert row["observations"] == half.height == 20
        assert row["median_observed_s"] == pytest.approx(half["observed"].median(), rel=1e-12)
        error = ((half["predicted"] / half["observed"]) - 1).abs().median()
        assert row["error_before"] == pytest.approx(error, rel=1e-9)


def test_a_first_token_after_the_end_of_the_answer_gives_no_time_per_output_token(catalog):
    """The ingest rejects such a row (formats/rows.py); in a frame built by hand it gave a
    negative TPOT. It has none now, and its TTFT and e2e are judged as they were."""
    log = burstgpt(100).head(20).with_columns(observed_ttft_s=pl.when(
        pl.int_range(pl.len()) == 4).then(pl.col("observed_e2e_s") + 1).otherwise(pl.col("observed_ttft_s")))
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), log, BUCKETS,
                                fit_metrics=("ttft",))
    counts = dict(result.errors.filter(pl.col("shape") == ALL_SHAPES).group_by("metric")
                  .agg(pl.col("observations").sum()).iter_rows())
    two_tokens = log.filter(pl.col("output_tokens") >= 2).height
    assert counts == {"ttft": 20, "e2e": 20, "tpot": two_tokens - 1}, counts


def test_the_aibrix_clients_own_tpot_is_the_derived_one_over_every_output_token():
    """The real log's client records its own TPOT, (latency - ttft) / output_tokens: the
    derived one, over output_tokens - 1, is that times output / (output - 1), request by
    request, so the two latencies the reader keeps carry the client's per-token figure."""
    import json

    records = [json.loads(line) for line in (FIXTURES / "public" / "aibrix_output.jsonl").open()]
    timed = [r for r in records if r.get("tpot") and r.get("ttft") and r["output_tokens"] >= 2]
    assert len(timed) >= 40
    for r in timed:
        derived = (r["latency"] - r["ttft"]) / (r["output_tokens"] - 1)
        assert derived * (r["output_tokens"] - 1) / r["output_tokens"] == pytest.approx(r["tpot"], rel=1e-9)


def test_a_fit_on_ttft_and_tpot_gives_each_stage_one_residual(catalog):
    """The AIBrix log fitted on TTFT and TPOT instead of e2e: every metric is still reported,
    the fit stays plausible, and the decode stage the fit now sees directly is within 5% per
    held-out request, closer than the default fit (TTFT and e2e) brings it: 5% alone held
    whether TPOT entered the fit or not (4.7% fitted on TTFT alone, 4.6% on the default)."""
    d, log = catalog.deployment("aibrix-deepseek-coder-a10"), aibrix()
    result = calibrate_requests(d, log, BUCKETS, fit_metrics=("ttft", "tpot"))
    assert result.fit_metrics == ("ttft", "tpot") and result.warnings == ()
    assert set(result.errors["metric"]) == set(REQUEST_METRICS)
    before, after = result.held_out_error("tpot")
    _, default = calibrate_requests(d, log, BUCKETS).held_out_error("tpot")
    assert after < 0.05 and after < before and after < default, (before, after, default)


def test_two_traces_in_one_frame_are_refused(catalog):
    """The calibration_requests view holds every observed trace; passed whole, its traces were
    replayed on one fleet, queueing behind each other, and calibrated as one log."""
    log = burstgpt(100).head(20)
    two = pl.concat([log.with_columns(trace=pl.lit("a")),
                     log.with_columns(trace=pl.lit("b"), request_id=pl.col("request_id") + "b")])
    with pytest.raises(CalibrationError, match=r"requests hold 2 traces \(a, b\)"):
        calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), two, BUCKETS)


def test_a_log_of_zero_latencies_says_so(catalog):
    """0 s (a log's 'not measured') is left out; a log of nothing else said it carried no
    observed latency at all."""
    log = burstgpt(100).head(20).with_columns(observed_ttft_s=pl.lit(0.0), observed_e2e_s=pl.lit(0.0))
    with pytest.raises(CalibrationError, match=r"above 0 s \(40 observation\(s\) of 0 s"):
        calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), log, BUCKETS)


@pytest.mark.parametrize(("call", "named"), [
    (lambda d, log: calibrate_requests(d, None, BUCKETS), "requests: expected a polars DataFrame, got NoneType"),
    (lambda d, log: calibrate_requests(d, log.to_dict(), BUCKETS), "got dict"),
    (lambda d, log: calibrate_requests(d, log.lazy(), BUCKETS), r"got LazyFrame \(call .collect"),
    (lambda d, log: calibrate_requests(d, log, None), "buckets: expected a polars DataFrame"),
    (lambda d, log: calibrate_requests(d, log, BUCKETS.clear()), "buckets have no 'prompt' rows"),
    (lambda d, log: calibrate_requests(d, log, BUCKETS.drop("label")), r"buckets lack column\(s\) \['label'\]"),
    (lambda d, log: calibrate_requests(d, log, BUCKETS, fit_metrics=5), "fit_metrics=5: expected some of"),
    (lambda d, log: calibrate_requests(d.name, log, BUCKETS), "d='burstgpt-vllm-1b-4090': expected a Deployment"),
    (lambda d, log: calibrate_requests(d, log.with_columns(pl.col("prompt_tokens").cast(pl.String)),
                                       BUCKETS), "column prompt_tokens holds String"),
    (lambda d, log: calibrate_candidates(d, log, BUCKETS), "expected a list of Deployments, got Deployment"),
    (lambda d, log: calibrate_candidates([d, d.name], log, BUCKETS),
     r"candidates\[1\]='burstgpt-vllm-1b-4090': expected a Deployment"),
    (lambda d, log: calibrate_candidates([d], None, BUCKETS), "requests: expected a polars DataFrame"),
    (lambda d, log: calibrate_steps(d, [], BUCKETS), "steps: expected a polars DataFrame, got list"),
], ids=["none", "dict", "lazy", "no-buckets", "empty-buckets", "bucket-column", "metrics-number",
        "name", "text-tokens", "one-candidate", "candidate-name", "candidates-none", "steps-list"])
def test_wrong_arguments_are_named(catalog, call, named):
    """Wrong argument types are a CalibrationError naming the argument; they were
    AttributeErrors ('NoneType' object has no attribute 'columns' / 'filter'), an IndexError
    for empty buckets, polars' 'cannot compare string with numeric type' or a TypeError."""
    log = burstgpt(100).head(20)
    with pytest.raises(CalibrationError, match=named):
        call(catalog.deployment("burstgpt-vllm-1b-4090"), log)


def test_unknown_step_kind_is_named(catalog):
    steps = pl.DataFrame({"kind": ["warmup"] * 8, "batch": [1] * 8, "prompt_tokens": [100] * 8,
                          "context_tokens": [0] * 8, "observed_s": [0.1] * 8})
    with pytest.raises(CalibrationError, match="warmup"):
        calibrate_steps(catalog.deployment("splitwise-70b-h100-tp2"), steps, BUCKETS)


@pytest.mark.parametrize(("column", "values", "named"), [
    ("observed_s", [0.0, 0.02] * 4, "row 0: observed_s is 0.0: expected a finite number of seconds > 0"),
    ("observed_s", [-0.05, 0.02] * 4, "observed_s is -0.05"),
    ("observed_s", [None, 0.02] * 4, "observed_s is None"),
    ("kind", [None, "warmup"] * 4, r"step kind\(s\) \[None, 'warmup'\]"),
], ids=["zero", "negative", "missing", "missing-and-unknown-kind"])
def test_a_step_time_or_kind_that_cannot_be_fitted_is_named(catalog, column, values, named):
    """Step times of 0, below 0 or missing stopped scipy with 'Residuals are not finite in the
    initial point', and a missing kind beside an unknown one with a TypeError from sorting."""
    steps = pl.DataFrame({"kind": ["prefill", "decode"] * 4, "batch": [1] * 8,
                          "prompt_tokens": [100] * 8, "context_tokens": [200] * 8,
                          "observed_s": [0.05, 0.02] * 4}).with_columns(pl.Series(column, values))
    with pytest.raises(CalibrationError, match=named):
        calibrate_steps(catalog.deployment("splitwise-70b-h100-tp2"), steps, BUCKETS)


@pytest.mark.parametrize(("perf_model", "tp", "named"), [
    (None, 2, "perf_model: expected a polars DataFrame, got NoneType"),
    (pl.DataFrame({"model": ["llama2-70b"]}), 2, r"perf_model lacks column\(s\) \['batch_size'"),
    ("file", "2", "tp='2': expected a whole number"),
], ids=["none", "columns", "tp-text"])
def test_perf_model_arguments_are_named(perf_model, tp, named):
    """perf_model_steps failed with an AttributeError, polars' ColumnNotFoundError or its
    'cannot compare string with numeric type'."""
    if isinstance(perf_model, str):   # read here, not at collection
        perf_model = pl.read_csv(FIXTURES / "splitwise" / "perf_model_llama2_70b.csv")
    with pytest.raises(CalibrationError, match=named):
        perf_model_steps(perf_model, "llama2-70b", "a100-80gb", tp)


SHARED_BURSTGPT = SHARED / "burstgpt-vllm-replay-logs"
# out_len units per generated token of each run, from its engine log (tests/fixtures/README.md)
OUT_LEN_PER_TOKEN = {100: 6.56, 1000: 6.48}


@pytest.mark.parametrize("scale", [100, 1000])
def test_calibration_on_a_log_ingested_by_read_trace(catalog, scale):
    """End to end on the shared log itself: read_trace ingests the BurstGPT vLLM detail log
    (format detected), and its canonical requests calibrate the deployment that served it: the
    held-out half's median TTFT comes within 10% of the observed one, from ~75-90% off."""
    path = SHARED_BURSTGPT / f"detail_log_scale{scale}_prompt500.json"
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/traces/ not mounted)")
    from pipelines.formats import read_trace

    ingested = read_trace(path, out_len_per_token=OUT_LEN_PER_TOKEN[scale])
    assert ingested.format == "burstgpt-vllm" and ingested.rows_read == ingested.rows.height == 500
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), ingested.requests,
                                BUCKETS, fit_metrics=("ttft",))
    before, after = result.held_out_error("ttft", "shape_error")
    assert before > 0.5 and after < 0.10, (before, after)


def llmperf(name: str) -> pl.DataFrame:
    """A whole LLMPerf leaderboard file (5 concurrent clients, as the leaderboard ran them)."""
    from pipelines.formats import read_trace

    return read_trace(FIXTURES / "public" / f"{name}.json", concurrency=5).requests


def test_llmperf_log_calibrates_within_ten_percent_on_the_held_out_half(catalog):
    """Fireworks' Llama-2-7B endpoint (Dec 2023; GPU not published): on an A100 the defaults miss
    its TTFT by ~80% (the client reaches it across the internet, through the provider's API
    front end); fitted on half the requests, the other half's TTFT and end-to-end latency are
    each within 10% per request, and the fit is physically plausible. (The log is one request
    shape: per request the model only matches its own spread, the shape-median baseline.)"""
    deployment = catalog.build(model="llama-2-7b", gpu="a100-80gb-sxm", tp=1)
    result = calibrate_requests(deployment, llmperf("fireworks_7b"), BUCKETS)
    assert result.warnings == ()
    ttft_before, ttft_after = result.held_out_error("ttft")
    e2e_before, e2e_after = result.held_out_error("e2e")
    assert ttft_before > 0.5 and ttft_after <= 0.10, (ttft_before, ttft_after)
    assert e2e_after <= 0.10 and e2e_after < e2e_before, (e2e_before, e2e_after)
    assert result.after.network.one_way_s > 5 * result.before.network.one_way_s


def test_a_log_faster_than_the_deployment_can_be_is_flagged(catalog):
    """Anyscale's Llama-2-70B answers 150 tokens in 2.3 s: more than bf16 weights on 4 x A100
    can stream even at peak bandwidth, so whatever the fit does, the result says the log was
    served by something else."""
    deployment = catalog.build(model="llama-2-70b", gpu="a100-80gb-sxm", tp=4)
    result = calibrate_requests(deployment, llmperf("anyscale_70b"), BUCKETS)
    assert any(w.startswith("median observed e2e") and "faster than" in w for w in result.warnings), \
        result.warnings


def test_a_fit_that_needs_more_than_peak_is_flagged(catalog):
    """Step times 0.3 x the measured ones: the fit can only push both efficiencies to 100% of
    peak, and says so."""
    base = catalog.deployment("splitwise-70b-h100-tp2")
    steps = perf_model_steps(pl.read_csv(FIXTURES / "splitwise" / "perf_model_llama2_70b.csv"),
                             "llama2-70b", "h100-80gb", 2)
    result = calibrate_steps(base, steps.with_columns(pl.col("observed_s") * 0.3), BUCKETS)
    assert set(result.at_bound()) >= {"compute_efficiency", "bandwidth_efficiency"}
    assert sum("at its bound" in w for w in result.warnings) == len(result.at_bound())
    # the bound is named: "fitted to 0.9631, at its bound" read as a bound of 0.9631, not 100%
    bandwidth = [w for w in result.warnings if w.startswith("bandwidth_efficiency was fitted")]
    assert len(bandwidth) == 1 and ", at its bound of 1 (within 5%, as close as the fit" \
        " settles): splitwise-70b-h100-tp2" in bandwidth[0], bandwidth
    assert calibrate_steps(base, steps, BUCKETS).warnings == ()


def test_the_replay_beats_the_shape_median_baseline_under_load(catalog):
    """At 1000x time compression the BurstGPT server is overloaded: a lookup of each shape's
    median TTFT misses a held-out request by ~100%, the calibrated replay (which queues the
    whole log) by under half of that."""
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), burstgpt(1000),
                                BUCKETS, fit_metrics=("ttft",))
    held = result.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("split") == "held_out")
                                & (pl.col("metric") == "ttft"))
    baseline, after = held["error_baseline"][0], held["error_after"][0]
    assert baseline > 0.8 and after < baseline / 2, (baseline, after)


def test_the_documents_say_the_x1000_fixtures_median_is_not_within_10_percent(catalog):
    """With the per-sequence overhead fitted, the x1000 fixture's held-out median TTFT stops
    14% off (3.7-7.4% with four fitted numbers): docs/physics.md section 6 still said the fit
    brings it within 3.7-4.8% and that the 10% target is met for the whole-log median."""
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), burstgpt(1000),
                                BUCKETS, fit_metrics=("ttft",))
    _, after = result.held_out_error("ttft", "shape_error")
    assert after > 0.10, after
    physics = " ".join((Path(__file__).resolve().parents[2] / "docs" / "physics.md").read_text().split())
    assert f"and {after:.0%} (the ×1000 fixture, `bench/README.md`)" in physics
    assert ("target is met for the whole-log median TTFT but on the ×1000 fixture's five-number fit,"
            " **not per request**") in physics


def test_a_shape_only_in_the_held_out_half_still_has_a_baseline(catalog):
    """The baseline of a shape the fit half never saw falls back to its metric's fit-half median,
    so the `all` rows' baseline covers the same observations as their errors."""
    steps = perf_model_steps(pl.read_csv(FIXTURES / "splitwise" / "perf_model_llama2_70b.csv"),
                             "llama2-70b", "h100-80gb", 2).head(40)
    lone = steps.head(1).with_columns(batch=pl.lit(3, pl.Int64), observed_s=pl.col("observed_s") * 3)
    steps = pl.concat([steps.head(1), lone, steps.slice(1)])  # row 1: the held-out half
    result = calibrate_steps(catalog.deployment("splitwise-70b-h100-tp2"), steps, BUCKETS)
    lone_shape = result.errors.filter(pl.col("shape").str.starts_with("prefill batch 3 "))
    assert lone_shape["split"].to_list() == ["held_out"]
    assert result.errors["error_baseline"].null_count() == 0
    # README's calibration_errors row said only "its shape's median in the fit half", which such
    # a shape has none of: a reader could not tell what its error_baseline was measured against
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()
    (row,) = [line for line in readme if line.startswith("| `calibration_errors` |")]
    assert ("a shape with no observation in the fit half is predicted by its metric's median in"
            " the fit half") in row


def test_candidates_rule_out_the_implausible_and_keep_a_plausible_one(catalog):
    """Anyscale's Llama-2-70B offered on 4 x A100 bf16 (too slow to have served it) and on
    4 x H100 fp8: the A100 is ruled out with its reason, the H100 kept."""
    offered = [catalog.build(model="llama-2-70b", gpu="a100-80gb-sxm", tp=4),
               catalog.build(model="llama-2-70b", gpu="h100-sxm", tp=4, weights="fp8")]
    choice = calibrate_candidates(offered, llmperf("anyscale_70b"), BUCKETS)
    assert choice.kept.before.name == offered[1].name and choice.kept.warnings == ()
    rows = {r["deployment"]: r for r in choice.candidates.iter_rows(named=True)}
    assert not rows[offered[0].name]["plausible"] and not rows[offered[0].name]["kept"]
    assert "faster than" in rows[offered[0].name]["why_not"]
    assert rows[offered[1].name]["kept"] and rows[offered[1].name]["why_not"] is None
    assert rows[offered[1].name]["fit_error"] == pytest.approx(choice.kept.fit_error)


def test_a_candidate_of_another_model_than_the_log_names_is_ruled_out(catalog):
    """Anyscale's Llama-2-70B log offered the 70B on 4 x H100 fp8 and Llama-3.1-8B on an A100:
    the 8B's catalog factors explain the fit half a little better (12.5% against 13.3%), and it
    was kept and called plausible while the asset's implausible_fits said the log names another
    model. Named with the catalog's models, a candidate of another model than the log names is
    ruled out before the choice, with the reason; a name the catalog cannot place changes
    nothing."""
    offered = [catalog.build(model="llama-2-70b", gpu="h100-sxm", tp=4, weights="fp8"),
               catalog.build(model="llama-3.1-8b", gpu="a100-80gb-sxm")]
    log = llmperf("anyscale_70b")
    models = catalog.models["model"]
    unnamed = calibrate_candidates(offered, log.with_columns(model=pl.lit("gpt-4")), BUCKETS,
                                   catalog_models=models)
    assert unnamed.kept.before.name == offered[1].name and unnamed.kept.warnings == ()
    named = log.with_columns(model=pl.lit("meta-llama/Llama-2-70b-chat-hf"))
    choice = calibrate_candidates(offered, named, BUCKETS, catalog_models=models)
    assert choice.kept.before.name == offered[0].name and choice.kept.warnings == ()
    rows = {r["deployment"]: r for r in choice.candidates.iter_rows(named=True)}
    assert not rows[offered[1].name]["plausible"] and not rows[offered[1].name]["kept"]
    assert rows[offered[1].name]["why_not"] == (
        f"the log names model 'meta-llama/Llama-2-70b-chat-hf' (llama-2-70b in the catalog) on"
        f" {log.height:,} of its {log.height:,} requests, and {offered[1].name} serves"
        f" llama-3.1-8b: the log was served by another model")
    assert rows[offered[1].name]["catalog_error"] < rows[offered[0].name]["catalog_error"]


def test_the_held_out_half_takes_no_part_in_the_choice(catalog):
    """Tripling every held-out latency (alternate requests in arrival order) changes neither
    the candidate kept nor its fitted factors, only its held-out errors."""
    offered = [catalog.build(model="llama-2-7b", gpu="a100-80gb-sxm"),
               catalog.build(model="llama-2-7b", gpu="h100-sxm")]
    log = llmperf("fireworks_7b").sort("arrival_s", maintain_order=True)
    held_out = pl.int_range(pl.len()) % 2 == 1
    slowed = log.with_columns(pl.when(held_out).then(pl.col(c) * 3).otherwise(pl.col(c)).alias(c)
                              for c in ("observed_ttft_s", "observed_e2e_s"))
    plain, tripled = (calibrate_candidates(offered, frame, BUCKETS) for frame in (log, slowed))
    assert plain.kept.before.name == tripled.kept.before.name
    assert plain.kept.parameters() == tripled.kept.parameters()
    assert tripled.kept.held_out_error("e2e")[1] > 0.5 > plain.kept.held_out_error("e2e")[1]


def test_no_candidate_is_refused(catalog):
    with pytest.raises(CalibrationError, match="no candidate"):
        calibrate_candidates([], llmperf("fireworks_7b"), BUCKETS)


def aibrix() -> pl.DataFrame:
    """The AIBrix benchmark-client log (deepseek-coder-6.7b-instruct on one A10, vLLM 0.6.2)."""
    from pipelines.formats import read_trace

    return read_trace(FIXTURES / "public" / "aibrix_output.jsonl").requests


AIBRIX_GPUS = ("a10", "l4", "l40s", "a100-80gb-sxm", "h100-sxm")


@pytest.fixture(scope="module")
def aibrix_choice(catalog):
    """The AIBrix log offered its deployment on every single GPU of the catalog."""
    served = catalog.deployment("aibrix-deepseek-coder-a10")
    return calibrate_candidates([catalog.on_gpu(served, gpu) for gpu in AIBRIX_GPUS], aibrix(), BUCKETS)


def test_default_factors_single_out_the_gpu_that_served_the_aibrix_log(aibrix_choice):
    """The log names no GPU; AIBrix deployed this model on A10s. With the catalog's default
    factors the A10 predicts the held-out half's end-to-end latency within 10% per request,
    and every other single GPU of the catalog misses it by more than a third (the L4 is too
    slow, the others too fast): decode at ~37 ms per token is the A10's bandwidth."""
    assert [r.before.gpu.gpu for r in aibrix_choice.calibrations] == list(AIBRIX_GPUS)
    for result in aibrix_choice.calibrations:
        gpu, default_error = result.before.gpu.gpu, result.held_out_error("e2e")[0]
        assert (default_error <= 0.10) == (gpu == "a10"), (gpu, default_error)
        assert gpu == "a10" or default_error > 0.35, (gpu, default_error)


def test_aibrix_log_calibrates_below_its_own_spread(catalog):
    """On its A10, fitted on half the requests: the held-out TTFT comes from 43% off (the 1 ms
    client path assumed before the fit) to within about 11% per request, the fitted metrics
    below the log's own shape-median baseline, and the fitted factors stay near the family's
    defaults. (The time per output token, not fitted, is 4.6% off per held-out request against
    a baseline of 3.7%: the A10's decode hardly varies between requests.) Started from
    the catalog's factors alone the fit stalls at 40% (the client path hardly moves): the second
    start, from the client latency fitted alone, is what gets it there."""
    result = calibrate_requests(catalog.deployment("aibrix-deepseek-coder-a10"), aibrix(), BUCKETS)
    assert result.warnings == ()
    ttft_before, ttft_after = result.held_out_error("ttft")
    assert ttft_before > 0.3 and ttft_after < 0.12, (ttft_before, ttft_after)
    held = result.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("split") == "held_out")
                                & pl.col("metric").is_in(list(result.fit_metrics)))
    assert (held["error_after"] < held["error_baseline"]).all(), held
    fitted = result.parameters()
    for factor in ("compute_efficiency", "bandwidth_efficiency"):
        before, after = fitted[factor]
        assert 0.8 < after / before < 1.25, (factor, before, after)


def test_a_fit_metric_the_log_does_not_observe_is_named(catalog):
    """Fitted on TTFT, a log that observed only end-to-end latencies was refused with '0
    observations in the fit half', as if it were too short: it names what the log observes."""
    log = aibrix().with_columns(observed_ttft_s=None)
    with pytest.raises(CalibrationError, match=r"^0 observations of ttft in the fit half: need at"
                                               rf" least {len(PARAMETERS)} \(observations in the log, both halves: e2e 52\)"):
        calibrate_requests(catalog.deployment("aibrix-deepseek-coder-a10"), log, BUCKETS, ("ttft",))


def test_absurd_observations_are_counted_not_absorbed_in_silence(catalog):
    """Two requests of the AIBrix log given 5,000 s (its median TTFT is 0.13 s, its e2e 12.6 s;
    the ingest takes up to a day): the robust loss absorbed them, the fit stayed plausible and
    nothing said so. Each fitted metric now counts its observations more than 10 x off the
    fitted prediction and names the worst; a metric left out of the fit is not judged."""
    d = catalog.deployment("aibrix-deepseek-coder-a10")
    clean = aibrix()
    assert calibrate_requests(d, clean, BUCKETS).outliers == ()
    first = clean.sort("arrival_s")["request_id"][:4].to_list()
    absurd = pl.col("request_id").is_in([first[0], first[3]])   # one in each half
    log = clean.with_columns(observed_ttft_s=pl.when(absurd).then(5000.0).otherwise("observed_ttft_s"),
                             observed_e2e_s=pl.when(absurd).then(5000.0).otherwise("observed_e2e_s"))
    result = calibrate_requests(d, log, BUCKETS, fit_metrics=("ttft",))
    assert result.warnings == ()
    (ttft,) = result.outliers
    assert ttft.startswith("2 of 52 observed ttft are more than 10× off the fitted prediction"
                           " (1 in the fit half")
    assert "the worst, request aibrix_output:" in ttft and "observed 5000 s" in ttft


def test_observations_far_faster_than_the_fit_are_counted_too(catalog):
    """Outliers are counted either way (|log(predicted / observed)| > ln 10): a TTFT logged in
    the wrong unit reads 1,000 x too fast as well as too slow. The test above only reached the
    slow side; an implementation counting only observations slower than the fit passed it."""
    d = catalog.deployment("aibrix-deepseek-coder-a10")
    clean = aibrix()
    first = clean.sort("arrival_s")["request_id"][:2].to_list()
    log = clean.with_columns(observed_ttft_s=pl.when(pl.col("request_id").is_in(first))
                             .then(pl.col("observed_ttft_s") / 1000).otherwise("observed_ttft_s"))
    (ttft,) = calibrate_requests(d, log, BUCKETS, fit_metrics=("ttft",)).outliers
    assert ttft.startswith("2 of 52 observed ttft are more than 10× off the fitted prediction"
                           " (1 in the fit half")


def test_a_log_slower_than_every_bound_asks_whether_its_latencies_are_milliseconds(catalog):
    """A CSV log whose latencies are milliseconds, its sidecar giving no latency_unit, is read
    1,000 x slow: every factor ends at its slow bound, five warnings each saying the deployment
    'cannot explain the log without it', and none naming the setting that reads it right. A
    log merely slower than its deployment (the 6.7B AIBrix log on the 1B RTX 4090) is not told so."""
    hint = "latencies in milliseconds read as seconds? (a CSV, JSONL or Parquet log's sidecar takes"
    in_ms = aibrix().with_columns(pl.col("observed_ttft_s", "observed_e2e_s") * 1000)
    for name in ("aibrix-deepseek-coder-a10", "azure-2023-70b-h100"):
        warnings = calibrate_requests(catalog.deployment(name), in_ms, BUCKETS).warnings
        (said,) = [w for w in warnings if hint in w]
        assert said.startswith(f"every factor ended at its slow bound: the log is slower than {name} (")
        assert said.endswith(f"at its slowest; {hint} \"latency_unit\": \"ms\")"), name
    slower = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), aibrix(), BUCKETS)
    assert not any("milliseconds" in w for w in slower.warnings)


def test_a_log_far_faster_than_its_deployment_asks_whether_its_latencies_are_seconds(catalog):
    """The other way round: a CSV log in seconds whose sidecar says "latency_unit": "ms" is read
    1,000 x fast (the AIBrix log: its median TTFT 300 x and e2e 615 x faster than the A10 at
    100% of peak), and the warnings said only 'served by other hardware, parallelism, precision
    or model'. Past UNIT_SLIP_RATIO in every fitted metric they ask about the unit; a log merely
    faster than a wrong deployment is not asked (the 1B BurstGPT log on 70B on 8 x L4: TTFT
    1,656 x, its replay queueing, but e2e 18 x)."""
    hint = ("latencies in seconds read as milliseconds? (a CSV, JSONL or Parquet log's sidecar's"
            ' "latency_unit", "s" unless set, is the unit of its observed latencies)')
    d = catalog.deployment("aibrix-deepseek-coder-a10")
    fast = aibrix().with_columns(pl.col("observed_ttft_s", "observed_e2e_s") / 1000)
    warnings = calibrate_requests(d, fast, BUCKETS).warnings
    (said,) = [w for w in warnings if hint in w]
    assert said == (f"every fitted metric's median is more than {UNIT_SLIP_RATIO:g}× faster than"
                    f" {d.name} (deepseek-coder-6.7b on 1 x a10, bf16 weights) can be at 100% of"
                    f" peak compute and bandwidth: {hint}")
    assert any(w.startswith("median observed ttft 0.0001276 s is faster than") for w in warnings)
    wrong = catalog.build(model="llama-3.1-70b", gpu="l4", tp=8)
    slower = calibrate_requests(wrong, burstgpt(100), BUCKETS).warnings
    assert any(w.startswith("median observed ttft") for w in slower)
    assert not any("milliseconds" in w for w in slower)


def test_candidates_are_compared_with_their_catalog_factors(aibrix_choice):
    """After a full fit every GPU but the L4 explains the AIBrix log nearly as well as the A10
    (on 2026-12-01, with the per-sequence overhead fitted too, the A100 fits the fit half within
    7.6% and the H100 9.9%, the A10 5.7%: five free factors absorb a wrong GPU), so the choice
    compares the candidates with their catalog factors, only the client latency fitted: the A10
    is kept, and every candidate's row shows both errors."""
    assert aibrix_choice.kept.before.gpu.gpu == "a10"
    rows = {r["deployment"].split("@")[1]: r for r in aibrix_choice.candidates.iter_rows(named=True)}
    a10 = rows.pop("a10-tp1-bf16")
    wrong = [r for r in rows.values() if r["plausible"]]
    assert len(wrong) == 3   # all but the L4
    assert min(r["fit_error"] for r in wrong) < a10["fit_error"] + 0.03
    assert a10["catalog_error"] < 0.10 < 0.25 < min(r["catalog_error"] for r in wrong)
    assert a10["catalog_error"] == pytest.approx(aibrix_choice.kept.catalog_error)


def _doc_pct(x: float) -> str:
    """A share as docs/physics.md writes it: one decimal below 10%, none above."""
    return f"{x:.1%}" if x < 0.0995 else f"{x:.0%}"


def test_the_documents_give_the_aibrix_figures_of_the_current_fit(aibrix_choice):
    """docs/physics.md section 6 gave, as current, the AIBrix figures of the four-number fit:
    held-out e2e 6.5% with catalog factors (7.5% now, as the calibration asset reports on the
    same log), a fit-half error of 7.4% on the A10 against 28-60% (8.1% against 28-62%), and the
    L40S as the wrong GPU that fits nearly as well (the A100 does, 7.6% against 5.7%)."""
    physics = " ".join((Path(__file__).resolve().parents[2] / "docs" / "physics.md").read_text().split())
    by_gpu = {r.before.gpu.gpu: r for r in aibrix_choice.calibrations}
    rows = {r["deployment"].split("@")[1].split("-tp")[0]: r
            for r in aibrix_choice.candidates.iter_rows(named=True)}
    a10 = by_gpu["a10"]

    def held(metric, column="error"):
        row = a10.errors.filter((pl.col("shape") == ALL_SHAPES) & (pl.col("split") == "held_out")
                                & (pl.col("metric") == metric)).row(0, named=True)
        return [_doc_pct(row[c]) for c in (f"{column}_before", f"{column}_after", "error_baseline")]

    (tb, ta, tbase), (eb, ea, ebase) = held("ttft"), held("e2e")
    (tsb, tsa, _), (esb, esa, _) = held("ttft", "shape_error"), held("e2e", "shape_error")
    assert (f"TTFT {tb} → {ta} ({tbase}), shape error {tsb} → {tsa}; e2e {eb} → {ea} ({ebase}),"
            f" shape error {esb} → {esa}.") in physics
    assert f"latency within {eb} per request" in physics
    assert f"Per request the held-out TTFT is {ta} and e2e {ea}:" in physics
    e2e = {gpu: _doc_pct(r.held_out_error("e2e")[0]) for gpu, r in by_gpu.items()}
    assert (f"held-out e2e {e2e['a10']} as they stand, against {e2e['l40s']} (L40S),"
            f" {e2e['a100-80gb-sxm']} (A100), {e2e['h100-sxm']} (H100) and {e2e['l4']} (L4,") in physics
    others = [r["catalog_error"] for gpu, r in rows.items() if gpu != "a10"]
    assert (f"the fit-half error is {_doc_pct(rows['a10']['catalog_error'])} on the A10 against"
            f" {min(others) * 100:.0f}–{max(others):.0%} on the others") in physics
    fit = {gpu: _doc_pct(r["fit_error"]) for gpu, r in rows.items()}
    assert (f"the A100 fits the fit half nearly as well as the A10 ({fit['a100-80gb-sxm']} against"
            f" {fit['a10']}; the H100 {fit['h100-sxm']}, the L40S {fit['l40s']};") in physics


def calibration_bench():
    """bench/validation_calibration.py as a module (bench/ is no package)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "validation_calibration.py"
    spec = importlib.util.spec_from_file_location("validation_calibration", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_calibration_bench_reads_the_shared_traces_where_the_tests_do(monkeypatch, tmp_path):
    """bench/validation_calibration.py looked only beside the checkout: from a clone elsewhere,
    with FLEETSPEND_PUBLIC_TRACES set as for the tests, it skipped the shared BurstGPT logs and
    ran 2 of the 19 LLMPerf files, printing '2 of 2 logs have a plausible deployment'."""
    monkeypatch.setenv("FLEETSPEND_PUBLIC_TRACES", str(tmp_path))
    bench = calibration_bench()
    assert bench.SHARED_BURSTGPT == tmp_path / "burstgpt-vllm-replay-logs"
    assert bench.SHARED_LLMPERF == tmp_path / "llmperf-leaderboard" / "individual"


def test_the_calibration_bench_prints_the_fitted_per_sequence_overhead(aibrix_choice):
    """The bench's AIBrix candidates table rounded every fitted factor to four decimals of a
    second, so the per-sequence overhead (microseconds) read 0 on every candidate."""
    rows = [calibration_bench().candidate_row(r) for r in aibrix_choice.calibrations]
    for row, r in zip(rows, aibrix_choice.calibrations, strict=True):
        fitted = r.after.efficiency.sequence_overhead_s
        assert row["sequence_overhead_s"] == pytest.approx(fitted, rel=1e-3) and fitted > 0


def test_step_measurements_faster_than_peak_are_left_out_and_named(catalog):
    """SplitwiseSim's batch-64 prefills of 512 tokens take 0.79 s on 2 x A100, 8 x less than its
    batch-32 ones and 9 x faster than the GPUs' peak FLOP/s allows: no factor reaches them, and
    they were fitted and judged with the others. Left out now, and named; the rest is kept."""
    d = catalog.deployment("splitwise-70b-a100-tp2")
    steps = perf_model_steps(pl.read_csv(FIXTURES / "splitwise" / "perf_model_llama2_70b.csv"),
                             "llama2-70b", "a100-80gb", 2)
    result = calibrate_steps(d, steps, BUCKETS)
    batch_64 = steps.filter((pl.col("kind") == "prefill") & (pl.col("batch") == 64)).height
    assert batch_64 > 0
    [sentence] = result.left_out
    assert sentence.startswith(f"{batch_64} of {batch_64} measurements of prefill batch 64 /")
    assert "(64 x 512 prompt tokens) left out of the fit and the errors: measured 0.79" in sentence
    assert "faster than splitwise-70b-a100-tp2 can be" in sentence
    # the ideal keeps 8 ms of launch and all-reduce latency per step: not "no overheads"
    assert sentence.endswith("s at 100% of peak compute and bandwidth and no step overhead, with"
                             " the catalog's all-reduce and per-layer launch costs)")
    counted = result.errors.filter(pl.col("shape") == ALL_SHAPES)["observations"].sum()
    assert counted == steps.height - batch_64
    # most of a metric out of reach is the wrong deployment, not bad rows: kept and flagged
    slow = calibrate_steps(d, steps.with_columns(pl.col("observed_s") * 0.3), BUCKETS)
    assert slow.left_out == () and slow.at_bound()


def test_the_calibration_bench_offers_each_llmperf_candidate_one_replica_per_client(monkeypatch,
                                                                                   tmp_path):
    """A hosted endpoint spreads the leaderboard's five clients over a fleet; a one-replica
    candidate made the replay queue each client behind the others' steps (docs/physics.md
    section 6). The bench's candidates carry LLMPERF_REPLICAS = LLMPERF_CLIENTS replicas."""
    bench = calibration_bench()
    monkeypatch.setattr(bench, "SHARED_LLMPERF", tmp_path / "absent")  # the two fixture logs

    class Offered(Exception):
        pass

    def offered(candidates, *args, **kwargs):
        raise Offered(candidates)

    monkeypatch.setattr(bench, "calibrate_candidates", offered)
    with pytest.raises(Offered) as got:
        bench.llmperf(load_catalog(), BUCKETS)
    candidates = got.value.args[0]
    assert len(candidates) >= 3
    assert {d.replicas for d in candidates} == {bench.LLMPERF_CLIENTS} == {5}


def test_the_slower_log_the_documents_cite_passes_at_the_factor_they_name(catalog):
    """README and docs/physics.md section 6 said the AIBrix log (6.7B on an A10) fitted on the 1B
    RTX 4090 deployment 'passes at 6.5% of peak bandwidth': the fit that passes ends at 6.5% of
    peak compute, with 66% of peak bandwidth, so a reader looking for the tell-tale low factor
    looked at the wrong column."""
    result = calibrate_requests(catalog.deployment("burstgpt-vllm-1b-4090"), aibrix(), BUCKETS)
    compute, bandwidth = (result.parameters()[p][1] for p in ("compute_efficiency", "bandwidth_efficiency"))
    assert result.warnings == () and round(compute, 3) == 0.065 and round(bandwidth, 2) == 0.66
    root = Path(__file__).resolve().parents[2]
    readme, physics = (" ".join((root / f).read_text().split()) for f in ("README.md", "docs/physics.md"))
    said = "6.5% of peak compute (and 66% of peak bandwidth)"
    assert f"passes at {said}" in readme and f"passes with {said}" in physics
    assert "6.5% of peak bandwidth" not in readme + physics
