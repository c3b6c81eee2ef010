-- What-if: each scenario's replay (scenario_stages) against the baseline, per request shape (the
-- shape of the baseline request, so an output cap does not move requests between shapes) and for
-- all shapes together (shape = 'all', rank 0).
--   description, change  the scenario's prose (scenarios.csv) and what it changes on this
--                      baseline, in its numbers (scenario_fleets.change)
--   spend_usd          attributed (busy) GPU spend: GPU-seconds x the scenario's $/GPU-hour
--   delta_usd_per_day  delta_usd scaled to a day: each trace's delta x 86,400 / its baseline span;
--   baseline_usd_per_day the baseline's busy spend scaled the same way, what delta_usd_per_day is a
--                      share of (delta_pct is of the replays' dollars: where the traces' spans
--                      differ, each trace weighs by its dollars there and by its dollars a day here)
--   (dollar deltas are rounded to a millionth of a dollar and delta_pct to a millionth of a
--   percentage point: an unchanged fleet's difference of two float sums is 0, not 3e-13; the
--   + 0.0 after each round makes a rounded tiny negative 0, not -0.0)
--   fleet_spend_usd    ('all' rows) what the fleet costs over the replay: busy + idle GPU-seconds;
--                      it moves only when the fleet's GPUs, replicas, price or span change;
--                      delta_fleet_usd_per_day is the change of its cost per day (each run's
--                      fleet dollars over its own span: the bill's change, beside the busy spend's)
--   p95_ttft_s, p95_tpot_s and their deltas (scenario - baseline), seconds
--   worst_trace_delta_p95_ttft_s, worst_trace_delta_p95_tpot_s  ('all' rows) the largest change of
--                      one trace's own p95 (its service's latency): a pooled p95 can improve while
--                      one trace's gets worse, and the other way round
--   truncated_requests, truncated_output_pct  the requests whose answer the scenario shortens
--                      (an output cap: a change of the product, not only of its cost) and the
--                      share of the baseline's output tokens it does not generate, percent
--   prefix_cache       the scenario's prefix-cache setting (scenario_fleets): a share is assumed
--   lower_precision    the scenario stores the weights or the KV cache in another format no wider
--                      than the baseline's (scenario_fleets): answers can change, which no replay
--                      measures
--   price_only         the scenario changes nothing but the price plan (scenario_fleets): its
--                      replay is the baseline's GPU time at another price, not a lever on it
--   skipped            why a scenario was not replayed (it cannot apply to a baseline deployment,
--                      scenario_fleets.skipped): one 'all' row without figures; null otherwise
CREATE OR REPLACE TABLE what_if AS
WITH base AS (
    SELECT trace, request_id, shape, total_usd AS usd, ttft_s, tpot_s, output_tokens, output_tokens AS base_output_tokens
    FROM request_shapes
),
spans AS (
    SELECT trace, max(finished_s) AS span_s FROM request_stages WHERE scenario = 'baseline' GROUP BY trace
),
scen AS (
    SELECT s.scenario, s.trace, b.shape, s.gpu_s * f.usd_per_gpu_hour / 3600 AS usd, s.ttft_s, s.tpot_s,
           s.output_tokens, b.base_output_tokens
    FROM scenario_stages AS s
    JOIN scenario_fleets AS f USING (trace, scenario)
    JOIN base AS b USING (trace, request_id)
),
both_runs AS (
    SELECT 'baseline' AS run, trace, shape, usd, ttft_s, tpot_s, output_tokens, base_output_tokens FROM base
    UNION ALL
    SELECT scenario AS run, trace, shape, usd, ttft_s, tpot_s, output_tokens, base_output_tokens FROM scen
),
stats AS (
    SELECT
        run,
        CASE WHEN grouping(shape) = 1 THEN 'all' ELSE shape END AS shape,
        count(*) AS requests,
        sum(usd) AS spend_usd,
        quantile_cont(ttft_s, 0.95) AS p95_ttft_s,
        quantile_cont(tpot_s, 0.95) AS p95_tpot_s,
        count(*) FILTER (WHERE output_tokens < base_output_tokens) AS truncated_requests,
        100 * sum(base_output_tokens - output_tokens) / sum(base_output_tokens) AS truncated_output_pct
    FROM both_runs
    GROUP BY GROUPING SETS ((run, shape), (run))
),
trace_p95 AS (
    SELECT run, trace, quantile_cont(ttft_s, 0.95) AS p95_ttft_s, quantile_cont(tpot_s, 0.95) AS p95_tpot_s
    FROM both_runs
    GROUP BY run, trace
),
worst_trace AS (
    SELECT
        r.run,
        max(r.p95_ttft_s - b.p95_ttft_s) AS worst_trace_delta_p95_ttft_s,
        max(r.p95_tpot_s - b.p95_tpot_s) AS worst_trace_delta_p95_tpot_s
    FROM trace_p95 AS r
    JOIN trace_p95 AS b ON b.run = 'baseline' AND b.trace = r.trace
    GROUP BY r.run
),
per_day AS (
    SELECT
        run,
        CASE WHEN grouping(shape) = 1 THEN 'all' ELSE shape END AS shape,
        sum(usd * 86400 / sp.span_s) AS usd_per_day
    FROM both_runs
    JOIN spans AS sp USING (trace)
    GROUP BY GROUPING SETS ((run, shape), (run))
),
-- What each run's fleet costs per trace over its own span: a fleet's cost per day is its GPUs x
-- price (busy or idle), so it is scaled by the run's own span, not the baseline's (a replay that
-- ends 6 s sooner on the same GPUs does not cut the bill).
fleet_by_trace AS (
    SELECT f.scenario AS run, f.trace, f.span_s,
           (gpu_s_attr.gpu_s + f.idle_gpu_s) * f.usd_per_gpu_hour / 3600 AS fleet_usd
    FROM scenario_fleets AS f
    JOIN (SELECT trace, scenario, sum(gpu_s) AS gpu_s FROM scenario_stages GROUP BY ALL) AS gpu_s_attr
      USING (trace, scenario)
    UNION ALL
    SELECT 'baseline', fs.trace, sp.span_s, fs.spend_usd
    FROM fleet_summary AS fs
    JOIN spans AS sp USING (trace)
),
fleet AS (
    SELECT run, sum(fleet_usd) AS fleet_spend_usd, sum(fleet_usd * 86400 / span_s) AS fleet_usd_per_day
    FROM fleet_by_trace
    GROUP BY run
),
runs AS (
    SELECT st.*, pd.usd_per_day, CASE WHEN st.shape = 'all' THEN fl.fleet_spend_usd END AS fleet_spend_usd,
           CASE WHEN st.shape = 'all' THEN fl.fleet_usd_per_day END AS fleet_usd_per_day
    FROM stats AS st
    JOIN per_day AS pd USING (run, shape)
    LEFT JOIN fleet AS fl USING (run)
),
-- one row per scenario: on a fleet of several baseline deployments (traces replayed on their
-- own, trace_deployments.sql) whose changes differ `change` names each baseline with its change
-- (one the same on every baseline, an output cap or fp8 from bf16, is said once, not once per
-- deployment in a sentence the headline quotes), `deployment` lists the scenario's deployments,
-- and a scenario lowers precision where it does on any of them
described AS (
    SELECT scenario, any_value(description) AS description,
           CASE WHEN count(DISTINCT change) > 1
                THEN string_agg(DISTINCT baseline_deployment || ': ' || change, '; '
                                ORDER BY baseline_deployment || ': ' || change)
                ELSE any_value(change) END AS change,
           string_agg(DISTINCT deployment, ', ' ORDER BY deployment) AS deployment,
           any_value(prefix_cache) AS prefix_cache, bool_or(lower_precision) AS lower_precision,
           bool_and(price_only) AS price_only, any_value(skipped) AS skipped
    FROM scenario_fleets
    GROUP BY scenario
),
measured AS (
SELECT
    r.run AS scenario,
    d.description,
    d.change,
    d.deployment,
    coalesce(ss.rank, 0) AS rank,
    r.shape,
    r.requests,
    b.spend_usd AS baseline_usd,
    r.spend_usd,
    round(r.spend_usd - b.spend_usd, 6) + 0.0 AS delta_usd,
    round(100 * (r.spend_usd - b.spend_usd) / b.spend_usd, 6) + 0.0 AS delta_pct,
    round(r.usd_per_day - b.usd_per_day, 6) + 0.0 AS delta_usd_per_day,
    b.usd_per_day AS baseline_usd_per_day,
    b.p95_ttft_s AS baseline_p95_ttft_s,
    r.p95_ttft_s,
    r.p95_ttft_s - b.p95_ttft_s AS delta_p95_ttft_s,
    b.p95_tpot_s AS baseline_p95_tpot_s,
    r.p95_tpot_s,
    r.p95_tpot_s - b.p95_tpot_s AS delta_p95_tpot_s,
    b.fleet_spend_usd AS baseline_fleet_usd,
    r.fleet_spend_usd,
    round(r.fleet_spend_usd - b.fleet_spend_usd, 6) + 0.0 AS delta_fleet_usd,
    round(r.fleet_usd_per_day - b.fleet_usd_per_day, 6) + 0.0 AS delta_fleet_usd_per_day,
    w.worst_trace_delta_p95_ttft_s,
    w.worst_trace_delta_p95_tpot_s,
    r.truncated_requests,
    r.truncated_output_pct,
    d.prefix_cache,
    d.lower_precision,
    d.price_only,
    d.skipped
FROM runs AS r
JOIN runs AS b ON b.run = 'baseline' AND b.shape = r.shape
JOIN described AS d ON d.scenario = r.run
LEFT JOIN worst_trace AS w ON w.run = r.run AND r.shape = 'all'
LEFT JOIN shape_spend AS ss ON ss.shape = r.shape
)
SELECT * FROM measured
UNION ALL BY NAME
SELECT scenario, description, change, deployment, 0 AS rank, 'all' AS shape, prefix_cache,
       lower_precision, price_only, skipped
FROM described WHERE skipped IS NOT NULL
ORDER BY scenario, rank;
