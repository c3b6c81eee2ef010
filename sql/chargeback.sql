-- Chargeback: attributed GPU spend by model and by tenant (dimension = 'model' or 'tenant'),
-- baseline scenario. Requests whose log names no model or tenant are left out of that dimension,
-- so a trace without them yields no rows (pct_spend stays a share of all attributed spend).
CREATE OR REPLACE TABLE chargeback AS
WITH costed AS (
    SELECT c.*, r.model, r.tenant
    FROM request_costs AS c
    JOIN requests AS r USING (trace, request_id)
    WHERE c.scenario = 'baseline'
),
grouped AS (
    SELECT
        CASE WHEN grouping(model) = 0 THEN 'model' ELSE 'tenant' END AS dimension,
        CASE WHEN grouping(model) = 0 THEN model ELSE tenant END AS value,
        count(*) AS requests,
        sum(prompt_tokens)::BIGINT AS prompt_tokens,
        sum(output_tokens)::BIGINT AS output_tokens,
        sum(gpu_s) / 3600 AS gpu_hours,
        sum(total_usd) AS spend_usd,
        quantile_cont(ttft_s, 0.5) AS p50_ttft_s,
        quantile_cont(ttft_s, 0.95) AS p95_ttft_s,
        quantile_cont(tpot_s, 0.95) AS p95_tpot_s
    FROM costed
    GROUP BY GROUPING SETS ((model), (tenant))
)
SELECT
    dimension,
    value,
    requests,
    prompt_tokens,
    output_tokens,
    gpu_hours,
    spend_usd,
    100 * spend_usd / (SELECT sum(total_usd) FROM costed) AS pct_spend,
    1e6 * spend_usd / output_tokens AS usd_per_1m_output_tokens,
    p50_ttft_s,
    p95_ttft_s,
    p95_tpot_s
FROM grouped
WHERE value IS NOT NULL
ORDER BY dimension, spend_usd DESC, value;
