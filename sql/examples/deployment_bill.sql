-- What each deployment of the fleet costs, per trace and in all (trace = 'all'): requests,
-- GPU-hours busy and idle, dollars at the deployment's own price (deployment_prices), its share
-- of the fleet's bill and dollars per 1M output tokens, idle GPUs included. A fleet of several
-- deployments (logs whose sidecars name the one that served them) gets a block each.
WITH busy AS (
    SELECT deployment, trace, count(*) AS requests, sum(output_tokens)::BIGINT AS output_tokens,
           sum(gpu_s) AS busy_gpu_s, sum(total_usd) AS busy_usd
    FROM request_costs
    WHERE scenario = 'baseline'
    GROUP BY deployment, trace
),
idle AS (
    SELECT t.deployment, t.trace, sum(t.idle_gpu_s) AS idle_gpu_s,
           sum(t.idle_gpu_s * dp.usd_per_gpu_hour / 3600) AS idle_usd
    FROM fleet_timeline AS t
    JOIN deployment_prices AS dp USING (deployment)
    WHERE t.scenario = 'baseline'
    GROUP BY t.deployment, t.trace
),
per_trace AS (
    SELECT deployment,
           CASE WHEN grouping(trace) = 1 THEN 'all' ELSE trace END AS trace,
           sum(requests)::BIGINT AS requests,
           sum(output_tokens)::BIGINT AS output_tokens,
           sum(busy_gpu_s) / 3600 AS busy_gpu_hours,
           sum(idle_gpu_s) / 3600 AS idle_gpu_hours,
           sum(busy_usd) AS busy_usd,
           sum(idle_usd) AS idle_usd
    FROM busy JOIN idle USING (deployment, trace)
    GROUP BY GROUPING SETS ((deployment, trace), (deployment))
)
SELECT deployment, trace, requests,
       round(busy_gpu_hours, 3) AS busy_gpu_hours,
       round(idle_gpu_hours, 3) AS idle_gpu_hours,
       round(busy_usd, 2) AS busy_usd,
       round(idle_usd, 2) AS idle_usd,
       round(busy_usd + idle_usd, 2) AS usd,
       round(100 * (busy_usd + idle_usd)
             / sum(CASE WHEN trace = 'all' THEN busy_usd + idle_usd END) OVER (), 1) AS pct_of_bill,
       round(1e6 * (busy_usd + idle_usd) / output_tokens, 2) AS usd_per_1m_output_tokens
FROM per_trace
ORDER BY deployment, trace = 'all', usd DESC;
