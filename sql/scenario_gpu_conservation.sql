-- Cost conservation per what-if fleet (trace x scenario), as gpu_conservation for the baseline:
-- GPU-seconds attributed to the scenario's requests plus its fleet's idle GPU-seconds must equal
-- replicas x GPUs per replica x the span it replayed. The idle seconds feed the what-if's fleet
-- dollars (what_if.delta_fleet_usd). A replayed scenario_fleets row without stages, or stages
-- without a fleet row, is kept with a NULL relative_error, which the check fails on; a skipped
-- scenario has neither.
CREATE OR REPLACE VIEW scenario_gpu_conservation AS
WITH attributed AS (
    SELECT trace, scenario, sum(gpu_s) AS attributed_gpu_s, max(finished_s) AS span_s
    FROM scenario_stages GROUP BY ALL
),
fleets AS (
    SELECT trace, scenario, replicas * gpus_per_replica AS gpus, idle_gpu_s
    FROM scenario_fleets WHERE skipped IS NULL
)
SELECT
    trace,
    scenario,
    a.attributed_gpu_s,
    f.idle_gpu_s,
    f.gpus * a.span_s AS capacity_gpu_s,
    (a.attributed_gpu_s + f.idle_gpu_s) / (f.gpus * a.span_s) - 1 AS relative_error
FROM attributed AS a
FULL JOIN fleets AS f USING (trace, scenario);
