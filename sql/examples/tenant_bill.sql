-- One tenant's bill: its requests, tokens and attributed GPU dollars, by request shape.
-- The Azure samples name no tenant, so a request's tenant falls back to its trace (one service
-- per trace). Set the tenant to bill on the next line.
SET VARIABLE tenant = 'AzureLLMInferenceTrace_conv';
SELECT s.shape,
       count(*) AS requests,
       sum(s.prompt_tokens)::BIGINT AS prompt_tokens,
       sum(s.output_tokens)::BIGINT AS output_tokens,
       round(sum(s.total_usd), 2) AS usd,
       round(100 * sum(s.total_usd) / sum(sum(s.total_usd)) OVER (), 1) AS pct_of_bill,
       round(1e6 * sum(s.total_usd) / sum(s.output_tokens), 2) AS usd_per_1m_output_tokens
FROM request_shapes AS s
JOIN requests AS r USING (trace, request_id)
WHERE coalesce(r.tenant, r.trace) = getvariable('tenant')
GROUP BY s.shape
ORDER BY usd DESC;
