-- The price of each deployment the baseline replay ran on (deployment_prices: the provider and
-- plan of its roofline row, which is its GPU's default price where deployments.csv names none),
-- with the traces replayed on it (deployment_summary: their names, comma-separated, and how
-- many: a name may hold a comma itself): every dollar figure of the report is GPU-hours at this
-- price, so the report says which it is, and on a fleet of several deployments which trace is on
-- which.
SELECT dp.deployment, dp.provider, dp.plan, dp.usd_per_gpu_hour,
       array_to_string(ds.trace_names, ', ') AS trace_names, ds.traces
FROM deployment_prices AS dp
JOIN deployment_summary AS ds USING (deployment)
ORDER BY dp.deployment
