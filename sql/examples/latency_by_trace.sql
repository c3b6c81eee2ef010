-- TTFT and TPOT percentiles per trace, and where the end-to-end time goes; `deployment` is the
-- one the trace replayed on (its log's sidecar's on a fleet of several, else the run's).
SELECT trace,
       any_value(deployment) AS deployment,
       count(*) AS requests,
       round(quantile_cont(ttft_s, 0.5), 3) AS p50_ttft_s,
       round(quantile_cont(ttft_s, 0.95), 3) AS p95_ttft_s,
       round(1000 * quantile_cont(tpot_s, 0.5), 1) AS p50_tpot_ms,
       round(100 * sum(queue_s) / sum(e2e_s), 1) AS queue_pct,
       round(100 * sum(prefill_s) / sum(e2e_s), 1) AS prefill_pct,
       round(100 * sum(decode_s) / sum(e2e_s), 1) AS decode_pct,
       round(100 * sum(network_s) / sum(e2e_s), 1) AS network_pct
FROM request_stages
WHERE scenario = 'baseline'
GROUP BY trace
ORDER BY trace;
