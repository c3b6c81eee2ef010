"""A failed replay check stops the run, which publishes nothing: the offending rows are gone with
the run's working copy, so the check's own result says which requests (or which fleet) and why,
in one line (its description, which the run log prints) and in its metadata."""

from __future__ import annotations

import dagster as dg
import duckdb
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines.defs.replay.checks import (
    gpu_seconds_conserved,
    no_negative_stage,
    replayed_model_is_the_logged_one,
    ttft_covers_prefill,
)
from pipelines.warehouse import write_table

STAGES = {"trace": ["t"] * 3, "scenario": ["baseline"] * 3, "deployment": ["d"] * 3,
          "request_id": ["a", "b", "c"], "queue_s": [0.0, -0.5, 0.0], "prefill_s": [0.1] * 3,
          "decode_s": [1.0] * 3, "network_s": [0.0] * 3, "prefill_gpu_s": [0.4] * 3,
          "decode_gpu_s": [4.0] * 3, "gpu_s": [4.4] * 3, "e2e_s": [1.1, 1.1, 1.1],
          "ttft_s": [0.2, 0.2, 0.05], "finished_s": [1.0, 2.0, 10.0]}


def _warehouse(tmp_path, idle_gpu_s: float) -> str:
    path = str(tmp_path / f"w{idle_gpu_s}.duckdb")
    with duckdb.connect(path) as conn:
        write_table(conn, "request_stages", pl.DataFrame(STAGES))
        write_table(conn, "fleet_timeline", pl.DataFrame(
            {"trace": ["t"], "scenario": ["baseline"], "deployment": ["d"], "idle_gpu_s": [idle_gpu_s]}))
        write_table(conn, "roofline", pl.DataFrame(
            {"deployment": ["d"], "replicas": [1], "gpus_per_replica": [4]}))
    return path


def _run(check, path):
    return check(duckdb=DuckDBResource(database=path))


def test_a_negative_stage_is_named_in_one_line_and_listed(tmp_path):
    result = _run(no_negative_stage, _warehouse(tmp_path, 26.8))
    assert not result.passed
    assert result.description == ("1 replayed request(s) with a negative stage or GPU time, or no"
                                  " end-to-end time, first t b")
    assert result.metadata["bad_rows"].value == 1
    assert "| t | baseline | b | -0.5 |" in result.metadata["bad_requests"].value


def test_a_ttft_below_prefill_is_named_in_one_line_and_listed(tmp_path):
    result = _run(ttft_covers_prefill, _warehouse(tmp_path, 26.8))
    assert not result.passed
    assert result.description == "1 replayed request(s) with a TTFT shorter than their prefill, first t c"
    assert "| t | baseline | c | 0.05 | 0.1 |" in result.metadata["bad_requests"].value


def test_unconserved_gpu_seconds_name_the_fleet_and_both_sides(tmp_path):
    # 3 x 4.4 attributed + 26.8 idle = 40 = 1 x 4 GPUs x 10 s: conserved; 20 idle: 33.2 of 40
    assert _run(gpu_seconds_conserved, _warehouse(tmp_path, 26.8)).description is None
    result = _run(gpu_seconds_conserved, _warehouse(tmp_path, 20.0))
    assert not result.passed
    assert result.description == ("t (baseline): attributed + idle = 33.2 GPU-s, but the fleet had"
                                  " 40.0 GPU-s (relative error -0.17, tolerance 1e-09)")


def test_a_fleet_with_no_timeline_fails_the_conservation_check_by_name(tmp_path):
    """A second trace replayed but absent from fleet_timeline was dropped by the view's inner join,
    and the check passed on the first trace alone: it is now kept, unbalanced, and named."""
    path = _warehouse(tmp_path, 26.8)
    with duckdb.connect(path) as conn:
        conn.execute("INSERT INTO request_stages SELECT * REPLACE ('u' AS trace) FROM request_stages")
    result = _run(gpu_seconds_conserved, path)
    assert not result.passed
    assert result.description == ("u (baseline): its GPU-seconds cannot be balanced (no"
                                  " fleet_timeline rows, or a deployment not in roofline)")
    assert result.metadata["fleets"].value == 2 and result.metadata["unbalanced_fleets"].value == 1


def test_passing_checks_say_nothing_more(tmp_path):
    path = _warehouse(tmp_path, 26.8)
    with duckdb.connect(path) as conn:
        conn.execute("UPDATE request_stages SET queue_s = 0, ttft_s = 0.2")
    for check in (no_negative_stage, ttft_covers_prefill):
        result = _run(check, path)
        assert result.passed and result.description is None
        assert {k: v.value for k, v in result.metadata.items()} == {"bad_rows": 0}


def _named_models_warehouse(tmp_path, models: dict[str, list]) -> str:
    """Trace `a` replayed on `d`, a Llama-2-7B deployment, and trace `b` set aside whole on it;
    `models` gives each trace's requests.model, one entry a request."""
    path = str(tmp_path / "named.duckdb")
    with duckdb.connect(path) as conn:
        write_table(conn, "requests", pl.DataFrame(
            {"trace": [t for t, names in models.items() for _ in names],
             "model": [n for names in models.values() for n in names]}, schema={"trace": pl.String, "model": pl.String}))
        write_table(conn, "fleet_timeline", pl.DataFrame(
            {"trace": ["a", "a"], "scenario": ["baseline"] * 2, "deployment": ["d"] * 2}))
        write_table(conn, "unserved_requests", pl.DataFrame({"trace": ["b"], "deployment": ["d"]}))
        write_table(conn, "roofline", pl.DataFrame({"deployment": ["d"], "model": ["llama-2-7b"]}))
        write_table(conn, "models", pl.DataFrame({"model": ["llama-2-7b", "llama-2-70b", "llama-3.1-8b"]}))
    return path


def test_a_log_naming_another_model_than_the_deployments_is_a_warning_naming_both(tmp_path):
    """A log whose requests name Llama-2-70B, replayed on a Llama-2-7B deployment, was priced
    without a word: the warning names the trace, the name, how many requests carry it and the
    deployment's model, for a trace set aside whole too."""
    result = _run(replayed_model_is_the_logged_one, _named_models_warehouse(tmp_path, {
        "a": ["meta-llama/Llama-2-70b-chat-hf"] * 3 + ["llama2-7b-chat", None],
        "b": ["meta-llama/Meta-Llama-3.1-8B-Instruct"]}))
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    first = ("a: the log names model 'meta-llama/Llama-2-70b-chat-hf' (llama-2-70b in the catalog)"
             " on 3 of its 5 requests, and d serves llama-2-7b, the deployment it was replayed on:"
             " the time and dollars of those requests are llama-2-7b's, not the named model's")
    assert result.description.startswith(first + "; b: the log names model"
                                         " 'meta-llama/Meta-Llama-3.1-8B-Instruct' (llama-3.1-8b")
    assert result.metadata["names_of_another_model"].value == 2
    assert result.metadata["names"].value.startswith(f"- {first}\n- b: ")


def test_the_deployments_own_model_and_names_the_catalog_cannot_place_pass(tmp_path):
    """No false alarm: the deployment's model under a provider's name, a name spelt otherwise
    ('llama-v2-70b-chat', not placed) and one of no catalog model ('gpt-4') say nothing."""
    result = _run(replayed_model_is_the_logged_one, _named_models_warehouse(tmp_path, {
        "a": ["meta-llama/Llama-2-7b-chat-hf", "accounts/fireworks/models/llama-v2-70b-chat",
              "gpt-4", None], "b": [None]}))
    assert result.passed and result.description is None
    assert result.metadata["names_of_another_model"].value == 0
