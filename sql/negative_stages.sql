-- Replayed requests with an impossible stage: a negative duration or GPU time, or no end-to-end
-- time. The no_negative_stage check expects none.
CREATE OR REPLACE VIEW negative_stages AS
SELECT *
FROM request_stages
WHERE least(queue_s, prefill_s, decode_s, network_s, prefill_gpu_s, decode_gpu_s) < 0 OR e2e_s IS NULL;
