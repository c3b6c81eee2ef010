-- request_stages joined with the price book: dollars per stage and in total for every request.
-- Queue and network time hold no GPU, so they cost nothing here; idle GPU time is priced in
-- fleet_summary.
CREATE OR REPLACE TABLE request_costs AS
SELECT
    s.*,
    dp.usd_per_gpu_hour,
    s.prefill_gpu_s * dp.usd_per_gpu_hour / 3600 AS prefill_usd,
    s.decode_gpu_s * dp.usd_per_gpu_hour / 3600 AS decode_usd,
    s.gpu_s * dp.usd_per_gpu_hour / 3600 AS total_usd
FROM request_stages AS s
JOIN deployment_prices AS dp USING (deployment);
