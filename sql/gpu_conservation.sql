-- Cost conservation per replayed fleet (trace x scenario): GPU-seconds attributed to requests
-- plus idle GPU-seconds must equal replicas x GPUs per replica x replayed span. A fleet with
-- stages but no fleet_timeline rows, or whose deployment is not in roofline, is kept with a NULL
-- relative_error (which the check fails on) rather than dropped by the join.
CREATE OR REPLACE VIEW gpu_conservation AS
WITH attributed AS (
    SELECT trace, scenario, deployment, sum(gpu_s) AS attributed_gpu_s, max(finished_s) AS span_s
    FROM request_stages GROUP BY ALL
),
idle AS (
    SELECT trace, scenario, deployment, sum(idle_gpu_s) AS idle_gpu_s FROM fleet_timeline GROUP BY ALL
)
SELECT
    a.trace,
    a.scenario,
    a.attributed_gpu_s,
    i.idle_gpu_s,
    r.replicas * r.gpus_per_replica * a.span_s AS capacity_gpu_s,
    (a.attributed_gpu_s + i.idle_gpu_s) / (r.replicas * r.gpus_per_replica * a.span_s) - 1 AS relative_error
FROM attributed AS a
LEFT JOIN idle AS i USING (trace, scenario, deployment)
LEFT JOIN roofline AS r USING (deployment)
ORDER BY a.trace, a.scenario;
