-- The most expensive requests, and why: their shape, the stage that held most of their time,
-- how their dollars split between prefill and decode, and the resource that bound their GPU time.
SELECT request_id, shape, prompt_tokens, output_tokens,
       round(total_usd, 4) AS usd,
       round(100 * decode_usd / total_usd, 1) AS decode_pct_usd,
       round(queue_s, 2) AS queue_s, round(prefill_s, 2) AS prefill_s, round(decode_s, 2) AS decode_s,
       round(e2e_s, 2) AS e2e_s,
       CASE greatest(queue_s, prefill_s, decode_s, network_s)
           WHEN decode_s THEN 'decode' WHEN prefill_s THEN 'prefill'
           WHEN queue_s THEN 'queue' ELSE 'network' END AS dominant_stage,
       bound, preemptions
FROM request_shapes
ORDER BY total_usd DESC
LIMIT 10;
