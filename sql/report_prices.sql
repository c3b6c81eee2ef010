-- The price of each deployment the baseline replay ran on (deployment_prices: the provider and
-- plan of its roofline row, which is its GPU's default price where deployments.csv names none):
-- every dollar figure of the report is GPU-hours at this price, so the report says which it is.
SELECT deployment, provider, plan, usd_per_gpu_hour
FROM deployment_prices
WHERE deployment IN (SELECT DISTINCT deployment FROM request_stages WHERE scenario = 'baseline')
ORDER BY deployment
