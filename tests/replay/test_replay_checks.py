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
from pipelines.replay.api import replay_fleet
from pipelines.roofline import load_catalog
from pipelines.warehouse import write_table

STAGES = {"trace": ["t"] * 3, "scenario": ["baseline"] * 3, "deployment": ["d"] * 3,
          "request_id": ["a", "b", "c"], "queue_s": [0.0, -0.5, 0.0], "prefill_s": [0.1] * 3,
          "decode_s": [1.0] * 3, "network_s": [0.0] * 3, "prefill_gpu_s": [0.4] * 3,
          "decode_gpu_s": [4.0] * 3, "gpu_s": [4.4] * 3, "e2e_s": [1.1, 1.1, 1.1],
          "ttft_s": [0.2, 0.2, 0.05], "finished_s": [1.0, 2.0, 10.0], "replica": [0, 1, 0]}


def _warehouse(tmp_path, idle_gpu_s: float) -> str:
    """Trace t on 2 replicas x 2 GPUs for 10 s (40 GPU-s): replica 0 busy 8.8 GPU-s with requests
    a and c, replica 1 busy 4.4 with b, and `idle_gpu_s` idle on replica 0."""
    path = str(tmp_path / f"w{idle_gpu_s}.duckdb")
    with duckdb.connect(path) as conn:
        write_table(conn, "request_stages", pl.DataFrame(STAGES))
        write_table(conn, "fleet_timeline", pl.DataFrame(
            {"trace": ["t"] * 2, "scenario": ["baseline"] * 2, "deployment": ["d"] * 2,
             "replica": [0, 1], "busy_gpu_s": [8.8, 4.4], "idle_gpu_s": [idle_gpu_s, 0.0]}))
        write_table(conn, "roofline", pl.DataFrame(
            {"deployment": ["d"], "replicas": [2], "gpus_per_replica": [2],
             "decode_step_s_batch1_ctx1k": [0.02]}))
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
    # 3 x 4.4 attributed + 26.8 idle = 40 = 2 x 2 GPUs x 10 s: conserved; 20 idle: 33.2 of 40
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


WEEK_S = 604_800.0


def _idle_week(tmp_path, attributed: list[float], busy: list[float]) -> str:
    """Trace w on 3 replicas x 4 GPUs for a week (7,257,600 GPU-s), busy a minute: replica i's one
    request attributed `attributed[i]` GPU-s, its timeline `busy[i]` busy and the rest idle."""
    path = str(tmp_path / "week.duckdb")
    replicas = range(len(busy))
    with duckdb.connect(path) as conn:
        write_table(conn, "request_stages", pl.DataFrame({
            "trace": "w", "scenario": "baseline", "deployment": "d", "replica": list(replicas),
            "request_id": [f"w:{i + 2}" for i in replicas], "gpu_s": attributed,
            "finished_s": [WEEK_S - i for i in replicas]}))
        write_table(conn, "fleet_timeline", pl.DataFrame({
            "trace": "w", "scenario": "baseline", "deployment": "d", "replica": list(replicas),
            "busy_gpu_s": busy, "idle_gpu_s": [4 * WEEK_S - b for b in busy]}))
        write_table(conn, "roofline", pl.DataFrame(
            {"deployment": ["d"], "replicas": [len(busy)], "gpus_per_replica": [4],
             "decode_step_s_batch1_ctx1k": [0.02]}))
    return path


def test_a_replicas_attribution_error_on_a_mostly_idle_fleet_fails_by_name(tmp_path):
    """Against a week's capacity, 30 of a minute's 69.4 busy GPU-seconds attributed a millionth
    too many is an error of 4e-12, and the check passed; against that replica's busy seconds it is
    a millionth, far above what the replay's arithmetic leaves (the tolerance: twice BUSY_SNAP
    plus the clock's resolution over a week, span x 2^-52 / the 0.02-s decode step)."""
    assert _run(gpu_seconds_conserved, _idle_week(tmp_path, [20.0, 30.0, 19.4], [20.0, 30.0, 19.4])).passed
    result = _run(gpu_seconds_conserved, _idle_week(tmp_path, [20.0, 30.00003, 19.4], [20.0, 30.0, 19.4]))
    assert not result.passed
    assert result.description == ("w (baseline) replica 1: attributed = 30.00003 GPU-s, but the"
                                  " replica was busy 30 GPU-s (relative error 1e-06, tolerance 8.71e-09)")
    assert result.metadata["worst_relative_error"].value < 1e-11   # the capacity balances


def test_replica_errors_that_cancel_over_the_fleet_fail(tmp_path):
    """A GPU-second attributed to replica 0 that replica 1 ran: the fleet's sum is exact, both
    replicas are off; the worse relative to its busy seconds is named, and the other counted."""
    result = _run(gpu_seconds_conserved, _idle_week(tmp_path, [21.0, 29.0, 19.4], [20.0, 30.0, 19.4]))
    assert not result.passed
    assert result.metadata["worst_relative_error"].value == 0.0
    assert result.description == ("w (baseline) replica 0: attributed = 21 GPU-s, but the replica"
                                  " was busy 20 GPU-s (relative error 0.05, tolerance 8.71e-09);"
                                  " 1 more such replica(s)")


def test_a_replica_balances_with_no_requests_only_if_never_busy(tmp_path):
    """A replica no request was routed to has fleet_timeline rows and no request_stages rows: it
    balances at 0 busy GPU-seconds, and busy without a request fails (-1), as requests without
    busy time do (an infinite error)."""
    assert _run(gpu_seconds_conserved, _idle_week(tmp_path, [20.0, 30.0, 0.0], [20.0, 30.0, 0.0])).passed
    path = _idle_week(tmp_path, [20.0, 30.0, 0.0], [20.0, 30.0, 0.0])
    with duckdb.connect(path) as conn:
        conn.execute("DELETE FROM request_stages WHERE replica = 2")
    assert _run(gpu_seconds_conserved, path).passed
    with duckdb.connect(path) as conn:   # a GPU-second replica 2 ran, attributed on replica 1
        conn.execute("UPDATE fleet_timeline SET busy_gpu_s = 1, idle_gpu_s = idle_gpu_s - 1"
                     " WHERE replica = 2")
        conn.execute("UPDATE request_stages SET gpu_s = 31 WHERE replica = 1")
    result = _run(gpu_seconds_conserved, path)
    assert not result.passed and result.description.startswith(
        "w (baseline) replica 2: attributed = 0 GPU-s, but the replica was busy 1 GPU-s (relative error -1,")
    # a GPU-second replica 1 ran, attributed to a request on replica 2, which never ran a step
    result = _run(gpu_seconds_conserved, _idle_week(tmp_path, [20.0, 29.0, 1.0], [20.0, 30.0, 0.0]))
    assert not result.passed and result.description.startswith(
        "w (baseline) replica 2: attributed = 1 GPU-s, but the replica was busy 0 GPU-s (relative error inf,")


def test_a_fleet_busy_without_a_single_stage_fails(tmp_path):
    """Trace u's timeline ran a replica 5 GPU-s and request_stages holds none of u's rows: the
    balance view has u's replica at -1, but its busy_resolution (u's span, from its stages) is
    NULL, and the comparison with a NULL tolerance counted it as balanced, so the check passed
    with a worst busy error of 1 in its own metadata (gpu_conservation, from the stages, has no
    fleet u to fail on)."""
    path = _warehouse(tmp_path, 26.8)
    with duckdb.connect(path) as conn:
        conn.execute("INSERT INTO fleet_timeline BY NAME SELECT 'u' AS trace, 'baseline' AS scenario,"
                     " 'd' AS deployment, 0 AS replica, 5.0 AS busy_gpu_s, 0.0 AS idle_gpu_s")
    result = _run(gpu_seconds_conserved, path)
    assert not result.passed
    assert result.description == ("u (baseline) replica 0: attributed = 0 GPU-s, but the replica was"
                                  " busy 5 GPU-s (relative error -1, tolerance 2e-09)")


def test_a_sound_replay_over_a_year_passes_though_its_clock_rounds_off_more_than_a_billionth(tmp_path):
    """Three one-token requests over a year, each a single step: the timeline records a step as
    its end less its start, each near 3e7 s, and rounds off up to half an ulp of it (~2e-9 s) of
    an 8-ms step: attributed and busy seconds differ by ~1e-7 of the busy, which a tolerance of a
    billionth would stop the run on; the clock's resolution (span x 2^-52 / a decode step, ~9e-7)
    lets it pass."""
    deployment = load_catalog().deployment("seed-example")
    result = replay_fleet(pl.DataFrame({
        "request_id": ["a", "b", "c"], "arrival_s": [1.0, 1.6e7, 3.15e7],
        "prompt_tokens": [20, 30, 40], "output_tokens": [1, 1, 1]}), deployment, 60.0)
    labels = {"trace": pl.lit("y"), "scenario": pl.lit("baseline"),
              "deployment": pl.lit(deployment.name)}
    path = str(tmp_path / "year.duckdb")
    with duckdb.connect(path) as conn:
        write_table(conn, "request_stages", result.stages.select(*result.stages.columns, **labels))
        write_table(conn, "fleet_timeline", result.timeline.select(*result.timeline.columns, **labels))
        write_table(conn, "roofline", pl.DataFrame([deployment.as_row()]))
    check = _run(gpu_seconds_conserved, path)
    assert check.passed, check.description
    assert check.metadata["worst_busy_relative_error"].value > 1e-8


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
