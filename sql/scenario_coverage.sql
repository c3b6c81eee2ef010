-- Every what-if scenario replays exactly the baseline's requests, per scenario of scenario_stages:
--   missing_rows  baseline (trace, request_id) pairs the scenario lacks
--   extra_rows    pairs the scenario has that the baseline lacks
CREATE OR REPLACE VIEW scenario_coverage AS
WITH base AS (
    SELECT trace, request_id FROM request_stages WHERE scenario = 'baseline'
),
missing AS (
    SELECT sc.scenario, count(*) AS missing_rows
    FROM (SELECT DISTINCT scenario FROM scenario_stages) AS sc
    CROSS JOIN base AS b
    ANTI JOIN scenario_stages AS s
      ON s.scenario = sc.scenario AND s.trace = b.trace AND s.request_id = b.request_id
    GROUP BY sc.scenario
),
extra AS (
    SELECT s.scenario, count(*) AS extra_rows
    FROM scenario_stages AS s
    ANTI JOIN base AS b ON b.trace = s.trace AND b.request_id = s.request_id
    GROUP BY s.scenario
)
SELECT sc.scenario, coalesce(m.missing_rows, 0) AS missing_rows, coalesce(e.extra_rows, 0) AS extra_rows
FROM (SELECT DISTINCT scenario FROM scenario_stages) AS sc
LEFT JOIN missing AS m USING (scenario)
LEFT JOIN extra AS e USING (scenario)
ORDER BY sc.scenario;
