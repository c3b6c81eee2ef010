"""The `calibration` / `calibration_errors` assets on a warehouse whose requests carry observed
latencies (the BurstGPT-on-vLLM log excerpts of tests/fixtures/observed/)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import duckdb
import polars as pl
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.calibration import assets as calibration_assets
from pipelines.defs.calibration.assets import calibrated
from pipelines.roofline.calibration import PARAMETERS
from pipelines.defs.ingest.assets import ingested_traces
from pipelines.roofline.calibration import CANDIDATE_SCHEMA, calibrate_candidates
from pipelines.warehouse import run_sql, write_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "observed"
BUCKETS = Path(__file__).resolve().parents[2] / "data" / "reference" / "shape_buckets.csv"
DEPLOYMENT = "burstgpt-vllm-1b-4090"


def _requests(with_observations: bool) -> pl.DataFrame:
    frames = []
    for scale in (100, 1000):
        frame = pl.read_csv(FIXTURES / f"burstgpt_vllm_llama32_1b_scale{scale}.csv",
                            schema_overrides={"request_id": pl.String})
        frames.append(frame.with_columns(trace=pl.lit(f"burstgpt-scale{scale}"),
                                         cached_tokens=pl.lit(0, pl.Int64)))
    requests = pl.concat(frames)
    if not with_observations:
        requests = requests.with_columns(observed_ttft_s=pl.lit(None, pl.Float64),
                                         observed_e2e_s=pl.lit(None, pl.Float64))
    return requests


def _materialize(tmp_path: Path, requests: pl.DataFrame, config: dict,
                 options: str = "{}") -> tuple[dg.ExecuteInProcessResult, Path]:
    """Calibrate `requests` with `config`, each trace's trace_files row holding `options` (its
    sidecar's, as the ingest keeps them)."""
    warehouse = tmp_path / "w.duckdb"
    with duckdb.connect(str(warehouse)) as conn:
        write_table(conn, "requests", requests)
        write_table(conn, "trace_files", requests.select(
            "trace", file=pl.format("/logs/{}.csv", "trace"), options=pl.lit(options),
            prefix_block_tokens=pl.lit(None, pl.Int64)).unique(maintain_order=True))
        write_table(conn, "shape_buckets", pl.read_csv(BUCKETS))
    result = dg.materialize(
        [calibrated], resources={"duckdb": DuckDBResource(database=str(warehouse))},
        run_config={"ops": {"calibrated": {"config": config}}},
    )
    return result, warehouse


def test_calibration_asset_fits_each_observed_trace(tmp_path):
    config = {"deployments": {"burstgpt-scale100": DEPLOYMENT, "burstgpt-scale1000": DEPLOYMENT},
              "fit_metrics": ["ttft"]}
    result, warehouse = _materialize(tmp_path, _requests(True), config)
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        params = conn.sql("FROM calibration").pl()
        errors = conn.sql("FROM calibration_errors").pl()
    assert params.height == 2 * len(PARAMETERS) and set(params["deployment"]) == {DEPLOYMENT}
    held = errors.filter((pl.col("shape") == "all") & (pl.col("split") == "held_out")
                         & (pl.col("metric") == "ttft"))
    assert held.height == 2
    assert (held["shape_error_after"] < held["shape_error_before"]).all()
    # every observed metric is reported, fitted or not: TPOT from each request's two latencies
    reported = errors.filter((pl.col("shape") == "all") & (pl.col("split") == "held_out"))
    assert set(reported["metric"]) == {"ttft", "e2e", "tpot"}
    # and which of them the fit used: the summary judges the fit on those only
    assert dict(reported.filter(pl.col("trace") == "burstgpt-scale100")
                .select("metric", "fitted").iter_rows()) == {"ttft": True, "e2e": False, "tpot": False}
    metadata = result.asset_materializations_for_node("calibrated")
    by_key = {m.asset_key.to_user_string(): m.metadata for m in metadata}
    assert by_key["calibration"]["calibrated_traces"] == dg.MetadataValue.int(2)
    assert "none_calibrated_because" not in by_key["calibration"]
    # which deployment each trace was fitted on, not only its factors
    assert f"| burstgpt-scale1000 | {DEPLOYMENT} | compute_efficiency |" in (
        by_key["calibration"]["parameters"].value)
    assert by_key["calibration"]["implausible_fits"].value == "none"
    assert not params["at_bound"].any()
    assert held["error_baseline"].is_not_null().all()
    assert "burstgpt-scale100 held-out tpot error after" in by_key["calibration_errors"]
    shown = by_key["calibration_errors"]["burstgpt-scale100 held-out ttft shape_error after"].value
    stored = held.filter(pl.col("trace") == "burstgpt-scale100")["shape_error_after"][0]
    assert shown == float(f"{stored:.4g}") != stored  # the UI shows it as is: 4 digits, not 17
    assert "| held_out | ttft |" in by_key["calibration_errors"]["burstgpt-scale100 errors by shape"].value


def test_each_trace_can_be_fitted_on_its_own_metrics(tmp_path):
    """Logs differ in what they observed well (BurstGPT-vLLM's e2e rests on estimated output
    tokens, AIBrix's does not): one run fitted every trace on the one `fit_metrics` list."""
    requests = _requests(True).filter(pl.col("arrival_s") < pl.col("arrival_s").min().over("trace") + 30)
    config = {"deployment": DEPLOYMENT, "fit_metrics": ["ttft"],
              "fit_metrics_by_trace": {"burstgpt-scale1000": ["ttft", "e2e"]}}
    result, _ = _materialize(tmp_path, requests, config)
    assert result.success
    by_key = {m.asset_key.to_user_string(): m.metadata
              for m in result.asset_materializations_for_node("calibrated")}
    assert by_key["calibration"]["fit_metrics"].value == {
        "burstgpt-scale100": ["ttft"], "burstgpt-scale1000": ["ttft", "e2e"]}


def test_a_run_replaces_only_the_rows_of_the_traces_it_calibrates(tmp_path):
    """Calibrating one trace today kept none of the others' fits of yesterday: every run
    calibrated every observed trace (a trace the config no longer named, on the default
    deployment) and replaced both tables whole. `traces` picks the traces to calibrate; only
    their rows are replaced, and a rerun leaves the same rows, not twice as many."""
    requests = _requests(True).filter(pl.col("arrival_s") < pl.col("arrival_s").min().over("trace") + 30)
    both = {"deployment": DEPLOYMENT, "fit_metrics": ["ttft"]}
    _, warehouse = _materialize(tmp_path, requests, both)

    def rows() -> dict:
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            return {(table, trace): conn.sql(f"FROM {table} WHERE trace = '{trace}' ORDER BY ALL").pl()
                    for table in ("calibration", "calibration_errors")
                    for trace in ("burstgpt-scale100", "burstgpt-scale1000")}

    yesterday = rows()
    one = {"traces": ["burstgpt-scale100"], "deployment": DEPLOYMENT, "fit_metrics": ["ttft", "e2e"]}
    result, _ = _materialize(tmp_path, requests, one)
    today = rows()
    for table in ("calibration", "calibration_errors"):
        assert today[table, "burstgpt-scale1000"].equals(yesterday[table, "burstgpt-scale1000"])
        assert not today[table, "burstgpt-scale100"].equals(yesterday[table, "burstgpt-scale100"])
    assert today["calibration", "burstgpt-scale100"].height == len(PARAMETERS)
    by_key = {m.asset_key.to_user_string(): m.metadata
              for m in result.asset_materializations_for_node("calibrated")}
    assert by_key["calibration"]["fit_metrics"].value == {"burstgpt-scale100": ["ttft", "e2e"]}
    assert by_key["calibration"]["traces_from_earlier_runs"].value == ["burstgpt-scale1000"]
    _materialize(tmp_path, requests, one)
    again = rows()
    assert all(again[key].equals(today[key]) for key in today)


def test_absurd_observations_are_named_in_the_metadata(tmp_path):
    """A TTFT of 5,000 s among ones of tenths of a second: the fit absorbed it without a word."""
    requests = _requests(True).filter((pl.col("trace") == "burstgpt-scale1000") & (pl.col("arrival_s") < 30))
    absurd = requests.sort("arrival_s")["request_id"][0]
    requests = requests.with_columns(observed_ttft_s=pl.when(pl.col("request_id") == absurd)
                                     .then(5000.0).otherwise("observed_ttft_s"))
    result, warehouse = _materialize(tmp_path, requests, {"deployment": DEPLOYMENT, "fit_metrics": ["ttft"]})
    by_key = {m.asset_key.to_user_string(): m.metadata
              for m in result.asset_materializations_for_node("calibrated")}
    outliers = by_key["calibration"]["outlying_observations"].value
    assert outliers.startswith("- burstgpt-scale1000: 1 of 113 observed ttft are more than 10×")
    assert f"request {absurd}: observed 5000 s" in outliers
    assert by_key["calibration"]["implausible_fits"].value == "none"
    # in the table too, which the summary reads: the metadata was the only place
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert {row for (row,) in conn.sql("SELECT outliers FROM calibration").fetchall()} == {
            outliers.removeprefix("- burstgpt-scale1000: ")}


def test_a_calibration_table_of_other_columns_is_recreated(tmp_path):
    """A warehouse whose calibration table an older release wrote, not yet opened by the ingest."""
    warehouse = tmp_path / "w.duckdb"
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("CREATE TABLE calibration (trace VARCHAR, parameter VARCHAR, value DOUBLE)")
    result, _ = _materialize(tmp_path, _requests(False), {})
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert "implausible" in conn.sql("FROM calibration").pl().columns


def test_a_request_the_deployment_cannot_serve_is_set_aside_not_the_whole_trace(tmp_path):
    """One absurd row (a prompt of 900,000 tokens) in an observed log: the replay sets it aside
    and replays the rest; calibration skipped the whole trace for it. It is now left out of the
    fit too, and named in the metadata."""
    requests = _requests(True).filter(pl.col("trace") == "burstgpt-scale100")
    absurd = requests["request_id"][5]
    requests = requests.with_columns(prompt_tokens=pl.when(pl.col("request_id") == absurd)
                                     .then(900_000).otherwise(pl.col("prompt_tokens")))
    result, warehouse = _materialize(tmp_path, requests, {"deployment": DEPLOYMENT,
                                                          "fit_metrics": ["ttft"]})
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.sql("SELECT DISTINCT trace FROM calibration").fetchall() == [("burstgpt-scale100",)]
    by_key = {m.asset_key.to_user_string(): m.metadata
              for m in result.asset_materializations_for_node("calibrated")}
    assert by_key["calibration"]["skipped_traces"].value == {}
    aside = by_key["calibration"]["set_aside_requests"].value
    assert list(aside) == ["burstgpt-scale100"]
    assert aside["burstgpt-scale100"].startswith(f"1 request(s) set aside, not replayed, e.g. {absurd}, which")


def test_calibration_asset_without_observations_writes_empty_tables(tmp_path):
    result, warehouse = _materialize(tmp_path, _requests(False), {})
    assert result.success
    # a count is a number on every run, so the UI plots it over runs; why none, beside it
    metadata = result.asset_materializations_for_node("calibrated")[0].metadata
    assert metadata["calibrated_traces"] == dg.MetadataValue.int(0)
    assert metadata["none_calibrated_because"].value == "no request carries observed latencies"
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.sql("SELECT count(*) FROM calibration").fetchall()[0][0] == 0
        assert "shape_error_after" in conn.sql("FROM calibration_errors").pl().columns


def test_the_tables_the_ingest_creates_empty_are_the_tables_the_asset_writes(tmp_path):
    """sql/calibration*_table.sql, which the ingest runs so SQL works before calibration does,
    declare the columns and types the asset writes (PARAMETER_SCHEMA, ERROR_SCHEMA)."""
    _, warehouse = _materialize(tmp_path, _requests(False), {})
    columns = ("SELECT table_name, column_name, data_type FROM information_schema.columns"
               " WHERE table_name IN ('calibration', 'calibration_errors')"
               " ORDER BY table_name, ordinal_position")
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        written = conn.sql(columns).fetchall()
    with duckdb.connect() as conn:
        for step in ("calibration_table", "calibration_errors_table"):
            run_sql(conn, step)
        assert conn.sql(columns).fetchall() == written


def test_a_deployment_that_cannot_have_served_the_log_is_named_in_the_metadata(tmp_path):
    """The 1B model's log calibrated as if Llama-2-70B on two A100s had served it: the asset
    still publishes its numbers, and the metadata says the fit is implausible and why."""
    requests = _requests(True).filter(pl.col("trace") == "burstgpt-scale100")
    result, _ = _materialize(tmp_path, requests, {"deployment": "splitwise-70b-a100-tp2",
                                                  "fit_metrics": ["ttft"]})
    assert result.success
    by_key = {m.asset_key.to_user_string(): m.metadata
              for m in result.asset_materializations_for_node("calibrated")}
    implausible = by_key["calibration"]["implausible_fits"].value
    assert "- burstgpt-scale100: median observed ttft" in implausible
    assert "faster than splitwise-70b-a100-tp2" in implausible


def test_an_implausible_fit_says_so_in_the_calibration_table(tmp_path):
    """The table alone showed the 70B fit of the 1B log with at_bound false on every row, as
    a plausible fit looks: why it is implausible was only in the metadata and the run log."""
    requests = _requests(True)
    result, warehouse = _materialize(tmp_path, requests, {
        "deployments": {"burstgpt-scale100": "splitwise-70b-a100-tp2",
                        "burstgpt-scale1000": DEPLOYMENT}, "fit_metrics": ["ttft"]})
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = dict(conn.sql("SELECT trace, any_value(implausible) FROM calibration"
                             " GROUP BY trace").fetchall())
    assert rows["burstgpt-scale1000"] is None
    assert rows["burstgpt-scale100"].startswith("median observed ttft")
    assert "faster than splitwise-70b-a100-tp2" in rows["burstgpt-scale100"]


def test_a_log_that_names_another_model_than_the_deployments_is_implausible(tmp_path):
    """requests.model was never compared with the deployment's model: a log naming Llama-2-70B
    fitted on a 1B deployment reported a plausible fit. A name the catalog places on another
    model is now a reason in the table and the metadata; the deployment's own model under a
    provider's name, and a name the catalog cannot place, are not."""
    names = {"burstgpt-scale100": "meta-llama/Llama-2-70b-chat-hf",
             "burstgpt-scale1000": "meta-llama/Llama-3.2-1B-Instruct"}
    requests = _requests(True).with_columns(model=pl.col("trace").replace_strict(names))
    requests = requests.with_columns(model=pl.when(pl.col("request_id") == requests["request_id"][0])
                                     .then(pl.lit("gpt-4")).otherwise("model"))
    result, warehouse = _materialize(tmp_path, requests, {
        "deployments": {"burstgpt-scale100": DEPLOYMENT, "burstgpt-scale1000": DEPLOYMENT},
        "fit_metrics": ["ttft"]})
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = dict(conn.sql("SELECT trace, any_value(implausible) FROM calibration"
                             " GROUP BY trace").fetchall())
    total = requests.filter(pl.col("trace") == "burstgpt-scale100").height
    reason = (f"the log names model 'meta-llama/Llama-2-70b-chat-hf' (llama-2-70b in the catalog)"
              f" on {total - 1:,} of its {total:,} requests, and {DEPLOYMENT} serves llama-3.2-1b:"
              f" the log was served by another model")
    assert rows == {"burstgpt-scale100": reason, "burstgpt-scale1000": None}
    metadata = {m.asset_key.to_user_string(): m.metadata
                for m in result.asset_materializations_for_node("calibrated")}
    assert metadata["calibration"]["implausible_fits"].value == f"- burstgpt-scale100: {reason}"


def test_candidates_keep_the_deployment_that_served_the_log(tmp_path):
    """Offered the 70B on two A100s and the 1B card that really served it, the asset keeps the
    1B card's fit and lists both candidates with the reason the other was ruled out."""
    requests = _requests(True).filter(pl.col("trace") == "burstgpt-scale100")
    config = {"candidates": {"burstgpt-scale100": ["splitwise-70b-a100-tp2", DEPLOYMENT]},
              "fit_metrics": ["ttft"]}
    result, warehouse = _materialize(tmp_path, requests, config)
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.sql("SELECT DISTINCT deployment FROM calibration").fetchall() == [(DEPLOYMENT,)]
    by_key = {m.asset_key.to_user_string(): m.metadata
              for m in result.asset_materializations_for_node("calibrated")}
    table = by_key["calibration"]["burstgpt-scale100 candidates"].value
    assert "fit-half error, catalog factors" in table
    assert f"| {DEPLOYMENT} | yes |" in table and "| kept |" in table
    assert "| splitwise-70b-a100-tp2 | no |" in table and "faster than" in table
    assert by_key["calibration"]["implausible_fits"].value == "none"


def test_a_plausible_candidate_not_kept_says_why():
    """fireworks_7b offered an A100 and an H100: both plausible, both fitted to 3.6%, the H100's
    'why not' empty; the table now names the catalog errors the choice compared."""
    candidates = pl.DataFrame(
        [("a100", True, 0.038, 0.036, True, None), ("h100", True, 0.165, 0.036, False, None),
         ("l40s", False, 0.509, 0.265, False, "faster than it can be")],
        schema=CANDIDATE_SCHEMA, orient="row")
    rows = calibration_assets._candidates_table(SimpleNamespace(candidates=candidates)).splitlines()
    assert rows[2] == "| a100 | yes | 3.8% | 3.6% | kept |  |"
    assert rows[3] == ("| h100 | yes | 16.5% | 3.6% |  | its catalog factors miss the fit half by"
                       " 16.5%, a100's by 3.8%: the choice compares those, not the fitted errors"
                       " (five free factors can make a wrong GPU fit) |")
    assert rows[4] == "| l40s | no | 50.9% | 26.5% |  | faster than it can be |"


def test_a_candidate_of_another_model_is_not_called_plausible(tmp_path):
    """The candidates table called the kept 1B card plausible while implausible_fits said the
    log, which names Llama-2-70B, was served by another model: its row now says no, and why."""
    requests = _requests(True).filter(pl.col("trace") == "burstgpt-scale100").with_columns(
        model=pl.lit("meta-llama/Llama-2-70b-chat-hf"))
    config = {"candidates": {"burstgpt-scale100": ["splitwise-70b-a100-tp2", DEPLOYMENT]},
              "fit_metrics": ["ttft"]}
    result, _ = _materialize(tmp_path, requests, config)
    assert result.success
    metadata = {m.asset_key.to_user_string(): m.metadata
                for m in result.asset_materializations_for_node("calibrated")}["calibration"]
    reason = (f"the log names model 'meta-llama/Llama-2-70b-chat-hf' (llama-2-70b in the catalog)"
              f" on {requests.height:,} of its {requests.height:,} requests, and {DEPLOYMENT}"
              f" serves llama-3.2-1b: the log was served by another model")
    assert f"| {DEPLOYMENT} | no |" in metadata["burstgpt-scale100 candidates"].value
    assert f"| kept | {reason} |" in metadata["burstgpt-scale100 candidates"].value
    assert metadata["implausible_fits"].value == f"- burstgpt-scale100: {reason}"


def test_a_trace_with_a_deployment_and_candidates_fails(tmp_path):
    config = {"deployments": {"burstgpt-scale100": DEPLOYMENT},
              "candidates": {"burstgpt-scale100": [DEPLOYMENT]}}
    with pytest.raises(dg.Failure, match="both a deployment and candidates"):
        _materialize(tmp_path, _requests(True), config)


def test_unknown_deployment_fails_with_its_name(tmp_path):
    with pytest.raises(dg.Failure, match="^calibration config: trace burstgpt-scale100: unknown "
                                         "deployment 'no-such-fleet'"):
        _materialize(tmp_path, _requests(True), {"deployment": "no-such-fleet"})


def test_a_typo_in_the_deployment_setting_is_named_as_that_setting(tmp_path, monkeypatch):
    """Without the preflight, a bad FLEETSPEND_DEPLOYMENT is named as that setting, not as run
    config the user never wrote."""
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "no-such-fleet")
    with pytest.raises(dg.Failure, match="^FLEETSPEND_DEPLOYMENT: trace burstgpt-scale100: "
                                         "unknown deployment 'no-such-fleet'"):
        _materialize(tmp_path, _requests(True), {})


def test_a_trace_is_fitted_on_the_deployment_its_sidecar_names(tmp_path):
    """Before the config's `deployment` (as the replay takes it), after its `deployments`; a
    name the catalog no longer lists is named with the sidecar it came from. The launchpad's
    words for `deployment` say so: they still called it every other trace's."""
    described = calibration_assets.CalibrationConfig.model_fields["deployment"].description
    assert described.startswith("The deployment of the traces not named in deployments or"
                                " candidates whose log's sidecar names none;")
    assert calibration_assets.CalibrationConfig.model_fields["deployments"].description.endswith(
        "; others use their log's sidecar's, else deployment")
    options = json.dumps({"deployment": DEPLOYMENT})
    result, warehouse = _materialize(tmp_path, _requests(True),
                                     {"deployment": "seed-example", "fit_metrics": ["ttft"]}, options)
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.sql("SELECT DISTINCT deployment FROM calibration").fetchall() == [(DEPLOYMENT,)]
    (tmp_path / "again").mkdir()
    with pytest.raises(dg.Failure, match=r"^/logs/burstgpt-scale100\.csv\.fleetspend\.json, key"
                                         r" 'deployment': trace burstgpt-scale100: unknown"
                                         r" deployment 'gone-fleet'"):
        _materialize(tmp_path / "again", _requests(True), {}, json.dumps({"deployment": "gone-fleet"}))


MAPPING = {"format": "csv", "time_unit": "s",
           "columns": {"arrival": "arrival_s", "prompt_tokens": "prompt_tokens",
                       "output_tokens": "output_tokens", "observed_ttft_s": "observed_ttft_s",
                       "observed_e2e_s": "observed_e2e_s"}}


def _write_log(folder: Path, name: str, frame: pl.DataFrame) -> None:
    frame.drop("request_id").write_csv(folder / f"{name}.csv")
    (folder / f"{name}.csv.fleetspend.json").write_text(json.dumps(MAPPING))


def test_whole_partly_observed_traces_are_replayed_and_a_bad_trace_is_skipped(tmp_path, monkeypatch):
    """Built through the real ingest (request_id is the table's virtual column): the replay gets
    every request of a partly observed trace, the replay router and the trace's hash block size;
    a trace with too few observations is skipped and named, the others still publish."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(inbox))
    log = pl.read_csv(FIXTURES / "burstgpt_vllm_llama32_1b_scale100.csv")
    unobserved = pl.int_range(pl.len()) % 3 == 2
    _write_log(inbox, "partly", log.with_columns(
        pl.when(unobserved).then(None).otherwise(pl.col(c)).alias(c)
        for c in ("observed_ttft_s", "observed_e2e_s")))
    _write_log(inbox, "tiny", log.head(6))
    _write_log(inbox, "unobserved", log.head(20).with_columns(
        observed_ttft_s=pl.lit(None, pl.Float64), observed_e2e_s=pl.lit(None, pl.Float64)))
    # 0 s is a log's "not measured": such a trace was listed among the traces with observed
    # latencies a config may name, and then skipped
    _write_log(inbox, "zeros", log.head(20).with_columns(observed_ttft_s=0.0, observed_e2e_s=0.0))
    warehouse = tmp_path / "w.duckdb"
    resources = {"duckdb": DuckDBResource(database=str(warehouse))}
    assert dg.materialize([ingested_traces], resources=resources).success
    with duckdb.connect(str(warehouse)) as conn:
        write_table(conn, "shape_buckets", pl.read_csv(BUCKETS))
        conn.execute("UPDATE trace_files SET prefix_block_tokens = 128 WHERE trace = 'partly'")

    seen = {}

    def recording(candidates, requests, *args, **kwargs):
        seen[requests["trace"][0]] = (requests, kwargs)
        return calibrate_candidates(candidates, requests, *args, **kwargs)

    monkeypatch.setattr(calibration_assets, "calibrate_candidates", recording)
    config = {"deployment": DEPLOYMENT, "fit_metrics": ["ttft"], "router": "round_robin"}
    result = dg.materialize([calibrated], resources=resources,
                            run_config={"ops": {"calibrated": {"config": config}}})
    assert result.success
    requests, kwargs = seen["partly"]
    assert requests.height == log.height and requests["observed_ttft_s"].null_count() == log.height // 3
    assert requests["request_id"][0] == "partly:2"
    assert "llama-3.2-1b" in list(kwargs.pop("catalog_models"))   # to place the log's model names
    assert kwargs == {"router": "round_robin", "hash_tokens": 128}
    assert set(seen) == {"partly", "tiny"}
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.sql("SELECT DISTINCT trace FROM calibration").fetchall() == [("partly",)]
        observed = conn.sql("SELECT sum(observations)::BIGINT FROM calibration_errors "
                            "WHERE shape = 'all' AND metric = 'ttft'").fetchall()[0][0]
    assert observed == log.height - log.height // 3
    by_key = {m.asset_key.to_user_string(): m.metadata
              for m in result.asset_materializations_for_node("calibrated")}
    skipped = by_key["calibration"]["skipped_traces"].value
    assert list(skipped) == ["tiny"] and "observations of ttft in the fit half" in skipped["tiny"]
    # the trace left out for want of observed latencies is named too
    assert by_key["calibration"]["unobserved_traces"].value == ["unobserved", "zeros"]
    named = dg.materialize([calibrated], resources=resources, raise_on_error=False, run_config={
        "ops": {"calibrated": {"config": {**config, "traces": ["zeros"]}}}})
    [failure] = [e for e in named.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert ("trace 'zeros': its requests carry no observed latency (an observed 0 s counts as not"
            " measured); expected one of the traces with observed latencies: partly, tiny"
            ) in failure.event_specific_data.error.message
    only_tiny = dg.materialize([calibrated], resources=resources, run_config={
        "ops": {"calibrated": {"config": {**config, "traces": ["tiny"]}}}})
    metadata = only_tiny.asset_materializations_for_node("calibrated")[0].metadata
    assert metadata["calibrated_traces"] == dg.MetadataValue.int(0)
    assert metadata["none_calibrated_because"].value == (
        "every trace this run calibrates was skipped (skipped_traces says why)")
    assert metadata["traces_from_earlier_runs"].value == ["partly"]


def test_an_empty_yaml_key_names_none(tmp_path):
    """`deployments:` with its entries commented out is null in YAML: the preflight said
    'configuration ok' and the step stopped with a pydantic traceback."""
    requests = _requests(True).filter((pl.col("trace") == "burstgpt-scale1000") & (pl.col("arrival_s") < 30))
    config = {"deployment": DEPLOYMENT, "fit_metrics": ["ttft"], "traces": None, "deployments": None,
              "candidates": None, "fit_metrics_by_trace": None}
    result, _ = _materialize(tmp_path, requests, config)
    assert result.success


def test_unknown_router_fails_with_its_name(tmp_path):
    with pytest.raises(dg.Failure, match="ops.calibrated.config.router: 'fastest', expected one of"):
        _materialize(tmp_path, _requests(True), {"router": "fastest"})


def test_a_misspelled_trace_in_the_config_fails_naming_the_observed_ones(tmp_path):
    """A trace name that matches no observed log would otherwise leave the log it meant on the
    default deployment (a fit of the wrong hardware) without a word."""
    config = {"deployments": {"burstgpt-scale-100": DEPLOYMENT}, "fit_metrics": ["ttft"]}
    with pytest.raises(dg.Failure, match=r"^calibration config ops.calibrated.config.deployments:"
                                         r" trace 'burstgpt-scale-100': no ingested file has that"
                                         r" trace name .*; expected one of the traces with observed"
                                         r" latencies: burstgpt-scale100, burstgpt-scale1000$"):
        _materialize(tmp_path, _requests(True), config)
    config = {"fit_metrics_by_trace": {"burstgpt-scale-100": ["ttft"]}}
    with pytest.raises(dg.Failure, match=r"config.fit_metrics_by_trace: trace 'burstgpt-scale-100'"):
        _materialize(tmp_path, _requests(True), config)
    # where no log observes a latency (the README's command on the demo's samples), the line
    # said "expected one of the traces with observed latencies: none"
    config = {"deployments": {"my-trace": DEPLOYMENT}}
    (tmp_path / "unobserved").mkdir()
    with pytest.raises(dg.Failure, match=r"trace 'my-trace': no ingested file has that trace name"
                                         r" .*; no ingested trace carries observed latencies: there"
                                         r" is none to calibrate$"):
        _materialize(tmp_path / "unobserved", _requests(False), config)


def test_a_trace_named_in_the_config_is_told_apart_from_one_without_observations(tmp_path):
    """A trace that is ingested but carries no observed latency is not a misspelt name: each
    line names the settings that name the trace and why it cannot be calibrated. (One message
    said every such trace had 'no observed latencies', a name no file holds included.)"""
    requests = _requests(True).with_columns(
        pl.when(pl.col("trace") == "burstgpt-scale1000").then(None).otherwise(pl.col(c)).alias(c)
        for c in ("observed_ttft_s", "observed_e2e_s"))
    config = {"traces": ["burstgpt-scale1000", "fireworks_7b"],
              "candidates": {"fireworks_7b": [DEPLOYMENT]}}
    with pytest.raises(dg.Failure) as info:
        _materialize(tmp_path, requests, config)
    lines = str(info.value).splitlines()
    assert lines[0] == ("calibration config ops.calibrated.config.traces: trace 'burstgpt-scale1000':"
                        " its requests carry no observed latency (an observed 0 s counts as not"
                        " measured); expected one of the traces with"
                        " observed latencies: burstgpt-scale100")
    assert lines[1].startswith("calibration config ops.calibrated.config.traces and"
                               " ops.calibrated.config.candidates: trace 'fireworks_7b': no ingested"
                               " file has that trace name")
    assert len(lines) == 2
