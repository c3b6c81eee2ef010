-- The fleet's totals per deployment the baseline replayed on (a fleet of several: each log on
-- the one its sidecar names, else the run's), at that deployment's price: its traces'
-- fleet_summary rows added up, each trace on the deployment fleet_timeline replayed it on. Built
-- from fleet_summary, not from request_costs and fleet_timeline again, so that busy and idle
-- are counted one way only and the deployments' rows add up to fleet_summary's `all` row.
-- idle_share is of GPU time, as fleet_summary's (at one price, also the share of dollars).
CREATE OR REPLACE TABLE deployment_summary AS
WITH trace_deployment AS (
    SELECT DISTINCT trace, deployment FROM fleet_timeline WHERE scenario = 'baseline'
)
SELECT
    td.deployment,
    count(*) AS traces,
    list(fs.trace ORDER BY fs.trace) AS trace_names,
    sum(fs.requests)::BIGINT AS requests,
    sum(fs.output_tokens)::BIGINT AS output_tokens,
    sum(fs.gpu_hours) AS gpu_hours,
    sum(fs.spend_usd) AS spend_usd,
    sum(fs.attributed_usd) AS attributed_usd,
    sum(fs.idle_usd) AS idle_usd,
    sum(fs.idle_share * fs.gpu_hours) / sum(fs.gpu_hours) AS idle_share,
    1e6 * sum(fs.spend_usd) / sum(fs.output_tokens) AS usd_per_1m_output_tokens,
    dp.usd_per_gpu_hour
FROM fleet_summary AS fs
JOIN trace_deployment AS td USING (trace)
JOIN deployment_prices AS dp USING (deployment)
GROUP BY td.deployment, dp.usd_per_gpu_hour
ORDER BY td.deployment;
