-- A day's TTFT (and TPOT) percentiles, hour by hour (UTC) and per trace: the first day in the
-- requests table; set another date (a UTC day) on the next line. Days and hours are taken from
-- arrival_ts in UTC (AT TIME ZONE 'UTC'), whatever the session's TimeZone setting. A trace with
-- a relative clock and no start_time (Mooncake, BurstGPT, ...) has no arrival_ts and is left out:
-- group floor(s.arrival_s / 3600) for its hours since its first request.
SET VARIABLE day = (SELECT min(arrival_ts AT TIME ZONE 'UTC')::DATE FROM requests);
SELECT r.trace,
       date_trunc('hour', r.arrival_ts AT TIME ZONE 'UTC') AS hour_utc,
       count(*) AS requests,
       round(quantile_cont(s.ttft_s, 0.50), 3) AS p50_ttft_s,
       round(quantile_cont(s.ttft_s, 0.95), 3) AS p95_ttft_s,
       round(quantile_cont(s.ttft_s, 0.99), 3) AS p99_ttft_s,
       round(1000 * quantile_cont(s.tpot_s, 0.95), 1) AS p95_tpot_ms
FROM request_stages AS s
JOIN requests AS r USING (trace, request_id)
WHERE s.scenario = 'baseline' AND (r.arrival_ts AT TIME ZONE 'UTC')::DATE = getvariable('day')
GROUP BY ALL
ORDER BY r.trace, hour_utc;
