-- Which request shapes own the spend, and which stage dominates each?
SELECT rank, shape, round(pct_spend, 1) AS pct_spend, round(cum_pct_spend, 1) AS cum_pct,
       round(spend_usd, 2) AS usd, dominant_stage, cost_stage, bound, lever
FROM shape_spend
ORDER BY rank
LIMIT 10;
