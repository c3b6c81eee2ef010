"""Golden answers for the report SQL on a tiny hand-computed fleet (polars-benchmark style)."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.settings import reference_dir
from pipelines.warehouse import run_sql, write_table

PRICE = 3.6  # $/GPU-hour: one GPU-second costs $0.001


@pytest.fixture()
def conn():
    with duckdb.connect() as c:
        write_table(c, "shape_buckets", pl.read_csv(reference_dir() / "shape_buckets.csv"))
        write_table(c, "prices", pl.DataFrame({
            "gpu": ["g"], "provider": ["p"], "plan": ["on-demand"], "usd_per_gpu_hour": [PRICE]}))
        write_table(c, "roofline", pl.DataFrame({
            "deployment": ["d"], "gpu": ["g"], "gpus_per_replica": [2], "replicas": [1],
            "price_provider": ["p"], "price_plan": ["on-demand"]}))
        # Two requests: a chat answer (decode-heavy) and a long prompt with a one-token answer.
        write_table(c, "request_stages", pl.DataFrame({
            "trace": ["t", "t"], "scenario": ["baseline"] * 2, "deployment": ["d", "d"],
            "request_id": ["a", "b"], "prompt_tokens": [300, 5000], "output_tokens": [200, 1],
            "queue_s": [0.0, 1.0], "prefill_s": [0.1, 0.5], "decode_s": [5.0, 0.0],
            "network_s": [0.05, 0.05], "ttft_s": [0.15, 1.55], "tpot_s": [5.0 / 199, None],
            "e2e_s": [5.15, 1.55], "preemptions": [0, 0],
            "prefill_gpu_s": [0.2, 1.0], "decode_gpu_s": [9.8, 0.0], "gpu_s": [10.0, 1.0],
            "compute_gpu_s": [0.0, 1.0],
            "finished_s": [5.1, 2.5], "bound": ["memory", "compute"],
        }))
        write_table(c, "fleet_timeline", pl.DataFrame({
            "trace": ["t"], "scenario": ["baseline"], "deployment": ["d"], "replica": [0],
            "bin_start_s": [0.0], "bin_s": [10.0], "busy_share": [0.55], "mean_batch": [1.0],
            "mean_kv_use": [0.1], "mean_queue": [0.0], "busy_gpu_s": [11.0], "idle_gpu_s": [9.0],
        }))
        for step in ("deployment_prices", "request_costs", "request_shapes", "shape_spend",
                     "fleet_summary"):
            run_sql(c, step)
        yield c


def test_request_costs(conn):
    got = conn.sql("SELECT request_id, prefill_usd, decode_usd, total_usd FROM request_costs ORDER BY 1").pl()
    expected = pl.DataFrame({"request_id": ["a", "b"], "prefill_usd": [0.0002, 0.001],
                             "decode_usd": [0.0098, 0.0], "total_usd": [0.010, 0.001]})
    assert_frame_equal(got, expected, rel_tol=1e-12)


def test_shape_spend(conn):
    got = conn.sql(
        "SELECT rank, shape, requests, spend_usd, pct_spend, cum_pct_spend, dominant_stage,"
        " cost_stage, bound, queue_pct_latency FROM shape_spend ORDER BY rank"
    ).pl()
    expected = pl.DataFrame({
        "rank": [1, 2],
        "shape": ["short prompt / medium answer", "long prompt / one-line answer"],
        "requests": [1, 1],
        "spend_usd": [0.010, 0.001],
        "pct_spend": [100 * 10 / 11, 100 * 1 / 11],
        "cum_pct_spend": [100 * 10 / 11, 100.0],
        "dominant_stage": ["decode", "queue"],
        "cost_stage": ["decode", "prefill"],
        "bound": ["memory", "compute"],
        "queue_pct_latency": [0.0, 100 * 1.0 / 1.55],
    })
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)


def test_fleet_summary(conn):
    got = conn.sql(
        "SELECT trace, requests, gpu_hours, spend_usd, attributed_usd, idle_usd, idle_share"
        " FROM fleet_summary"
    ).pl()
    row = {"requests": [2], "gpu_hours": [20 / 3600], "spend_usd": [0.020],
           "attributed_usd": [0.011], "idle_usd": [0.009], "idle_share": [0.45]}
    expected = pl.DataFrame({"trace": ["t", "all"], **{k: v * 2 for k, v in row.items()}})
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)
