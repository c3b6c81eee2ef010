-- The most expensive requests, and why: their shape, stages and the resource that bound them.
SELECT request_id, prompt_tokens, output_tokens,
       round(total_usd, 4) AS usd, round(prefill_usd, 4) AS prefill_usd, round(decode_usd, 4) AS decode_usd,
       round(queue_s, 2) AS queue_s, round(e2e_s, 2) AS e2e_s, bound, preemptions
FROM request_costs
WHERE scenario = 'baseline'
ORDER BY total_usd DESC
LIMIT 10;
