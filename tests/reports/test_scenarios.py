"""What-if scenarios: the shipped file covers every lever the issue names, bad files fail with
one clear message, and each scenario really changes the replay the way its physics says."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.formats import read_azure_csv
from pipelines.replay import replay_fleet
from pipelines.reports.scenarios import (
    COLUMNS,
    FLEET_SCHEMA,
    Scenario,
    ScenarioError,
    ScenarioNotApplicable,
    change_text,
    load_scenarios,
    lowers_precision,
    price_change_text,
    replay_scenarios,
    scenario_deployment,
    scenario_requests,
)
from pipelines.roofline import load_catalog
from pipelines.settings import reference_dir

ROOT = Path(__file__).resolve().parents[2]
CONV = ROOT / "data" / "samples" / "AzureLLMInferenceTrace_conv.csv"
BASELINE = "azure-2023-70b-h100"
MOONCAKE = ROOT / "tests" / "fixtures" / "mooncake" / "conversation_trace_excerpt.jsonl"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def baseline(catalog):
    return catalog.deployment(BASELINE)


@pytest.fixture(scope="module")
def conv_head():
    """The first 2,000 requests of the real chat trace."""
    return read_azure_csv(CONV).requests.head(2000)


def test_shipped_scenarios_cover_every_lever():
    scenarios = {s.scenario: s for s in load_scenarios(reference_dir() / "scenarios.csv")}
    assert {s.gpu for s in scenarios.values()} >= {"h200-sxm", "b200"}
    assert any(s.weights == "fp8" and s.kv_cache == "fp8" for s in scenarios.values())
    assert any(s.tp is not None for s in scenarios.values())
    assert any(s.replicas is not None for s in scenarios.values())
    assert any(s.max_seqs is not None for s in scenarios.values())
    assert any(s.prefix_cache is not None for s in scenarios.values())
    assert any(s.output_cap is not None for s in scenarios.values())
    assert all(s.description and s.source for s in scenarios.values())


def _write(tmp_path: Path, rows: list[str], header: str = ",".join(COLUMNS)) -> Path:
    path = tmp_path / "scenarios.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.mark.parametrize(("rows", "message"), [
    (["a,x,,,,,,,,,", "a,y,,,,,,,,,"], "appears more than once"),
    (["baseline,x,,,,,,,,,"], "not 'baseline'"),
    (["Big Name,x,,,,,,,,,"], "lower-case"),
    ([",x,,,,,,,,,"], "scenario name is empty: expected lower-case"),   # was "name None must be"
    (["a,x,,,,,,,1.5,,"], "prefix_cache='1.5'"),
    (["a,x,,,,,,,sometimes,,"], "prefix_cache='sometimes'"),
    (["a,x,,,,,0,,,,"], "replicas=0"),
    (["a,x,,,,,,,,-5,"], "output_cap=-5"),
    (["a,x,,two,,,,,,,"], "tp='two', expected a whole number >= 1"),        # was the CSV parser's dtype advice
    (["a,x,,16,,,,,,,assumption"], r"tp=16, expected a whole number in \[1, 8\]"),  # was skipped per baseline
    (["a,x,,,,,,,,,", "b,y,,,,,,0.5,,,"], "line 3: max_seqs='0.5', expected a whole number"),
])
def test_bad_rows_name_the_file_and_line(tmp_path, rows, message):
    path = _write(tmp_path, rows)
    with pytest.raises(ScenarioError, match=message) as err:
        load_scenarios(path)
    text = str(err.value)
    assert str(path) in text and ("line 2" in text or "line 3" in text)



def test_every_bad_row_is_named_in_one_error(tmp_path):
    """Each wrong row and cell has its line, not the first alone."""
    path = _write(tmp_path, ["a,x,,two,,,,,,,x", "b,y,,,,,0,,,,", "a,z,,,,,,,,,x"])
    with pytest.raises(ScenarioError) as err:
        load_scenarios(path)
    assert [line.removeprefix(f"scenarios file {path}, ") for line in str(err.value).splitlines()] == [
        "line 2: tp='two', expected a whole number >= 1",
        "line 2: scenario 'a' appears more than once",
        "line 3: replicas=0, expected a whole number >= 1",
        "line 3: source is empty: expected where the scenario's numbers come from, or that they"
        " are an assumption",
        "line 4: scenario 'a' appears more than once"]

def test_a_line_with_an_unquoted_comma_is_named(tmp_path):
    path = _write(tmp_path, ["a,x,,,,,,,,,", "b,swap to h200, same tp,h200-sxm,,,,,,,,assumption"])
    with pytest.raises(ScenarioError, match=rf"scenarios file {re.escape(str(path))} is not a"
                                            r" readable CSV: line 3 has 12 fields, more than the"
                                            r" 11 columns of the header"):
        load_scenarios(path)


def test_cells_written_with_spaces_are_read(tmp_path):
    """A count's spaces were trimmed, a name's kept: ' h200-sxm ' was an unknown GPU."""
    [scenario] = load_scenarios(_write(tmp_path, ["a ,x, h200-sxm , 2 , fp8 ,,,, 0.5 ,,assumption"]))
    assert (scenario.scenario, scenario.gpu, scenario.tp, scenario.weights, scenario.prefix_cache) == (
        "a", "h200-sxm", 2, "fp8", "0.5")


def test_a_scenario_without_its_source_is_named(tmp_path):
    """data/reference/README.md: `source` says where a number comes from or that it is an
    assumption, never empty (it was accepted)."""
    path = _write(tmp_path, ["a,x,,2,,,,,,,assumption", "b,y,,,,,2,,,,"])
    with pytest.raises(ScenarioError, match=r"line 3: source is empty"):
        load_scenarios(path)


def test_trailing_empty_columns_of_a_spreadsheet_are_dropped(tmp_path):
    """A spreadsheet that saves trailing separators adds unnamed, empty columns: they are no
    column (they were refused as '' and '_duplicated_0'); a named extra column is refused."""
    path = _write(tmp_path, ["a,x,,2,,,,,,,assumption,,"], header=",".join(COLUMNS) + ",,")
    [scenario] = load_scenarios(path)
    assert scenario.tp == 2
    with pytest.raises(ScenarioError, match="columns"):
        load_scenarios(_write(tmp_path, ["a,x,,2,,,,,,,assumption,1"],
                              header=",".join(COLUMNS) + ",extra"))


def test_a_misspelt_column_is_named_by_name(tmp_path):
    """A header typo ('replica') read as the whole header beside the expected one: the message
    names the column missing and the one it does not know."""
    path = _write(tmp_path, ["a,x,,2,,,,,,,assumption"],
                  header=",".join(COLUMNS).replace("replicas", "replica"))
    with pytest.raises(ScenarioError, match=rf"^scenarios file {re.escape(str(path))}: lacks"
                                            r" column\(s\) 'replicas'; column\(s\) 'replica'"
                                            r" unknown: expected columns \['scenario', "):
        load_scenarios(path)


def test_a_semicolon_separated_file_is_named_as_such(tmp_path):
    path = _write(tmp_path, ["a;x;;2;;;;;;;assumption"], header=";".join(COLUMNS))
    with pytest.raises(ScenarioError, match="separated by ';': expected commas"):
        load_scenarios(path)


@pytest.mark.parametrize("row", [
    'a,"x","","2","","","","","","","assumption"',   # every cell quoted, as some tools save it
    "a,x,, 2 ,,, ,,,,assumption",                      # a count cell of spaces only
])
def test_cells_quoted_empty_or_blank_keep_the_baselines_value(tmp_path, row):
    [scenario] = load_scenarios(_write(tmp_path, [row]))   # was a polars traceback
    assert scenario.tp == 2
    assert (scenario.gpu, scenario.replicas, scenario.prefix_cache) == (None, None, None)


def test_a_file_without_scenarios_is_an_error(tmp_path):
    with pytest.raises(ScenarioError, match="lists no scenario"):
        load_scenarios(_write(tmp_path, []))


def test_missing_file_and_wrong_columns(tmp_path):
    with pytest.raises(ScenarioError, match="missing"):
        load_scenarios(tmp_path / "nope.csv")
    with pytest.raises(ScenarioError, match="columns"):
        load_scenarios(_write(tmp_path, ["a,b"], header="scenario,description"))


def test_unknown_gpu_is_a_scenario_error(catalog, baseline):
    with pytest.raises(ScenarioError, match="scenario 'x'.*unknown gpu 'h300'"):
        scenario_deployment(catalog, baseline, Scenario("x", "d", gpu="h300"))


def test_gpu_swap_takes_the_new_gpu_and_its_default_price(catalog, baseline):
    d = scenario_deployment(catalog, baseline, Scenario("h200", "d", gpu="h200-sxm"))
    assert (d.gpu.gpu, d.tp, d.replicas, d.weight_dtype) == ("h200-sxm", baseline.tp, baseline.replicas, "bf16")
    assert d.gpu.hbm_bandwidth_gbs > baseline.gpu.hbm_bandwidth_gbs
    assert catalog.usd_per_gpu_hour(d) == pytest.approx(6.305)
    assert d.scheduler == baseline.scheduler and d.network == baseline.network


def test_fp8_halves_weight_and_kv_bytes(catalog, baseline):
    d = scenario_deployment(catalog, baseline, Scenario("fp8", "d", weights="fp8", kv_cache="fp8"))
    vocab = sum(d.vocab_params) / d.tp * 2.0  # the embedding table and LM head stay 16-bit
    assert d.weight_bytes_per_gpu - vocab == pytest.approx(
        (baseline.weight_bytes_per_gpu - vocab) / 2)
    assert d.kv_bytes_per_token == pytest.approx(baseline.kv_bytes_per_token / 2)
    assert (d.price_provider, d.price_plan) == (baseline.price_provider, baseline.price_plan)
    assert d.efficiency == baseline.efficiency


def test_shipped_fp8_descriptions_say_the_vocabulary_stays_bf16(catalog, baseline):
    """The fp8 and tp2-fp8 descriptions said fp8 halves the weight bytes; the embedding table and
    LM head stay 16-bit, so a 70B's fall to about 51.5% of bf16's, not half: a description says
    what halves (the transformer blocks) and what does not, with no figure that would drift."""
    d = scenario_deployment(catalog, baseline, Scenario("fp8", "d", weights="fp8", kv_cache="fp8"))
    assert d.weight_bytes_per_gpu > 0.51 * baseline.weight_bytes_per_gpu
    fp8 = [s for s in load_scenarios(reference_dir() / "scenarios.csv") if s.weights == "fp8"]
    assert {s.scenario for s in fp8} >= {"fp8", "tp2-fp8"}
    for s in fp8:
        assert "transformer blocks" in s.description, s.scenario
        assert "the embedding table and LM head staying bf16" in s.description, s.scenario


def test_a_scenario_keeps_the_baselines_own_factors_and_network(catalog):
    """A fleet whose efficiency factors and network were set (calibrated, or written in
    deployments.csv) keeps them under a scenario on the same GPU, and its network under any:
    the what-if changes only what the scenario names. (On a baseline of the catalog's defaults
    the two cannot be told apart from the GPU family's defaults.)"""
    from pipelines.roofline.deployment import Network

    network = Network(one_way_s=0.1, bytes_per_token=300.0, bandwidth_bytes_per_s=1e6)
    tuned = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4, replicas=3, name="tuned",
                          compute_efficiency=0.31, bandwidth_efficiency=0.52, step_overhead_s=0.004,
                          layer_overhead_s=2e-5, network=network)
    fp8 = scenario_deployment(catalog, tuned, Scenario("fp8", "d", weights="fp8", kv_cache="fp8"))
    assert fp8.efficiency == tuned.efficiency and fp8.network == network
    swapped = scenario_deployment(catalog, tuned, Scenario("h200", "d", gpu="h200-sxm"))
    assert swapped.network == network
    assert swapped.efficiency.compute_efficiency != 0.31   # the H200's own factors


def test_fleet_shape_and_batch_limits(catalog, baseline):
    d = scenario_deployment(catalog, baseline, Scenario("t", "d", tp=2, weights="fp8", kv_cache="fp8",
                                                        replicas=6, max_seqs=32))
    assert (d.tp, d.replicas, d.gpus_per_replica, d.scheduler.max_seqs) == (2, 6, 2, 32)
    assert d.replicas * d.gpus_per_replica == baseline.replicas * baseline.gpus_per_replica


def test_the_change_is_said_in_the_baselines_own_numbers(catalog, baseline):
    """scenarios.csv's prose is written for the demo fleet (3 x TP4 H100); the `change` column
    says what a scenario does to whatever fleet is replayed, here the demo's and one A100."""
    shipped = {s.scenario: s for s in load_scenarios(reference_dir() / "scenarios.csv")}
    on_demo = {name: change_text(baseline, s) for name, s in shipped.items()}
    assert on_demo["tp2-fp8"] == ("tp 4 → 2; weights bf16 → fp8; KV cache bf16 → fp8;"
                                  " replicas 3 → 6; 12 → 12 GPUs per trace")
    assert on_demo["h200"] == "GPU h100-sxm → h200-sxm"
    # a hit share the log does not show (the Azure traces log no hits): the report's headline
    # named the lever "50% of each prompt served from the prefix cache", as if turning the
    # cache on would give that, while scenarios.csv's source calls it an assumption
    assert on_demo["prefix-cache"] == "an assumed 50% of each prompt served from the prefix cache"
    assert on_demo["output-cap-256"] == "outputs capped at 256 tokens"
    # the share as given, not rounded to a whole percent (0.125 read "an assumed 12%")
    assert [change_text(baseline, Scenario("s", "", prefix_cache=share))
            for share in ("0.125", "0.005", "0.12345")] == [
        "an assumed 12.5% of each prompt served from the prefix cache",
        "an assumed 0.5% of each prompt served from the prefix cache",
        "an assumed 12.345% of each prompt served from the prefix cache"]
    seed = catalog.deployment("seed-example")
    assert change_text(seed, shipped["replicas-2"]) == "replicas 1 → 2; 1 → 2 GPUs per trace"
    assert change_text(seed, shipped["h200"]) == "GPU a100-80gb-sxm → h200-sxm"
    for unchanged in (Scenario("same", "", replicas=3), Scenario("none", "")):
        assert change_text(baseline, unchanged) == "nothing: the baseline's own settings"


def test_the_change_writes_counts_as_the_pipeline_does(catalog, baseline):
    """`change` is quoted by the report's table and headline, where every other count has comma
    thousands separators: a fleet resized to 500 replicas read "12 → 2000 GPUs per trace" and a
    batch cap "max sequences 256 → 100000" beside "outputs capped at 4,096 tokens", and a cap of
    one token read "capped at 1 tokens"."""
    assert change_text(baseline, Scenario("big", "", replicas=500, max_seqs=10_000)) == (
        "replicas 3 → 500; max sequences 256 → 10,000; 12 → 2,000 GPUs per trace")
    assert change_text(baseline, Scenario("one", "", output_cap=1)) == "outputs capped at 1 token"
    assert change_text(baseline, Scenario("many", "", output_cap=4096)) == (
        "outputs capped at 4,096 tokens")


def test_shipped_descriptions_state_no_number_of_the_demo_fleet(catalog, baseline):
    """A description is shown for whatever fleet is replayed, beside the `change` that says the
    change in that fleet's numbers; so it may state the scenario's own settings and its GPU's
    figures (gpus.csv), never the demo fleet's replicas, GPUs or batch limit."""
    with open(reference_dir() / "gpus.csv", newline="") as f:
        gpus = {row["gpu"]: row for row in csv.DictReader(f)}
    shipped = {s.scenario: s for s in load_scenarios(reference_dir() / "scenarios.csv")}
    for s in shipped.values():
        own = {s.tp, s.replicas, s.max_seqs, s.output_cap}
        if s.prefix_cache not in (None, "off"):
            own.add(round(100 * float(s.prefix_cache)))
        if s.gpu:
            own |= {float(gpus[s.gpu]["memory_gb"]), float(gpus[s.gpu]["hbm_bandwidth_gbs"]) / 1000}
        words = re.sub(r"\b[A-Za-z]\w*", "", s.description)  # names (fp8, H200, TP4) are not numbers
        numbers = {float(n) for n in re.findall(r"\d+(?:\.\d+)?", words)}
        assert numbers <= {float(n) for n in own if n is not None}, (s.scenario, s.description)
    # Nor a direction that holds only on the demo fleet: on seed-example (1 x TP1) tp2-fp8 puts
    # more GPUs in each replica, and more replicas than any fleet of 6 or more has.
    for s in shipped.values():
        assert not re.search(r"\b(fewer|more) (GPUs|replicas)\b", s.description), s.scenario
    # The README's example: on a fleet of 4 x TP4 the change says 4 -> 2, whatever the prose says.
    four = scenario_deployment(catalog, baseline, Scenario("four", "", replicas=4))
    assert change_text(four, shipped["replicas-2"]) == "replicas 4 → 2; 16 → 8 GPUs per trace"
    assert change_text(four, shipped["tp2-fp8"]) == ("tp 4 → 2; weights bf16 → fp8; KV cache bf16 → fp8;"
                                                     " replicas 4 → 6; 16 → 12 GPUs per trace")


def test_request_changes():
    requests = pl.DataFrame({"prompt_tokens": [1, 10, 1001], "output_tokens": [5, 300, 2000],
                             "cached_tokens": [0, 8, 0]})
    capped = scenario_requests(requests, Scenario("c", "d", output_cap=256))
    assert capped["output_tokens"].to_list() == [5, 256, 256]
    half = scenario_requests(requests, Scenario("p", "d", prefix_cache="0.5"))
    assert half["cached_tokens"].to_list() == [0, 8, 500]  # logged hits kept, never the whole prompt
    off = scenario_requests(requests, Scenario("o", "d", prefix_cache="off"))
    assert off["cached_tokens"].to_list() == [0, 0, 0]
    assert scenario_requests(requests, Scenario("n", "d")).equals(requests)
    # cached_tokens is optional in a log from Python (the replay takes none as no hits)
    unlogged = scenario_requests(requests.drop("cached_tokens"), Scenario("p", "d", prefix_cache="0.5"))
    assert unlogged["cached_tokens"].to_list() == [0, 5, 500]


@pytest.mark.parametrize(("scenario", "cheaper_decode", "faster_ttft"), [
    (Scenario("fp8", "d", weights="fp8", kv_cache="fp8"), True, True),
    (Scenario("b200", "d", gpu="b200"), True, True),
    (Scenario("prefix", "d", prefix_cache="0.5"), False, True),
])
def test_levers_move_the_replay_the_right_way(catalog, baseline, conv_head, scenario, cheaper_decode,
                                              faster_ttft):
    """Same requests, replayed again: a lever's effect is measured, and points the way its
    physics says (fp8 and B200 read fewer bytes per step; cached prefixes skip prefill)."""
    base = replay_fleet(conv_head, baseline).stages
    what = replay_fleet(scenario_requests(conv_head, scenario),
                        scenario_deployment(catalog, baseline, scenario)).stages
    assert what.height == base.height
    assert (what["prefill_gpu_s"].sum() < base["prefill_gpu_s"].sum()) == (scenario.prefix_cache is not None
                                                                          or cheaper_decode)
    if cheaper_decode:
        assert what["tpot_s"].median() < base["tpot_s"].median()
    if faster_ttft:
        assert what["ttft_s"].median() < base["ttft_s"].median()


def _collect(runs) -> tuple[pl.DataFrame, pl.DataFrame]:
    """All runs' stage rows and fleet rows, as the what-if asset stages them."""
    stages, fleets = [], []
    for run in runs:
        stages.extend(run.stage_batches)
        fleets.append(run.fleet)
    return pl.concat(stages), pl.DataFrame(fleets, schema=FLEET_SCHEMA)


def test_replay_scenarios_labels_every_trace_and_scenario(catalog, baseline, conv_head):
    two_traces = pl.concat([conv_head.head(300).with_columns(trace=pl.lit("a")),
                            conv_head.tail(200).with_columns(trace=pl.lit("b"))])
    scenarios = [Scenario("fp8", "d", weights="fp8", kv_cache="fp8"), Scenario("r2", "d", replicas=2)]
    stages, fleets = _collect(replay_scenarios(two_traces, catalog, baseline, scenarios))
    counts = stages.group_by("scenario", "trace").len().sort("scenario", "trace")
    assert counts.rows() == [("fp8", "a", 300), ("fp8", "b", 200), ("r2", "a", 300), ("r2", "b", 200)]
    assert stages.columns[:3] == ["trace", "scenario", "deployment"]
    assert fleets.height == 4 and fleets["usd_per_gpu_hour"].to_list() == [6.155] * 4
    assert fleets.filter(pl.col("scenario") == "r2")["replicas"].to_list() == [2, 2]
    assert (fleets["idle_gpu_s"] >= 0).all() and (fleets["span_s"] > 0).all()
    # each fleet's idle GPU-seconds are what its GPUs did not spend on requests over its span
    # (what_if's fleet dollars price them)
    attributed = stages.group_by("scenario", "trace").agg(pl.col("gpu_s").sum())
    fleets_gpu_s = fleets.join(attributed, on=["scenario", "trace"])
    capacity = fleets_gpu_s["replicas"] * fleets_gpu_s["gpus_per_replica"] * fleets_gpu_s["span_s"]
    assert (fleets_gpu_s["gpu_s"] + fleets_gpu_s["idle_gpu_s"]).to_list() == pytest.approx(
        capacity.to_list(), rel=1e-9)
    # and their busy ones, the timeline's, what those requests were attributed
    assert fleets_gpu_s["busy_gpu_s"].to_list() == pytest.approx(fleets_gpu_s["gpu_s"].to_list(), rel=1e-9)
    # the what-if balance's shortest-step bound is the roofline figure of the deployment replayed:
    # the baseline's where the scenario keeps its model, GPU and dtypes, a faster one at fp8
    step = dict(fleets.select("scenario", "decode_step_s_batch1_ctx1k").unique().rows())
    assert step["r2"] == baseline.as_row()["decode_step_s_batch1_ctx1k"] > step["fp8"]
    assert fleets["skipped"].is_null().all()


def test_a_gpu_swap_keeps_the_baseline_provider_where_it_lists_the_gpu(catalog, conv_head):
    """A GPU swap is priced at the baseline's provider and plan where prices.csv lists the new
    GPU there: a fleet on AWS on-demand H100s ($12.29) is compared with AWS on-demand B200s
    ($14.24), not CoreWeave's $8.60, which would show a saving the operator cannot have. AWS
    lists no on-demand H200, so that swap takes the H200's default price and `change` (the
    report's "what changes", and its headline) says so; a change on the same GPU says nothing
    of the price."""
    aws = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4, replicas=3,
                        price_provider="aws", price_plan="on-demand", name="aws")
    _, fleets = _collect(replay_scenarios(conv_head.head(20).with_columns(trace=pl.lit("a")),
                                          catalog, aws,
                                          [Scenario("b200", "d", gpu="b200"),
                                           Scenario("h200", "d", gpu="h200-sxm"),
                                           Scenario("r2", "d", replicas=2)]))
    change = dict(zip(fleets["scenario"], fleets["change"], strict=True))
    price = dict(zip(fleets["scenario"], fleets["usd_per_gpu_hour"], strict=True))
    assert price == {"b200": 14.24, "h200": 6.305, "r2": 12.29}
    assert change["b200"] == ("GPU h100-sxm → b200; price $12.29 → $14.24 per GPU-hour"
                              " (aws on-demand)")
    assert change["h200"] == ("GPU h100-sxm → h200-sxm; price $12.29 → $6.305 per GPU-hour"
                              " (coreweave on-demand, the h200-sxm default in prices.csv: it"
                              " lists no h200-sxm from aws on-demand)")
    assert change["r2"] == "replicas 3 → 2; 12 → 8 GPUs per trace"


def test_a_what_if_fleet_carries_its_physics_caveat(catalog, baseline, conv_head):
    """A GPU swap to an MI300X is priced, and its fleet row says what the physics gets wrong
    there (caveats.py), for the report to repeat; the tp-4 baseline's swap to H200 carries the
    tensor-parallel caveat, and at tp 2 none."""
    _, fleets = _collect(replay_scenarios(conv_head.head(20).with_columns(trace=pl.lit("a")),
                                          catalog, baseline,
                                          [Scenario("mi300x", "d", gpu="mi300x"),
                                           Scenario("h200", "d", gpu="h200-sxm"),
                                           Scenario("h200-tp2", "d", gpu="h200-sxm", tp=2)]))
    by_scenario = dict(zip(fleets["scenario"], fleets["caveat"], strict=True))
    assert by_scenario["mi300x"].startswith("MI300X decode")
    assert by_scenario["h200"].startswith("Tensor parallelism 4-8") and by_scenario["h200-tp2"] == ""


def test_runs_are_replayed_one_at_a_time(catalog, baseline, conv_head):
    """Nothing is replayed before it is asked for, and each run's rows come in slices: the
    caller stages them, no scenario's full stages frame is held alongside another's."""
    runs = replay_scenarios(conv_head.head(50).with_columns(trace=pl.lit("a")), catalog, baseline,
                            [Scenario("r2", "d", replicas=2), Scenario("r4", "d", replicas=4)])
    first = next(runs)
    assert first.fleet["scenario"] == "r2"
    assert sum(batch.height for batch in first.stage_batches) == 50


def test_a_scenario_that_cannot_apply_is_skipped_with_its_reason(catalog, conv_head):
    """tp 3 for a 32-head model, fp4 on an MI300X (no fp4 tensor cores, no weight-only kernel) or
    a tp-1 70B (no room for KV) is not a broken scenario file: the scenario is skipped on that
    deployment, the reason recorded, the others run. fp8 on an A100 applies: served weight-only."""
    a100 = catalog.deployment("seed-example")
    scenarios = [Scenario("tp3", "d", tp=3), Scenario("fp8", "d", weights="fp8", kv_cache="fp8"),
                 Scenario("mi300x-fp4", "d", gpu="mi300x", weights="fp4")]
    stages, fleets = _collect(replay_scenarios(conv_head.head(20).with_columns(trace=pl.lit("a")),
                                               catalog, a100, scenarios))
    assert sorted(stages["scenario"].unique().to_list()) == ["fp8"]
    skipped = {row["scenario"]: row for row in fleets.iter_rows(named=True) if row["skipped"]}
    assert set(skipped) == {"tp3", "mi300x-fp4"}
    assert all("does not apply to deployment 'seed-example'" in row["skipped"]
               for row in skipped.values())
    assert "tp=3 cannot split llama-2-7b" in skipped["tp3"]["skipped"]
    assert "no fp4 tensor throughput and no weight-only" in skipped["mi300x-fp4"]["skipped"]
    assert (skipped["tp3"]["gpu"], skipped["tp3"]["tp"], skipped["tp3"]["span_s"]) == (
        "a100-80gb-sxm", 3, None)
    with pytest.raises(ScenarioNotApplicable, match="scenario 'tp1'.*no room for a KV cache"):
        scenario_deployment(catalog, catalog.deployment(BASELINE), Scenario("tp1", "d", tp=1, replicas=12))


def test_a_scenario_whose_kv_cache_cannot_hold_a_request_is_skipped(catalog, baseline, conv_head):
    """A 70B on two L40S at fp8 builds (74,688 tokens of KV), but a prompt just below that the
    baseline serves does not fit it with its output: the scenario is skipped on every trace
    with that reason, before any trace is replayed, instead of failing the what-if replays (and
    the night's run) after the traces that fit were staged. With an output cap that brings the
    request within the KV cache, it applies."""
    small = Scenario("l40s-tp2", "d", gpu="l40s", tp=2, weights="fp8", kv_cache="fp8")
    capacity = scenario_deployment(catalog, baseline, small).kv_capacity_tokens
    long_one = pl.DataFrame({"request_id": ["b:1"], "arrival_s": [0.0],
                             "prompt_tokens": [capacity - 10], "output_tokens": [20],
                             "cached_tokens": [0], "trace": ["b"]})
    requests = pl.concat([conv_head.head(20).with_columns(trace=pl.lit("a"))
                          .select(long_one.columns), long_one], how="vertical_relaxed")
    capped = Scenario("l40s-tp2-cap", "d", gpu="l40s", tp=2, weights="fp8", kv_cache="fp8",
                      output_cap=5)
    stages, fleets = _collect(replay_scenarios(requests, catalog, baseline, [small, capped]))
    assert stages.group_by("scenario", "trace").len().sort("trace").rows() == [
        ("l40s-tp2-cap", "a", 20), ("l40s-tp2-cap", "b", 1)]
    skipped = fleets.filter(pl.col("scenario") == "l40s-tp2")
    assert skipped["trace"].to_list() == ["a", "b"]
    assert skipped["skipped"].to_list() == [
        f"scenario 'l40s-tp2' does not apply to deployment '{BASELINE}': 1 request(s) need more"
        f" KV cache than one replica of '{BASELINE}+l40s-tp2' holds ({capacity:,} tokens), e.g."
        f" request b:1 with {capacity - 10:,}+20 tokens"] * 2
    assert fleets.filter(pl.col("scenario") == "l40s-tp2-cap")["skipped"].is_null().all()


def test_unknown_names_are_errors_on_every_deployment(catalog, baseline):
    for scenario, message in [(Scenario("x", "d", gpu="h300"), "unknown gpu 'h300'"),
                              (Scenario("y", "d", weights="fp9"), "weights='fp9'")]:
        with pytest.raises(ScenarioError, match=message) as err:
            scenario_deployment(catalog, baseline, scenario)
        assert not isinstance(err.value, ScenarioNotApplicable)


def test_scenarios_replay_with_the_baselines_router_and_hash_size(catalog, baseline):
    """An unchanged scenario reproduces the baseline replay exactly when given the baseline's
    router and tokens per prefix hash (here a Mooncake excerpt with 512-token hashes read as
    16-token ones, which changes what the cache finds)."""
    requests = pl.read_ndjson(MOONCAKE).head(300).select(
        trace=pl.lit("m"), arrival_s=pl.col("timestamp") / 1000.0, prompt_tokens="input_length",
        output_tokens="output_length", prefix_hashes=pl.col("hash_ids").cast(pl.List(pl.Int64)))
    options = {"router": "round_robin", "hash_tokens": 16}
    base = replay_fleet(requests, baseline, **options).stages
    stages, _ = _collect(replay_scenarios(requests, catalog, baseline, [Scenario("same", "d")],
                                          router="round_robin", hash_tokens={"m": 16}))
    assert_frame_equal(stages.drop("trace", "scenario", "deployment"), base)
    default, _ = _collect(replay_scenarios(requests, catalog, baseline, [Scenario("same", "d")]))
    assert not default.drop("trace", "scenario", "deployment").equals(base)


def test_prefix_cache_off_also_turns_off_prefix_hash_reuse(catalog, baseline):
    """'off' serves no prompt token from cache: on a Mooncake log, whose hits come from its
    prefix hashes and not from cached_tokens, the replay found as many cached tokens as the
    baseline's, and the scenario changed nothing but its label. A hit share keeps the hashes."""
    requests = pl.read_ndjson(MOONCAKE).head(300).select(
        trace=pl.lit("m"), arrival_s=pl.col("timestamp") / 1000.0, prompt_tokens="input_length",
        output_tokens="output_length", cached_tokens=pl.lit(0),
        prefix_hashes=pl.col("hash_ids").cast(pl.List(pl.Int64)))
    base = replay_fleet(requests, baseline).stages
    assert base["cached_hit_tokens"].sum() > 0
    stages, _ = _collect(replay_scenarios(requests, catalog, baseline,
                                          [Scenario("off", "d", prefix_cache="off"),
                                           Scenario("zero", "d", prefix_cache="0"),
                                           Scenario("half", "d", prefix_cache="0.5")]))
    hits = dict(stages.group_by("scenario").agg(pl.col("cached_hit_tokens").sum()).iter_rows())
    assert hits["off"] == hits["zero"] == 0
    assert hits["half"] >= base["cached_hit_tokens"].sum()
    off = stages.filter(pl.col("scenario") == "off")
    assert off["prefill_gpu_s"].sum() > base["prefill_gpu_s"].sum()


def test_a_scenario_keeps_the_baselines_serving_stack(catalog):
    """A what-if on a 2023-stack fleet must not silently take the current stack's factors."""
    old = catalog.deployment("splitwise-70b-h100-tp2")
    swapped = scenario_deployment(catalog, old, Scenario(scenario="h200", description="", gpu="h200-sxm"))
    assert swapped.stack == old.stack == "vllm-2023"


def test_a_semicolon_file_with_commas_in_its_prose_is_named_as_such(tmp_path):
    """A ';'-separated file leaves a comma in a description unquoted: the line overflowed the
    one-column header and was named as a line with an unquoted comma, not as ';'-separated."""
    path = _write(tmp_path, ["a;swap to h200, same tp;h200-sxm;;;;;;;;assumption"],
                  header=";".join(COLUMNS))
    with pytest.raises(ScenarioError, match="separated by ';': expected commas"):
        load_scenarios(path)


def test_trailing_columns_of_quoted_empty_cells_are_dropped_too(tmp_path):
    """A tool that quotes every cell saves the trailing separators as "": those columns are as
    empty as unquoted ones (load_catalog drops them; the scenarios file refused them)."""
    quoted = [f'"{c}"' for c in [*COLUMNS, "", ""]]
    path = _write(tmp_path, [",".join(f'"{v}"' for v in ["a", "x", "", "2", *[""] * 6,
                                                          "assumption", "", ""])],
                  header=",".join(quoted))
    [scenario] = load_scenarios(path)
    assert scenario.tp == 2 and scenario.source == "assumption"


def test_a_price_in_change_is_written_in_cents_at_least(catalog, baseline):
    """$8.60, not $8.6; a price given to the tenth of a cent keeps it ($6.155)."""
    swap = Scenario("b200", "d", gpu="b200")
    b200 = scenario_deployment(catalog, baseline, swap)
    assert price_change_text(catalog, baseline, b200, swap) == (
        "price $6.155 → $8.60 per GPU-hour (coreweave on-demand)")


def test_a_cleared_row_is_no_scenario_and_later_lines_keep_their_numbers(tmp_path):
    """A spreadsheet's cleared row (",,,,") was "scenario name None must be ..."; it is skipped,
    and a problem after it is still named by its own line."""
    [a, b] = load_scenarios(_write(tmp_path, ["a,x,,2,,,,,,,assumption", ",,,,,,,,,,",
                                              "b,y,,,,,2,,,,assumption"]))
    assert (a.scenario, b.scenario) == ("a", "b")
    with pytest.raises(ScenarioError, match="line 4: replicas='two'"):
        load_scenarios(_write(tmp_path, ["a,x,,2,,,,,,,assumption", ",,,,,,,,,,",
                                         "b,y,,,,,two,,,,assumption"]))
    with pytest.raises(ScenarioError, match="line 4: source is empty"):
        load_scenarios(_write(tmp_path, ["a,x,,2,,,,,,,assumption", ",,,,,,,,,,",
                                         "b,y,,,,,2,,,,"]))


def test_a_price_past_a_hundredth_of_a_cent_still_reads_in_cents():
    """A price of more than four decimals read '$8.' (its four decimals stripped of zeros)."""
    from pipelines.reports.scenarios import gpu_hour_price

    assert [gpu_hour_price(p) for p in (8.6, 6.155, 10, 8.00001, 0.7992, 2.123456)] == [
        "$8.60", "$6.155", "$10.00", "$8.00", "$0.7992", "$2.1235"]


def test_a_format_change_at_the_same_size_is_lower_precision_and_a_wider_one_is_not():
    """fp8 -> int8 (or fp16 -> bf16) keeps the bytes and changes the numerics: it was not flagged,
    since the rule compared bytes only; bf16 -> fp8 is, fp8 -> bf16 (wider) and no change are not."""
    fp8 = load_catalog().build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", kv_cache="fp8")
    assert lowers_precision(fp8, "int8", "fp8") and lowers_precision(fp8, "fp8", "fp4")
    assert not lowers_precision(fp8, "fp8", "fp8") and not lowers_precision(fp8, "bf16", "bf16")


def test_a_scenario_on_another_plan_is_priced_at_it_on_the_baselines_gpu_time(catalog, baseline,
                                                                              conv_head):
    """price_provider / price_plan price the scenario at that prices.csv row (Lambda's $3.99 H100,
    not the baseline's CoreWeave $6.155), and a scenario that changes only the plan replays
    exactly the baseline's GPU-seconds: its dollars differ by the price alone. On a GPU swap the
    plan is the new GPU's (RunPod's on-demand B200, not the B200's CoreWeave default)."""
    requests = conv_head.head(300).with_columns(trace=pl.lit("a"))
    lam = Scenario("lam", "d", price_provider="lambda", price_plan="on-demand")
    swap = Scenario("swap", "d", gpu="b200", price_provider="runpod", price_plan="on-demand")
    stages, fleets = _collect(replay_scenarios(requests, catalog, baseline,
                                               [lam, swap, Scenario("same", "d")]))
    fleet = {row["scenario"]: row for row in fleets.iter_rows(named=True)}
    assert {name: row["usd_per_gpu_hour"] for name, row in fleet.items()} == {
        "lam": 3.99, "swap": 5.98, "same": 6.155}
    assert fleet["lam"]["change"] == "price coreweave on-demand $6.155 → lambda on-demand $3.99 per GPU-hour"
    assert fleet["swap"]["change"] == ("GPU h100-sxm → b200; price coreweave on-demand $6.155 →"
                                       " runpod on-demand $5.98 per GPU-hour")
    assert {name: row["price_only"] for name, row in fleet.items()} == {
        "lam": True, "swap": False, "same": False}
    base = replay_fleet(requests.drop("trace"), baseline).stages
    priced = stages.filter(pl.col("scenario") == "lam")
    assert priced["gpu_s"].to_list() == base["gpu_s"].to_list()
    assert priced["ttft_s"].to_list() == base["ttft_s"].to_list()
    assert fleet["lam"]["idle_gpu_s"] == fleet["same"]["idle_gpu_s"]


def test_a_plan_that_is_one_deployments_own_is_still_price_only_on_the_fleet(catalog, baseline,
                                                                            conv_head):
    """On a fleet of two deployments, a RunPod plan moved the CoreWeave one's price and left the
    RunPod one's as it was: each trace's row judged its own deployment, and the SQL's bool_and
    made the scenario a lever (not price_only), which the headline could then name as the best,
    a price cut that frees no GPU time. It changes nothing but a price anywhere: price_only on
    every trace, replayed or skipped."""
    runpod = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", price_provider="runpod",
                           price_plan="on-demand")
    requests = pl.concat([conv_head.head(100).with_columns(trace=pl.lit("a")),
                          conv_head.tail(100).with_columns(trace=pl.lit("b"))])
    plan = Scenario("rp", "d", price_provider="runpod", price_plan="on-demand")
    r2 = Scenario("r2", "d", price_provider="runpod", price_plan="on-demand", replicas=2)
    _, fleets = _collect(replay_scenarios(requests, catalog, {"a": baseline, "b": runpod},
                                          [plan, r2]))
    assert fleets.select("scenario", "trace", "change", "price_only").rows() == [
        ("rp", "a", "price coreweave on-demand $6.155 → runpod on-demand $2.69 per GPU-hour", True),
        ("rp", "b", "nothing: the baseline's own settings", True),
        ("r2", "a", "replicas 3 → 2; 12 → 8 GPUs per trace; price coreweave on-demand $6.155 →"
                    " runpod on-demand $2.69 per GPU-hour", False),
        ("r2", "b", "replicas 1 → 2; 1 → 2 GPUs per trace", False)]
    # skipped (the A100 has no Lambda price): still the plan alone, on both traces
    lam = Scenario("lam", "d", price_provider="lambda", price_plan="on-demand")
    seed = catalog.deployment("seed-example")
    skipped = [run.fleet for run in replay_scenarios(requests.head(20).with_columns(
        trace=pl.Series(["a", "b"] * 10)), catalog, {"a": baseline, "b": seed}, [lam])]
    assert [(row["skipped"] is not None, row["price_only"]) for row in skipped] == [(True, True)] * 2


def _priced(tmp_path: Path, gpu: str, provider: str, plan: str) -> Scenario:
    """One scenario row of a scenarios file with the optional price columns (line 2)."""
    path = tmp_path / "scenarios.csv"
    path.write_text(",".join([*COLUMNS, "price_provider", "price_plan"]) + "\n"
                    + f"p,x,{gpu},,,,,,,,assumption,{provider},{plan}\n")
    [scenario] = load_scenarios(path)
    return scenario


def test_a_plan_prices_csv_does_not_list_is_refused_naming_the_row_and_the_plans(tmp_path, catalog,
                                                                                baseline):
    """A plan the scenario's GPU lacks is one message: the scenarios file and line, the columns,
    and the plans prices.csv does list for that GPU (on a swap, the new GPU's); one listed for no
    GPU is refused on every baseline, one listed for other GPUs only skips the scenario here."""
    path = re.escape(str(tmp_path / "scenarios.csv"))
    prices = re.escape(str(catalog.file("prices")))
    with pytest.raises(ScenarioError, match=rf"^scenarios file {path}, line 2, scenario 'p':"
                                            r" price_provider='aws', price_plan='reserved-1y':"
                                            rf" {prices} lists no price for b200 from aws"
                                            r" reserved-1y; its plans for b200: coreweave"
                                            r" on-demand, aws on-demand, runpod on-demand, packet.ai"
                                            r" on-demand$") as err:
        scenario_deployment(catalog, baseline, _priced(tmp_path, "b200", "aws", "reserved-1y"))
    assert not isinstance(err.value, ScenarioNotApplicable)
    with pytest.raises(ScenarioError, match=r"line 2, scenario 'p': price_provider='runpod',"
                                            r" price_plan='spott': .* lists no price for any gpu"
                                            r" from runpod spott; its plans: coreweave on-demand,") as err:
        scenario_deployment(catalog, baseline, _priced(tmp_path, "", "runpod", "spott"))
    assert not isinstance(err.value, ScenarioNotApplicable)
    with pytest.raises(ScenarioNotApplicable, match=r"line 2, scenario 'p' does not apply to"
                                                    r" deployment 'azure-2023-70b-h100':"
                                                    r" price_provider='runpod', price_plan='spot': .*"
                                                    r" lists no price for h100-sxm from runpod spot;"
                                                    r" its plans for h100-sxm: coreweave on-demand,"
                                                    r" lambda on-demand, runpod on-demand, aws"
                                                    r" on-demand, aws reserved-1y, aws capacity-block$"):
        scenario_deployment(catalog, baseline, _priced(tmp_path, "", "runpod", "spot"))


def test_a_plan_without_its_provider_is_refused(tmp_path):
    """Both price columns or neither: a plan alone names no prices.csv row."""
    with pytest.raises(ScenarioError, match=r"line 2: price_provider=None, price_plan='spot':"
                                            r" expected both"):
        _priced(tmp_path, "", "", "spot")


def test_a_plan_skipped_on_a_gpu_without_it_says_the_plan_it_asked_for(catalog, conv_head):
    """On an A100 fleet (prices.csv has no Lambda A100) the plan scenario is skipped with why,
    and its `change` is the plan asked for, not "nothing: the baseline's own settings"."""
    seed = catalog.deployment("seed-example")
    lam = Scenario("lam", "d", price_provider="lambda", price_plan="on-demand")
    [run] = replay_scenarios(conv_head.head(20).with_columns(trace=pl.lit("a")), catalog, seed, [lam])
    row = run.fleet
    assert row["change"] == "price coreweave on-demand → lambda on-demand"
    assert "its plans for a100-80gb-sxm: coreweave on-demand, runpod on-demand" in row["skipped"]
    assert row["price_only"] and row["usd_per_gpu_hour"] is None
