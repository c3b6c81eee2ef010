-- The fleet's totals per trace and for all traces together (trace = 'all'), baseline scenario:
-- spend = GPU-seconds attributed to requests + idle GPU-seconds, both priced;
-- mean_batch = sequences per step while a replica is running (idle time excluded), beside the
-- deployment's max_seqs (a step's limit) and peak_kv_use (the fullest replica-bin's mean share of
-- its KV cache holding tokens): busy GPUs are not full GPUs;
-- span_s = the replayed span, trace start to the last token (all: the longest trace's), the
-- period the spend and GPU-hours are over.
CREATE OR REPLACE TABLE fleet_summary AS
WITH req AS (
    SELECT
        CASE WHEN grouping(trace) = 1 THEN 'all' ELSE trace END AS trace,
        grouping(trace) AS is_total,
        count(*) AS requests,
        sum(prompt_tokens)::BIGINT AS prompt_tokens,
        sum(output_tokens)::BIGINT AS output_tokens,
        sum(gpu_s) AS attributed_gpu_s,
        sum(total_usd) AS attributed_usd,
        sum(preemptions)::BIGINT AS preemptions,
        quantile_cont(queue_s, 0.95) AS p95_queue_s,
        quantile_cont(ttft_s, 0.5) AS p50_ttft_s,
        quantile_cont(ttft_s, 0.95) AS p95_ttft_s,
        quantile_cont(tpot_s, 0.5) AS p50_tpot_s,
        quantile_cont(tpot_s, 0.95) AS p95_tpot_s,
        quantile_cont(e2e_s, 0.5) AS p50_e2e_s,
        quantile_cont(e2e_s, 0.95) AS p95_e2e_s
    FROM request_costs
    WHERE scenario = 'baseline'
    GROUP BY GROUPING SETS ((trace), ())
),
fleet AS (
    SELECT
        CASE WHEN grouping(t.trace) = 1 THEN 'all' ELSE t.trace END AS trace,
        grouping(t.trace) AS is_total,
        sum(t.idle_gpu_s) AS idle_gpu_s,
        sum(t.idle_gpu_s * dp.usd_per_gpu_hour / 3600) AS idle_usd,
        sum(t.mean_batch * t.bin_s) / nullif(sum(t.busy_share * t.bin_s), 0) AS mean_batch,
        -- null on an `all` row over deployments of different limits: no one limit to compare with
        CASE WHEN min(r.max_seqs) = max(r.max_seqs) THEN max(r.max_seqs) END AS max_seqs,
        max(t.mean_kv_use) AS peak_kv_use,
        sum(t.bin_s) / 3600 AS replica_hours,
        max(t.bin_start_s + t.bin_s) AS span_s
    FROM fleet_timeline AS t
    JOIN deployment_prices AS dp USING (deployment)
    JOIN roofline AS r USING (deployment)
    WHERE t.scenario = 'baseline'
    GROUP BY GROUPING SETS ((t.trace), ())
)
SELECT
    req.trace,
    req.requests,
    req.prompt_tokens,
    req.output_tokens,
    fleet.span_s,
    fleet.replica_hours,
    (req.attributed_gpu_s + fleet.idle_gpu_s) / 3600 AS gpu_hours,
    req.attributed_usd + fleet.idle_usd AS spend_usd,
    req.attributed_usd,
    fleet.idle_usd,
    fleet.idle_gpu_s / (req.attributed_gpu_s + fleet.idle_gpu_s) AS idle_share,
    fleet.mean_batch,
    fleet.max_seqs,
    fleet.peak_kv_use,
    1e6 * (req.attributed_usd + fleet.idle_usd) / req.output_tokens AS usd_per_1m_output_tokens,
    req.preemptions,
    req.p95_queue_s,
    req.p50_ttft_s, req.p95_ttft_s,
    req.p50_tpot_s, req.p95_tpot_s,
    req.p50_e2e_s, req.p95_e2e_s
FROM req
JOIN fleet USING (trace, is_total)
ORDER BY req.is_total, req.trace;
