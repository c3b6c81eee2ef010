-- Which request shapes own the spend, and which stage dominates each? `lever` cuts the stage
-- that dominates latency, `cost_lever` the one that dominates dollars.
SELECT rank, shape, round(pct_spend, 1) AS pct_spend, round(cum_pct_spend, 1) AS cum_pct,
       round(spend_usd, 2) AS usd, dominant_stage, lever, cost_stage, cost_lever, bound
FROM shape_spend
ORDER BY rank
LIMIT 10;
