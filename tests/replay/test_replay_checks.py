"""A failed replay check stops the run, which publishes nothing: the offending rows are gone with
the run's working copy, so the check's own result says which requests (or which fleet) and why,
in one line (its description, which the run log prints) and in its metadata."""

from __future__ import annotations

import duckdb
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines.defs.replay.checks import gpu_seconds_conserved, no_negative_stage, ttft_covers_prefill
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


def test_passing_checks_say_nothing_more(tmp_path):
    path = _warehouse(tmp_path, 26.8)
    with duckdb.connect(path) as conn:
        conn.execute("UPDATE request_stages SET queue_s = 0, ttft_s = 0.2")
    for check in (no_negative_stage, ttft_covers_prefill):
        result = _run(check, path)
        assert result.passed and result.description is None
        assert {k: v.value for k, v in result.metadata.items()} == {"bad_rows": 0}
