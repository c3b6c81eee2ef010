-- Request shapes ranked by their share of the fleet's attributed GPU spend (baseline scenario).
-- dominant_stage: the stage holding most of the shape's summed latency;
-- cost_stage: prefill or decode, whichever holds more of its dollars;
-- bound: the resource (compute or memory) that bound most of its GPU-seconds;
-- lever: what cuts the dominant stage (the source chapter's levers): decode -> batching,
-- speculative decoding, lower precision, KV-cache compression; prefill -> prompt/prefix caching,
-- context trimming; queue -> more replicas or scheduling; network -> streaming and placement;
-- cost_lever: the same for the cost stage (what cuts the shape's dollars).
-- Queue and network hold no GPU, so GPU time splits into prefill and decode only.
CREATE OR REPLACE TABLE shape_spend AS
WITH per_shape AS (
    SELECT
        shape,
        any_value(prompt_bucket) AS prompt_bucket,
        any_value(output_bucket) AS output_bucket,
        any_value(prompt_lower) AS prompt_lower,
        any_value(output_lower) AS output_lower,
        count(*) AS requests,
        sum(prompt_tokens)::BIGINT AS prompt_tokens,
        sum(output_tokens)::BIGINT AS output_tokens,
        sum(gpu_s) / 3600 AS gpu_hours,
        sum(total_usd) AS spend_usd,
        sum(prefill_usd) AS prefill_usd,
        sum(decode_usd) AS decode_usd,
        sum(prefill_gpu_s) AS prefill_gpu_s,
        sum(decode_gpu_s) AS decode_gpu_s,
        sum(compute_gpu_s) AS compute_bound_gpu_s,
        sum(gpu_s) AS gpu_s,
        sum(queue_s) AS queue_s,
        sum(prefill_s) AS prefill_s,
        sum(decode_s) AS decode_s,
        sum(network_s) AS network_s,
        quantile_cont(ttft_s, 0.5) AS p50_ttft_s,
        quantile_cont(ttft_s, 0.95) AS p95_ttft_s,
        quantile_cont(tpot_s, 0.5) AS p50_tpot_s,
        quantile_cont(tpot_s, 0.95) AS p95_tpot_s,
        quantile_cont(e2e_s, 0.5) AS p50_e2e_s,
        quantile_cont(e2e_s, 0.95) AS p95_e2e_s
    FROM request_shapes
    GROUP BY shape
),
latency AS (
    SELECT
        *,
        queue_s + prefill_s + decode_s + network_s AS latency_s,
        CASE greatest(queue_s, prefill_s, decode_s, network_s)
            WHEN decode_s THEN 'decode'
            WHEN prefill_s THEN 'prefill'
            WHEN queue_s THEN 'queue'
            ELSE 'network'
        END AS dominant_stage,
        CASE WHEN decode_usd >= prefill_usd THEN 'decode' ELSE 'prefill' END AS cost_stage
    FROM per_shape
),
levers(stage, lever) AS (
    VALUES ('decode', 'batching, speculative decoding, lower precision, KV-cache compression'),
           ('prefill', 'prompt/prefix caching, context trimming'),
           ('queue', 'more replicas or scheduling'),
           ('network', 'streaming and placement')
),
ranked AS (
    SELECT
        *,
        row_number() OVER (ORDER BY spend_usd DESC, shape) AS rank,
        100 * requests / sum(requests) OVER () AS pct_requests,
        100 * spend_usd / sum(spend_usd) OVER () AS pct_spend
    FROM latency
)
SELECT
    rank,
    shape,
    prompt_bucket,
    output_bucket,
    requests,
    pct_requests,
    prompt_tokens,
    output_tokens,
    gpu_hours,
    spend_usd,
    pct_spend,
    sum(pct_spend) OVER (ORDER BY rank) AS cum_pct_spend,
    spend_usd / requests AS usd_per_request,
    1e6 * spend_usd / output_tokens AS usd_per_1m_output_tokens,
    p50_ttft_s, p95_ttft_s, p50_tpot_s, p95_tpot_s, p50_e2e_s, p95_e2e_s,
    100 * queue_s / latency_s AS queue_pct_latency,
    100 * prefill_s / latency_s AS prefill_pct_latency,
    100 * decode_s / latency_s AS decode_pct_latency,
    100 * network_s / latency_s AS network_pct_latency,
    100 * prefill_usd / spend_usd AS prefill_pct_spend,
    100 * decode_usd / spend_usd AS decode_pct_spend,
    100 * prefill_gpu_s / gpu_s AS prefill_pct_gpu_time,
    100 * decode_gpu_s / gpu_s AS decode_pct_gpu_time,
    dominant_stage,
    dl.lever,
    cost_stage,
    cl.lever AS cost_lever,
    CASE WHEN compute_bound_gpu_s * 2 >= gpu_s THEN 'compute' ELSE 'memory' END AS bound,
    prompt_lower,
    output_lower
FROM ranked
JOIN levers AS dl ON dl.stage = ranked.dominant_stage
JOIN levers AS cl ON cl.stage = ranked.cost_stage
ORDER BY rank;
