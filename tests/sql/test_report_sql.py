"""Golden answers for the report SQL on a tiny hand-computed fleet (polars-benchmark style)."""

from __future__ import annotations

import math

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.reports.sql_tables import SQL_TABLES
from pipelines.reports.text import WHAT_IF_COLUMNS, markdown_table
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
            "max_seqs": [256], "price_provider": ["p"], "price_plan": ["on-demand"]}))
        # Two requests: a chat answer (decode-heavy) and a long prompt with a one-token answer.
        write_table(c, "request_stages", pl.DataFrame({
            "trace": ["t", "t"], "scenario": ["baseline"] * 2, "deployment": ["d", "d"],
            "request_id": ["a", "b"], "arrival_s": [0.0, 0.5], "prompt_tokens": [300, 5000],
            "output_tokens": [200, 1],
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
        write_table(c, "requests", pl.DataFrame({
            "trace": ["t", "t"], "request_id": ["a", "b"], "model": ["m1", "m1"],
            "tenant": ["acme", None]}))
        # One what-if scenario: half the GPU-seconds at the same price, faster first tokens.
        write_table(c, "scenario_stages", pl.DataFrame({
            "trace": ["t", "t"], "scenario": ["s"] * 2, "deployment": ["d+s"] * 2,
            "request_id": ["a", "b"], "output_tokens": [200, 1], "gpu_s": [5.0, 0.5],
            "ttft_s": [0.1, 1.0], "tpot_s": [0.02, None]}))
        # ... and one skipped: it cannot apply to the baseline deployment.
        write_table(c, "scenario_fleets", pl.DataFrame({
            "trace": ["t", "t"], "scenario": ["s", "k"], "description": ["half", "fp8"],
            "change": ["replicas 2 → 1", "weights bf16 → fp8"], "baseline_deployment": ["d", "d"],
            "deployment": ["d+s", "d+k"], "usd_per_gpu_hour": [PRICE, None],
            "idle_gpu_s": [4.5, None], "span_s": [5.1, None],
            "prefix_cache": pl.Series([None, None], dtype=pl.Utf8), "lower_precision": [False, True],
            "price_only": [False, False],
            "skipped": [None, "gpu 'g' has no fp8 tensor throughput"]}))
        _build_report_tables(c)
        yield c


def _build_report_tables(conn) -> None:
    """The report assets' steps, in the order the bench runs them."""
    for table in SQL_TABLES:
        for step in table.steps:
            run_sql(conn, step)


def test_request_costs(conn):
    got = conn.sql("SELECT request_id, prefill_usd, decode_usd, total_usd FROM request_costs ORDER BY 1").pl()
    expected = pl.DataFrame({"request_id": ["a", "b"], "prefill_usd": [0.0002, 0.001],
                             "decode_usd": [0.0098, 0.0], "total_usd": [0.010, 0.001]})
    assert_frame_equal(got, expected, rel_tol=1e-12)


def test_shape_spend(conn):
    got = conn.sql(
        "SELECT rank, shape, requests, spend_usd, pct_spend, cum_pct_spend, dominant_stage,"
        " cost_stage, bound, queue_pct_latency, decode_pct_gpu_time, lever, cost_lever"
        " FROM shape_spend ORDER BY rank"
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
        "decode_pct_gpu_time": [98.0, 0.0],
        "lever": ["batching, speculative decoding, lower precision, KV-cache compression",
                  "more replicas or scheduling"],
        "cost_lever": ["batching, speculative decoding, lower precision, KV-cache compression",
                       "prompt/prefix caching, context trimming"],
    })
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)


def test_shape_spend_per_request_columns_of_a_shape_of_two_requests(conn):
    """The shape table's per-request figures (the report's $/request, $/1M out, p95 TTFT and
    p50 TPOT) on a shape of two requests: with one request a shape, a total is its own
    mean and every percentile the same number, so nothing could tell them apart."""
    conn.execute("INSERT INTO request_stages BY NAME SELECT 't' AS trace, 'baseline' AS scenario,"
                 " 'd' AS deployment, 'c' AS request_id, 1.0 AS arrival_s, 400 AS prompt_tokens,"
                 " 100 AS output_tokens, 0.5 AS queue_s, 0.2 AS prefill_s, 2.0 AS decode_s,"
                 " 0.05 AS network_s, 0.75 AS ttft_s, 2.0 / 99 AS tpot_s, 2.75 AS e2e_s,"
                 " 0 AS preemptions, 0.4 AS prefill_gpu_s, 3.6 AS decode_gpu_s, 4.0 AS gpu_s,"
                 " 0.0 AS compute_gpu_s, 3.7 AS finished_s, 'memory' AS bound")
    for step in ("request_costs", "shape_spend"):
        run_sql(conn, step)
    got = conn.sql(
        "SELECT shape, requests, pct_requests, prompt_tokens, output_tokens, gpu_hours, spend_usd,"
        " usd_per_request, usd_per_1m_output_tokens, p50_ttft_s, p95_ttft_s, p50_tpot_s,"
        " p95_tpot_s, p50_e2e_s, p95_e2e_s, prefill_pct_latency, decode_pct_latency,"
        " network_pct_latency, prefill_pct_spend, decode_pct_spend, prefill_pct_gpu_time"
        " FROM shape_spend ORDER BY rank"
    ).pl()
    tpot = sorted([5.0 / 199, 2.0 / 99])
    latency = 0.5 + 0.3 + 7.0 + 0.1
    expected = pl.DataFrame({
        "shape": ["short prompt / medium answer", "long prompt / one-line answer"],
        "requests": [2, 1], "pct_requests": [200 / 3, 100 / 3],
        "prompt_tokens": [700, 5000], "output_tokens": [300, 1],
        "gpu_hours": [14 / 3600, 1 / 3600], "spend_usd": [0.014, 0.001],
        "usd_per_request": [0.007, 0.001], "usd_per_1m_output_tokens": [1e6 * 0.014 / 300, 1000.0],
        "p50_ttft_s": [0.45, 1.55], "p95_ttft_s": [0.15 + 0.95 * 0.6, 1.55],
        "p50_tpot_s": [sum(tpot) / 2, None], "p95_tpot_s": [tpot[0] + 0.95 * (tpot[1] - tpot[0]), None],
        "p50_e2e_s": [3.95, 1.55], "p95_e2e_s": [2.75 + 0.95 * 2.4, 1.55],
        "prefill_pct_latency": [100 * 0.3 / latency, 100 * 0.5 / 1.55],
        "decode_pct_latency": [100 * 7.0 / latency, 0.0],
        "network_pct_latency": [100 * 0.1 / latency, 100 * 0.05 / 1.55],
        "prefill_pct_spend": [100 * 0.6 / 14, 100.0], "decode_pct_spend": [100 * 13.4 / 14, 0.0],
        "prefill_pct_gpu_time": [100 * 0.6 / 14, 100.0],
    })
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9, abs_tol=1e-12)


def test_fleet_summary(conn):
    got = conn.sql(
        "SELECT trace, requests, gpu_hours, spend_usd, attributed_usd, idle_usd, idle_share"
        " FROM fleet_summary"
    ).pl()
    row = {"requests": [2], "gpu_hours": [20 / 3600], "spend_usd": [0.020],
           "attributed_usd": [0.011], "idle_usd": [0.009], "idle_share": [0.45]}
    expected = pl.DataFrame({"trace": ["t", "all"], **{k: v * 2 for k, v in row.items()}})
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)


def test_fleet_summary_per_replica_and_per_request_columns(conn):
    """The columns the summary line and the README describe beside the dollars, on a fleet of
    two replicas (one idle all along): the span is the replay's, not the replicas' seconds
    added; mean_batch counts running time only; $ per 1M output tokens includes idle GPUs; the
    percentiles are the requests'. (With one replica in one bin, sum and max, or a plain mean
    and a busy-weighted one, are the same numbers and a test could not tell them apart.)"""
    conn.execute("INSERT INTO fleet_timeline BY NAME SELECT trace, scenario, deployment,"
                 " 1 AS replica, bin_start_s, bin_s, 0.0 AS busy_share, 0.0 AS mean_batch,"
                 " 0.0 AS mean_kv_use, 0.0 AS mean_queue, 0.0 AS busy_gpu_s, 20.0 AS idle_gpu_s"
                 " FROM fleet_timeline")
    run_sql(conn, "fleet_summary")
    got = conn.sql(
        "SELECT trace, span_s, replica_hours, gpu_hours, spend_usd, idle_share, mean_batch,"
        " usd_per_1m_output_tokens, preemptions, p95_queue_s, p50_ttft_s, p95_ttft_s,"
        " p50_tpot_s, p95_tpot_s, p50_e2e_s, p95_e2e_s FROM fleet_summary"
    ).pl()
    row = {"span_s": [10.0], "replica_hours": [20 / 3600], "gpu_hours": [40 / 3600],
           "spend_usd": [0.040], "idle_share": [29 / 40], "mean_batch": [1.0 / 0.55],
           "usd_per_1m_output_tokens": [1e6 * 0.040 / 201], "preemptions": [0],
           "p95_queue_s": [0.95], "p50_ttft_s": [0.85], "p95_ttft_s": [0.15 + 0.95 * 1.4],
           "p50_tpot_s": [5.0 / 199], "p95_tpot_s": [5.0 / 199], "p50_e2e_s": [3.35],
           "p95_e2e_s": [1.55 + 0.95 * 3.6]}
    expected = pl.DataFrame({"trace": ["t", "all"], **{k: v * 2 for k, v in row.items()}})
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)


def test_fleet_summary_says_how_full_its_busy_gpus_are(conn):
    """Busy is not full: the demo's conv trace read "idle 0.3%" while it ran batches of 9.6 of
    the 256 sequences a step may hold, its KV cache 3% full at most. fleet_summary carries the
    deployment's max_seqs beside mean_batch, and the fullest replica-bin's KV use (here the
    second replica's 0.3, not the first's 0.1 nor their mean)."""
    conn.execute("INSERT INTO fleet_timeline BY NAME SELECT trace, scenario, deployment,"
                 " 1 AS replica, bin_start_s, bin_s, 0.25 AS busy_share, 3.0 AS mean_batch,"
                 " 0.3 AS mean_kv_use, 0.0 AS mean_queue, 5.0 AS busy_gpu_s, 15.0 AS idle_gpu_s"
                 " FROM fleet_timeline")
    run_sql(conn, "fleet_summary")
    got = conn.sql("SELECT trace, max_seqs, peak_kv_use FROM fleet_summary").pl()
    expected = pl.DataFrame({"trace": ["t", "all"], "max_seqs": [256, 256], "peak_kv_use": [0.3, 0.3]})
    assert_frame_equal(got, expected, check_dtypes=False)


def test_deployment_summary_adds_up_each_deployments_traces(conn):
    """A fleet of two deployments, d (traces t and v, $3.60 per GPU-hour) and e (trace u, $7.20):
    each deployment's row is its traces' fleet_summary rows added up, at its own price, and the
    rows add up to fleet_summary's `all`."""
    conn.execute("INSERT INTO prices VALUES ('h', 'p', 'on-demand', 7.2)")
    conn.execute("INSERT INTO roofline BY NAME SELECT * REPLACE ('e' AS deployment, 'h' AS gpu,"
                 " 1 AS gpus_per_replica) FROM roofline")
    conn.execute("INSERT INTO request_stages BY NAME SELECT * REPLACE (CASE request_id WHEN 'a'"
                 " THEN 'u' ELSE 'v' END AS trace, CASE request_id WHEN 'a' THEN 'e' ELSE 'd' END"
                 " AS deployment) FROM request_stages")
    conn.execute("INSERT INTO fleet_timeline BY NAME SELECT * REPLACE ('u' AS trace, 'e' AS"
                 " deployment, 10.0 AS busy_gpu_s, 10.0 AS idle_gpu_s) FROM fleet_timeline")
    conn.execute("INSERT INTO fleet_timeline BY NAME SELECT * REPLACE ('v' AS trace, 1.0 AS"
                 " busy_gpu_s, 4.0 AS idle_gpu_s) FROM fleet_timeline WHERE trace = 't'")
    _build_report_tables(conn)
    got = conn.sql("FROM deployment_summary").pl()
    expected = pl.DataFrame({
        "deployment": ["d", "e"], "traces": [2, 1], "trace_names": [["t", "v"], ["u"]],
        "requests": [3, 1], "output_tokens": [202, 200], "gpu_hours": [25 / 3600, 20 / 3600],
        "spend_usd": [0.025, 0.040], "attributed_usd": [0.012, 0.020], "idle_usd": [0.013, 0.020],
        "idle_share": [13 / 25, 0.5], "usd_per_1m_output_tokens": [1e6 * 0.025 / 202, 200.0],
        "usd_per_gpu_hour": [PRICE, 7.2]})
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)
    fleet = conn.sql("FROM fleet_summary WHERE trace = 'all'").pl()
    for column in ("requests", "output_tokens", "gpu_hours", "spend_usd", "attributed_usd", "idle_usd"):
        assert got[column].sum() == pytest.approx(fleet[column][0]), column


def test_stage_breakdown_overall(conn):
    got = conn.sql(
        "SELECT rank, stage, latency_s, pct_latency, gpu_hours, pct_gpu_time, spend_usd, pct_spend"
        " FROM stage_breakdown WHERE shape = 'all' ORDER BY stage_order"
    ).pl()
    latency = [1.0, 0.6, 5.0, 0.1]
    expected = pl.DataFrame({
        "rank": [0] * 4, "stage": ["queue", "prefill", "decode", "network"],
        "latency_s": latency, "pct_latency": [100 * v / 6.7 for v in latency],
        "gpu_hours": [0.0, 1.2 / 3600, 9.8 / 3600, 0.0],
        "pct_gpu_time": [0.0, 100 * 1.2 / 11, 100 * 9.8 / 11, 0.0],
        "spend_usd": [0.0, 0.0012, 0.0098, 0.0],
        "pct_spend": [0.0, 100 * 1.2 / 11, 100 * 9.8 / 11, 0.0],
    })
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9, abs_tol=1e-12)


def test_what_if_marks_a_skipped_scenario(conn):
    """A scenario that could not apply is one 'all' row with its reason and no figures."""
    rows = conn.sql("SELECT scenario, shape, rank, requests, delta_usd, skipped FROM what_if"
                    " WHERE skipped IS NOT NULL OR scenario = 'k'").fetchall()
    assert rows == [("k", "all", 0, None, None, "gpu 'g' has no fp8 tensor throughput")]
    assert conn.sql("SELECT count(*) FROM what_if WHERE scenario = 's' AND skipped IS NULL"
                    ).fetchall() == [(3,)]


def test_stage_shares_sum_to_100_per_shape(conn):
    sums = conn.sql("SELECT shape, sum(pct_latency), sum(pct_gpu_time), sum(pct_spend)"
                    " FROM stage_breakdown GROUP BY shape").fetchall()
    assert len(sums) == 3  # two shapes and 'all'
    for _, *shares in sums:
        assert shares == pytest.approx([100.0] * 3)


def test_chargeback(conn):
    got = conn.sql("SELECT dimension, value, requests, output_tokens, spend_usd, pct_spend,"
                   " usd_per_1m_output_tokens, p50_ttft_s, p95_ttft_s, p95_tpot_s FROM chargeback").pl()
    expected = pl.DataFrame({"dimension": ["model", "tenant"], "value": ["m1", "acme"],
                             "requests": [2, 1], "output_tokens": [201, 200],
                             "spend_usd": [0.011, 0.010], "pct_spend": [100.0, 100 * 10 / 11],
                             "usd_per_1m_output_tokens": [1e6 * 0.011 / 201, 1e6 * 0.010 / 200],
                             "p50_ttft_s": [0.85, 0.15], "p95_ttft_s": [0.15 + 0.95 * 1.4, 0.15],
                             "p95_tpot_s": [5.0 / 199, 5.0 / 199]})
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)


def test_chargeback_is_empty_when_the_log_names_no_one(conn):
    conn.execute("UPDATE requests SET model = NULL, tenant = NULL")
    run_sql(conn, "chargeback")
    assert conn.sql("SELECT count(*) FROM chargeback").fetchall() == [(0,)]
    assert "spend_usd" in conn.sql("FROM chargeback").columns


def test_fleet_timeline_minute(conn):
    got = conn.sql("SELECT minute_s, replicas, arrivals, utilization, sequences, kv_use, queued,"
                   " busy_gpu_s, idle_gpu_s, spend_usd FROM fleet_timeline_minute").pl()
    expected = pl.DataFrame({"minute_s": [0.0], "replicas": [1], "arrivals": [2],
                             "utilization": [0.55], "sequences": [1.0], "kv_use": [0.1],
                             "queued": [0.0], "busy_gpu_s": [11.0], "idle_gpu_s": [9.0],
                             "spend_usd": [0.020]})
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)


def test_fleet_timeline_minute_counts_every_arrival_with_bins_wider_than_a_minute(conn):
    """With timeline_bin_s = 300 a row covers five minutes: an arrival in its second to fifth
    minute is counted in it, not dropped for want of a row of its own minute."""
    write_table(conn, "fleet_timeline", pl.DataFrame({
        "trace": ["t", "t"], "scenario": ["baseline"] * 2, "deployment": ["d", "d"], "replica": [0, 0],
        "bin_start_s": [0.0, 300.0], "bin_s": [300.0, 200.0], "busy_share": [0.5, 0.5],
        "mean_batch": [1.0, 1.0], "mean_kv_use": [0.1, 0.1], "mean_queue": [0.0, 0.0],
        "busy_gpu_s": [300.0, 200.0], "idle_gpu_s": [300.0, 200.0]}))
    conn.execute("UPDATE request_stages SET arrival_s = CASE request_id WHEN 'a' THEN 90.0 ELSE 400.0 END")
    run_sql(conn, "fleet_timeline_minute")
    got = conn.sql("SELECT minute_s, arrivals FROM fleet_timeline_minute ORDER BY minute_s").pl()
    assert_frame_equal(got, pl.DataFrame({"minute_s": [0.0, 300.0], "arrivals": [1, 1]}), check_dtypes=False)


def test_fleet_timeline_minute_of_two_replicas(conn):
    """Running and waiting sequences are fleet-wide (the replicas' means added), utilization and
    KV use the replicas' mean: with one replica, and nobody waiting, the two read the same and a
    test could not tell them apart."""
    conn.execute("INSERT INTO fleet_timeline BY NAME SELECT trace, scenario, deployment,"
                 " 1 AS replica, bin_start_s, bin_s, 0.25 AS busy_share, 3.0 AS mean_batch,"
                 " 0.3 AS mean_kv_use, 2.0 AS mean_queue, 5.0 AS busy_gpu_s, 15.0 AS idle_gpu_s"
                 " FROM fleet_timeline")
    run_sql(conn, "fleet_timeline_minute")
    got = conn.sql("SELECT replicas, utilization, sequences, kv_use, queued, busy_gpu_s, idle_gpu_s,"
                   " spend_usd FROM fleet_timeline_minute").pl()
    expected = pl.DataFrame({"replicas": [2], "utilization": [0.4], "sequences": [4.0],
                             "kv_use": [0.2], "queued": [2.0], "busy_gpu_s": [16.0],
                             "idle_gpu_s": [24.0], "spend_usd": [0.040]})
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9)


def test_what_if(conn):
    got = conn.sql(
        "SELECT scenario, rank, shape, baseline_usd, spend_usd, delta_usd, delta_pct,"
        " delta_usd_per_day, baseline_p95_ttft_s, p95_ttft_s, delta_p95_tpot_s, delta_fleet_usd,"
        " delta_fleet_usd_per_day"
        " FROM what_if WHERE scenario = 's' ORDER BY scenario, rank"
    ).pl()
    day = 86400 / 5.1  # the baseline's replayed span is 5.1 s
    expected = pl.DataFrame({
        "scenario": ["s"] * 3,
        "rank": [0, 1, 2],
        "shape": ["all", "short prompt / medium answer", "long prompt / one-line answer"],
        "baseline_usd": [0.011, 0.010, 0.001],
        "spend_usd": [0.0055, 0.005, 0.0005],
        "delta_usd": [-0.0055, -0.005, -0.0005],
        "delta_pct": [-50.0, -50.0, -50.0],
        "delta_usd_per_day": [-0.0055 * day, -0.005 * day, -0.0005 * day],
        "baseline_p95_ttft_s": [0.15 + 0.95 * 1.4, 0.15, 1.55],
        "p95_ttft_s": [0.1 + 0.95 * 0.9, 0.1, 1.0],
        "delta_p95_tpot_s": [0.02 - 5.0 / 199, 0.02 - 5.0 / 199, None],
        "delta_fleet_usd": [(5.5 + 4.5) * 0.001 - 0.020, None, None],
        "delta_fleet_usd_per_day": [((5.5 + 4.5) * 0.001 - 0.020) * day, None, None],
    })
    # dollar deltas are rounded to a millionth of a dollar (sql/what_if.sql)
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-9, abs_tol=5e-7)


def test_what_if_baseline_per_day_weighs_each_trace_by_its_own_span(conn):
    """baseline_usd_per_day is what delta_usd_per_day is a share of: each trace's busy dollars x
    86,400 / its span. A second trace 'u' of a tenth of 't''s span, with the same requests and
    halved GPU-seconds in the scenario: its dollars are 1/2 of the replays' but 10/11 a day. With
    only 't' halved, the two bases part: -25% of the replays' dollars, -1/22 of a day's."""
    for table in ("request_stages", "scenario_stages", "requests", "scenario_fleets", "fleet_timeline"):
        conn.execute(f"INSERT INTO {table} SELECT * REPLACE ('u' AS trace) FROM {table}")
    conn.execute("UPDATE request_stages SET finished_s = finished_s / 10 WHERE trace = 'u'")
    _build_report_tables(conn)
    row = conn.sql("FROM what_if WHERE scenario = 's' AND shape = 'all'").pl().row(0, named=True)
    day_t, day_u = 0.011 * 86400 / 5.1, 0.011 * 86400 / 0.51
    assert row["baseline_usd_per_day"] == pytest.approx(day_t + day_u)
    assert row["delta_usd_per_day"] == pytest.approx(-(day_t + day_u) / 2, abs=1e-6)
    assert row["delta_pct"] == pytest.approx(-50.0)
    # 'u' unchanged by the scenario: its scenario rows carry its baseline GPU-seconds
    conn.execute("""UPDATE scenario_stages AS s SET gpu_s = b.gpu_s FROM request_stages AS b
                    WHERE s.trace = 'u' AND b.trace = 'u' AND s.request_id = b.request_id""")
    _build_report_tables(conn)
    row = conn.sql("FROM what_if WHERE scenario = 's' AND shape = 'all'").pl().row(0, named=True)
    assert row["delta_pct"] == pytest.approx(-25.0)
    assert row["delta_usd_per_day"] / row["baseline_usd_per_day"] == pytest.approx(
        -(day_t / 2) / (day_t + day_u), rel=1e-4)


def test_what_if_says_a_change_once_where_every_baseline_deployment_has_it(conn):
    """A fleet of several deployments: a scenario whose change reads the same on each baseline
    (fp8 weights from bf16, an output cap) named every deployment with one phrase, four copies of
    it in the report's table and headline; one whose change differs names each with its own."""
    conn.execute("INSERT INTO scenario_fleets SELECT * REPLACE ('u' AS trace, 'e' AS"
                 " baseline_deployment) FROM scenario_fleets")
    for table in ("request_stages", "scenario_stages", "requests", "fleet_timeline"):
        conn.execute(f"INSERT INTO {table} SELECT * REPLACE ('u' AS trace) FROM {table}")
    _build_report_tables(conn)
    changes = "SELECT change FROM what_if WHERE scenario = 's' AND shape = 'all'"
    assert conn.sql(changes).fetchall() == [("replicas 2 → 1",)]
    conn.execute("UPDATE scenario_fleets SET change = 'replicas 3 → 1' WHERE trace = 'u'")
    _build_report_tables(conn)
    assert conn.sql(changes).fetchall() == [("d: replicas 2 → 1; e: replicas 3 → 1",)]


def test_what_if_prices_a_scenario_at_its_own_gpu_price(conn):
    """A GPU swap's busy and fleet dollars are its GPU-seconds at the scenario fleet's price
    (scenario_fleets.usd_per_gpu_hour), not the baseline's: here half the GPU-seconds at twice
    the price cost what the baseline did. (The fixture's scenario had the baseline's price, so
    pricing it at the baseline's could not be told apart.)"""
    conn.execute("UPDATE scenario_fleets SET usd_per_gpu_hour = 2 * ? WHERE scenario = 's'", [PRICE])
    _build_report_tables(conn)
    row = conn.sql("FROM what_if WHERE scenario = 's' AND shape = 'all'").pl().row(0, named=True)
    assert row["spend_usd"] == pytest.approx(0.011) and row["delta_usd"] == 0.0
    assert row["fleet_spend_usd"] == pytest.approx((5.5 + 4.5) * 0.002)


def test_what_if_fleet_per_day_is_over_each_runs_own_span(conn):
    """A lever on the same GPUs whose replay ends sooner (here 8 s instead of 10 s, the same 2
    GPUs throughout) does not change the bill per day: each run's fleet dollars are scaled by its
    own span. Scaled by the baseline's span, the shorter run read as -$34.56/day here (the demo's
    tp2-fp8 read -$3.69/day); the fixture's runs of equal span could not tell the two apart."""
    conn.execute("UPDATE request_stages SET finished_s = 10.0 WHERE request_id = 'a'")
    conn.execute("UPDATE scenario_fleets SET span_s = 8.0, idle_gpu_s = 2 * 8.0 - 5.5"
                 " WHERE scenario = 's'")
    _build_report_tables(conn)
    row = conn.sql("FROM what_if WHERE scenario = 's' AND shape = 'all'").pl().row(0, named=True)
    assert row["delta_fleet_usd"] == pytest.approx(0.016 - 0.020, abs=5e-7)
    assert row["delta_fleet_usd_per_day"] == 0.0


def test_what_if_worst_trace_deltas_are_each_traces_own(conn):
    """On 'all' rows the largest change of one trace's own p95 (one trace here: the pooled
    delta); the shape rows carry none."""
    rows = conn.sql("SELECT shape, delta_p95_ttft_s, worst_trace_delta_p95_ttft_s,"
                    " delta_p95_tpot_s, worst_trace_delta_p95_tpot_s FROM what_if"
                    " WHERE scenario = 's' ORDER BY rank").pl()
    assert rows["worst_trace_delta_p95_ttft_s"][0] == pytest.approx(rows["delta_p95_ttft_s"][0])
    assert rows["worst_trace_delta_p95_tpot_s"][0] == pytest.approx(rows["delta_p95_tpot_s"][0])
    assert rows["worst_trace_delta_p95_ttft_s"][1:].is_null().all()


def test_what_if_says_how_many_answers_a_scenario_truncates_and_its_assumed_prefix_share(conn):
    """An output cap cuts answers (a change of the product, not only of its cost) and a prefix
    cache share is an assumption: the what_if row says how many requests' answers the scenario
    shortened and what share of the baseline's output tokens, and the share it assumed, so the
    headline can say so when it names that lever."""
    conn.execute("UPDATE scenario_stages SET output_tokens = 50 WHERE request_id = 'a'")
    conn.execute("UPDATE scenario_fleets SET prefix_cache = '0.5' WHERE scenario = 's'")
    _build_report_tables(conn)
    rows = conn.sql("SELECT shape, truncated_requests, truncated_output_pct, prefix_cache"
                    " FROM what_if WHERE scenario = 's' ORDER BY rank").pl()
    expected = pl.DataFrame({
        "shape": ["all", "short prompt / medium answer", "long prompt / one-line answer"],
        "truncated_requests": [1, 1, 0], "truncated_output_pct": [100 * 150 / 201, 75.0, 0.0],
        "prefix_cache": ["0.5"] * 3})
    assert_frame_equal(rows, expected, check_dtypes=False, rel_tol=1e-9)


def test_what_if_of_a_scenario_that_changes_nothing_is_zero(conn):
    """A replay that changes nothing can still differ from the baseline in the last bits of its
    sums (here: one request's GPU-seconds two ULPs short); its Δ spend % is 0, as its dollar
    deltas are, and the report and summary tables print 0, not -3.2e-14 (nor -0)."""
    conn.execute("DELETE FROM scenario_stages")
    conn.execute("INSERT INTO scenario_stages BY NAME SELECT trace, 's' AS scenario,"
                 " 'd+s' AS deployment, request_id, ttft_s, tpot_s,"
                 " CASE WHEN request_id = 'a' THEN ? ELSE gpu_s END AS gpu_s"
                 " FROM request_stages", [math.nextafter(math.nextafter(10.0, 0.0), 0.0)])
    conn.execute("UPDATE scenario_fleets SET idle_gpu_s = 9.0 WHERE scenario = 's'")  # the baseline's
    run_sql(conn, "what_if")
    rows = conn.sql("FROM what_if WHERE scenario = 's' AND shape = 'all'").pl()
    assert rows["spend_usd"][0] != rows["baseline_usd"][0]   # the noise is there
    assert rows["delta_pct"].to_list() == [0.0] and rows["delta_usd"].to_list() == [0.0]
    # 0, not -0.0: the SQL shell prints "-0.0" and the headline said "changes by +$-0/day"
    deltas = ("delta_usd", "delta_pct", "delta_usd_per_day", "delta_fleet_usd", "delta_fleet_usd_per_day")
    assert [math.copysign(1.0, rows[c][0]) for c in deltas] == [1.0] * len(deltas)
    assert "| s | 0.011 | 0 | 0 |" in markdown_table(rows, WHAT_IF_COLUMNS).replace(
        f"| {rows['change'][0]} ", "")


def test_what_if_worst_trace_delta_is_one_traces_own_when_the_pooled_p95_improves(conn):
    """Two traces (two services): the scenario makes u's first tokens slower while t's get much
    faster, so the pooled p95 TTFT improves; worst_trace_delta_p95_ttft_s is u's own change,
    not the pooled one (with one trace the two were the same, and a test could not tell)."""
    conn.execute("INSERT INTO request_stages BY NAME SELECT 'u' AS trace, scenario, deployment,"
                 " 'u' || request_id AS request_id, arrival_s, prompt_tokens, output_tokens, queue_s,"
                 " prefill_s, decode_s, network_s, CASE request_id WHEN 'a' THEN 0.2 ELSE 0.3 END AS ttft_s,"
                 " tpot_s, e2e_s, preemptions, prefill_gpu_s, decode_gpu_s, gpu_s, compute_gpu_s,"
                 " finished_s, bound FROM request_stages WHERE trace = 't'")
    conn.execute("INSERT INTO fleet_timeline BY NAME SELECT 'u' AS trace, * EXCLUDE (trace)"
                 " FROM fleet_timeline WHERE trace = 't'")
    conn.execute("INSERT INTO requests BY NAME SELECT 'u' AS trace, 'u' || request_id AS request_id,"
                 " * EXCLUDE (trace, request_id) FROM requests WHERE trace = 't'")
    conn.execute("INSERT INTO scenario_stages BY NAME SELECT 'u' AS trace, scenario, deployment,"
                 " 'u' || request_id AS request_id, gpu_s,"
                 " CASE request_id WHEN 'a' THEN 0.4 ELSE 0.5 END AS ttft_s,"
                 " CASE WHEN tpot_s IS NOT NULL THEN 0.03 END AS tpot_s"
                 " FROM scenario_stages WHERE trace = 't'")
    conn.execute("INSERT INTO scenario_fleets BY NAME SELECT 'u' AS trace, * EXCLUDE (trace)"
                 " FROM scenario_fleets WHERE trace = 't'")
    _build_report_tables(conn)
    row = conn.sql("FROM what_if WHERE scenario = 's' AND shape = 'all'").pl().row(0, named=True)
    pooled = (0.5 + 0.85 * 0.5) - (0.3 + 0.85 * 1.25)   # p95 of 4 TTFTs: 1.3625 → 0.925 s
    assert row["delta_p95_ttft_s"] == pytest.approx(pooled) and pooled < 0
    assert row["worst_trace_delta_p95_ttft_s"] == pytest.approx((0.4 + 0.95 * 0.1) - (0.2 + 0.95 * 0.1))
    # t's answers stream faster (0.02 s a token), u's slower (0.03 s): the worst is u's
    assert row["worst_trace_delta_p95_tpot_s"] == pytest.approx(0.03 - 5.0 / 199)
    assert row["requests"] == 4 and conn.execute("SELECT count(*) FROM what_if WHERE scenario = 'k'").fetchone() == (1,)


def test_report_prices_are_the_baseline_deployments_price_row(conn):
    """The report's dollars are GPU-hours at the replayed deployment's price, its GPU's default
    where deployments.csv names no plan; sql/report_prices.sql gives that row to say, with the
    traces replayed on it."""
    assert run_sql(conn, "report_prices").fetchall() == [("d", "p", "on-demand", PRICE, "t", 1)]
