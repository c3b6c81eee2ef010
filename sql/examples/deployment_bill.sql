-- What each deployment of the fleet costs, per trace and in all (trace = 'all'): requests,
-- GPU-hours busy and idle, dollars at the deployment's own price, its share of the fleet's bill
-- and dollars per 1M output tokens, idle GPUs included. A fleet of several deployments (logs
-- whose sidecars name the one that served them) gets a block each: its traces' fleet_summary
-- rows, then its deployment_summary row.
WITH lines AS (
    SELECT ds.deployment, fs.trace, fs.requests, fs.gpu_hours, fs.idle_share, fs.attributed_usd,
           fs.idle_usd, fs.spend_usd, fs.usd_per_1m_output_tokens
    FROM (SELECT deployment, unnest(trace_names) AS trace FROM deployment_summary) AS ds
    JOIN fleet_summary AS fs USING (trace)
    UNION ALL
    SELECT deployment, 'all', requests, gpu_hours, idle_share, attributed_usd, idle_usd,
           spend_usd, usd_per_1m_output_tokens
    FROM deployment_summary
)
SELECT deployment, trace, requests,
       round(gpu_hours * (1 - idle_share), 3) AS busy_gpu_hours,
       round(gpu_hours * idle_share, 3) AS idle_gpu_hours,
       round(attributed_usd, 2) AS busy_usd,
       round(idle_usd, 2) AS idle_usd,
       round(spend_usd, 2) AS usd,
       round(100 * spend_usd / (SELECT spend_usd FROM fleet_summary WHERE trace = 'all'), 1)
           AS pct_of_bill,
       round(usd_per_1m_output_tokens, 2) AS usd_per_1m_output_tokens
FROM lines
ORDER BY deployment, trace = 'all', usd DESC;
