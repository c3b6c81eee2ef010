-- Cost conservation per what-if fleet (trace x scenario), as gpu_conservation for the baseline:
-- GPU-seconds attributed to the scenario's requests plus its fleet's idle GPU-seconds must equal
-- replicas x GPUs per replica x the span it replayed. The idle seconds feed the what-if's fleet
-- dollars (what_if.delta_fleet_usd). A replayed scenario_fleets row without stages, or stages
-- without a fleet row, is kept with a NULL relative_error, which the check fails on; a skipped
-- scenario has neither.
--
-- The same identity is attributed = busy (capacity less idle), measured against the busy seconds
-- too (busy_relative_error): on a mostly idle fleet, a week of capacity and a minute busy, an
-- attribution error is a vanishing share of the capacity; a what-if keeps no timeline per replica
-- to balance each (replica_gpu_balance does the baseline's). busy_resolution is what the
-- arithmetic alone can leave of it: the replay's clock, span x 2^-52 / the shortest step, as in
-- replica_gpu_balance, taking 1e-4 s for that step, as a what-if deployment has no roofline row
-- (the shortest step of any scenarios.csv row on any catalog deployment is 1.9 ms, and the
-- shortest catalog.build makes of any model on any GPU 0.25 ms: Llama-3.2-1B at batch 1, fp4, on
-- a B200, with no step overhead, as deployments.csv allows),
-- and the subtraction, a few dozen ulps of the capacity (its product and the sum of the bins' idle
-- seconds): 2^-48 of it.
CREATE OR REPLACE VIEW scenario_gpu_conservation AS
WITH attributed AS (
    SELECT trace, scenario, sum(gpu_s) AS attributed_gpu_s, max(finished_s) AS span_s
    FROM scenario_stages GROUP BY ALL
),
fleets AS (
    SELECT trace, scenario, replicas * gpus_per_replica AS gpus, idle_gpu_s
    FROM scenario_fleets WHERE skipped IS NULL
),
balance AS (
    SELECT trace, scenario, a.attributed_gpu_s, f.idle_gpu_s, f.gpus * a.span_s AS capacity_gpu_s,
           f.gpus * a.span_s - f.idle_gpu_s AS busy_gpu_s, a.span_s
    FROM attributed AS a
    FULL JOIN fleets AS f USING (trace, scenario)
)
SELECT
    trace,
    scenario,
    attributed_gpu_s,
    idle_gpu_s,
    capacity_gpu_s,
    (attributed_gpu_s + idle_gpu_s) / capacity_gpu_s - 1 AS relative_error,
    busy_gpu_s,
    CASE WHEN busy_gpu_s <> 0 THEN attributed_gpu_s / busy_gpu_s - 1
         WHEN busy_gpu_s = 0 THEN CASE WHEN attributed_gpu_s = 0 THEN 0 ELSE 'inf'::DOUBLE END
    END AS busy_relative_error,
    span_s * pow(2, -52) / 1e-4
        + CASE WHEN busy_gpu_s <> 0 THEN capacity_gpu_s * pow(2, -48) / abs(busy_gpu_s) ELSE 0 END
        AS busy_resolution
FROM balance;
