-- Where the time and the money go, by stage: overall (shape = 'all', rank 0) and per request
-- shape (rank as in shape_spend), baseline scenario. One row per shape and stage; within a shape
-- pct_latency, pct_gpu_time and pct_spend each sum to 100. Queue and network hold no GPU.
CREATE OR REPLACE TABLE stage_breakdown AS
WITH per_shape AS (
    SELECT
        CASE WHEN grouping(shape) = 1 THEN 'all' ELSE shape END AS shape,
        sum(queue_s) AS queue_s,
        sum(prefill_s) AS prefill_s,
        sum(decode_s) AS decode_s,
        sum(network_s) AS network_s,
        sum(prefill_gpu_s) AS prefill_gpu_s,
        sum(decode_gpu_s) AS decode_gpu_s,
        sum(prefill_usd) AS prefill_usd,
        sum(decode_usd) AS decode_usd
    FROM request_shapes
    GROUP BY GROUPING SETS ((shape), ())
),
stages AS (
    SELECT
        p.shape,
        st.stage_order,
        st.stage,
        CASE st.stage WHEN 'queue' THEN p.queue_s WHEN 'prefill' THEN p.prefill_s
                      WHEN 'decode' THEN p.decode_s ELSE p.network_s END AS latency_s,
        CASE st.stage WHEN 'prefill' THEN p.prefill_gpu_s WHEN 'decode' THEN p.decode_gpu_s
                      ELSE 0.0 END AS gpu_s,
        CASE st.stage WHEN 'prefill' THEN p.prefill_usd WHEN 'decode' THEN p.decode_usd
                      ELSE 0.0 END AS spend_usd
    FROM per_shape AS p
    CROSS JOIN (VALUES (1, 'queue'), (2, 'prefill'), (3, 'decode'), (4, 'network')) AS st(stage_order, stage)
)
SELECT
    coalesce(ss.rank, 0) AS rank,
    s.shape,
    s.stage_order,
    s.stage,
    s.latency_s,
    100 * s.latency_s / sum(s.latency_s) OVER (PARTITION BY s.shape) AS pct_latency,
    s.gpu_s / 3600 AS gpu_hours,
    100 * s.gpu_s / sum(s.gpu_s) OVER (PARTITION BY s.shape) AS pct_gpu_time,
    s.spend_usd,
    100 * s.spend_usd / sum(s.spend_usd) OVER (PARTITION BY s.shape) AS pct_spend
FROM stages AS s
LEFT JOIN shape_spend AS ss USING (shape)
ORDER BY rank, s.stage_order;
