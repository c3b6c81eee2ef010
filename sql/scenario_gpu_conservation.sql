-- Cost conservation per what-if fleet (trace x scenario), as gpu_conservation for the baseline:
-- GPU-seconds attributed to the scenario's requests plus its fleet's idle GPU-seconds must equal
-- replicas x GPUs per replica x the span it replayed. The idle seconds feed the what-if's fleet
-- dollars (what_if.delta_fleet_usd). A replayed scenario_fleets row without stages, or stages
-- without a fleet row, is kept with a NULL relative_error, which the check fails on; a skipped
-- scenario has neither.
--
-- The attributed seconds must also equal the fleet's busy GPU-seconds (scenario_fleets.busy_gpu_s,
-- the steps' durations its timeline summed apart from the requests' shares), measured against
-- the busy seconds (busy_relative_error): on a mostly idle fleet, a week of capacity and a minute
-- busy, an attribution error is a vanishing share of the capacity. A what-if keeps no timeline
-- per replica, so this balances the fleet (replica_gpu_balance does the baseline's replicas).
-- busy_resolution is replica_gpu_balance's, the replay's clock alone: span x 2^-52 / the
-- deployment's batch-1 decode step (scenario_fleets.decode_step_s_batch1_ctx1k, the figure the
-- baseline reads from roofline, which has no row for a what-if deployment); summed over the
-- replicas, each off by at most that share of its own busy seconds, the fleet is too.
CREATE OR REPLACE VIEW scenario_gpu_conservation AS
WITH attributed AS (
    SELECT trace, scenario, sum(gpu_s) AS attributed_gpu_s, max(finished_s) AS span_s
    FROM scenario_stages GROUP BY ALL
),
fleets AS (
    SELECT trace, scenario, replicas * gpus_per_replica AS gpus, idle_gpu_s, busy_gpu_s,
           decode_step_s_batch1_ctx1k
    FROM scenario_fleets WHERE skipped IS NULL
),
balance AS (
    SELECT trace, scenario, a.attributed_gpu_s, f.idle_gpu_s, f.gpus * a.span_s AS capacity_gpu_s,
           f.busy_gpu_s, a.span_s, f.decode_step_s_batch1_ctx1k
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
    span_s * pow(2, -52) / decode_step_s_batch1_ctx1k AS busy_resolution
FROM balance
ORDER BY trace, scenario;
