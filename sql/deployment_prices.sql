-- $ per GPU-hour of every catalog deployment, replayed or not (roofline has a row for each):
-- roofline names its GPU and price plan.
CREATE OR REPLACE VIEW deployment_prices AS
SELECT
    r.deployment,
    r.gpu,
    r.gpus_per_replica,
    r.replicas,
    p.provider,
    p.plan,
    p.usd_per_gpu_hour
FROM roofline AS r
JOIN prices AS p
  ON p.gpu = r.gpu AND p.provider = r.price_provider AND p.plan = r.price_plan
ORDER BY r.deployment;
