-- Busy GPU-seconds per replica of each replayed fleet (trace x scenario x replica): the
-- GPU-seconds attributed to the replica's requests (request_stages.gpu_s, each request's shares of
-- the steps it rode) must equal its busy GPU-seconds (fleet_timeline.busy_gpu_s, the steps'
-- durations), which the replay sums apart. busy_relative_error is of the replica's busy seconds,
-- not of the fleet's capacity (gpu_conservation): on a mostly idle fleet, a week of capacity and a
-- minute busy, an attribution error is a vanishing share of the capacity, and over a fleet one
-- replica's error can cancel another's. A replica with neither requests nor busy time balances;
-- one with requests and no busy time has an infinite error, one busy without requests -1.
--
-- busy_resolution: the relative error the replay's clock alone can leave. The timeline records a
-- step of d seconds started at t as (t + d) - t, off by up to half an ulp of its end, at most
-- 2^-53 x span, while the requests' shares sum to d itself. Every step lasts at least half a
-- batch-1 decode step (roofline.decode_step_s_batch1_ctx1k: the shortest step of any catalog
-- model on any GPU is 0.93 of it or more, each step reading the weights), so a replica busy b
-- seconds ran at most 2b / that many steps, off by at most b x span x 2^-52 / that (the adds
-- into a bin's running total can double that, within the factor of 2 the half leaves). Over a
-- week that is ~1e-8 of b, over a year ~1e-6; a year-long replay of a few one-token requests is
-- off by a seventh of it, ~1e-7, which a bound of a billionth would stop.
CREATE OR REPLACE VIEW replica_gpu_balance AS
WITH attributed AS (
    SELECT trace, scenario, replica, sum(gpu_s) AS attributed_gpu_s FROM request_stages GROUP BY ALL
),
busy AS (
    SELECT trace, scenario, replica, sum(busy_gpu_s) AS busy_gpu_s FROM fleet_timeline GROUP BY ALL
),
fleets AS (
    SELECT trace, scenario, any_value(deployment) AS deployment, max(finished_s) AS span_s
    FROM request_stages GROUP BY ALL
),
balance AS (
    SELECT trace, scenario, replica, coalesce(a.attributed_gpu_s, 0) AS attributed_gpu_s,
           coalesce(b.busy_gpu_s, 0) AS busy_gpu_s
    FROM attributed AS a FULL JOIN busy AS b USING (trace, scenario, replica)
)
SELECT
    trace,
    scenario,
    replica,
    attributed_gpu_s,
    busy_gpu_s,
    CASE WHEN busy_gpu_s <> 0 THEN attributed_gpu_s / busy_gpu_s - 1
         WHEN attributed_gpu_s = 0 THEN 0
         ELSE 'inf'::DOUBLE END AS busy_relative_error,
    f.span_s * pow(2, -52) / r.decode_step_s_batch1_ctx1k AS busy_resolution
FROM balance
LEFT JOIN fleets AS f USING (trace, scenario)
LEFT JOIN roofline AS r USING (deployment)
-- a row per replica in a fixed order: the join's hash order differed from run to run, and a run
-- of the same input must give the same tables (tests/operations/test_idempotency.py)
ORDER BY trace, scenario, replica;
