-- The physics caveats (pipelines/roofline/caveats.py) of what the report prices: those of the
-- deployments the baseline replay ran on (roofline.caveat) and of the what-if fleets
-- (scenario_fleets.caveat). A caveat cell holds one caveat per line; each caveat is said once:
-- a baseline one with the deployments it applies to, a what-if one (unless the baseline already
-- says it) with the scenarios it applies to. `section` says where the report puts it.
WITH baseline AS (
    SELECT DISTINCT deployment, unnest(string_split(caveat, chr(10))) AS caveat
    FROM roofline
    WHERE caveat <> ''
      AND deployment IN (SELECT DISTINCT deployment FROM request_stages WHERE scenario = 'baseline')
),
what_if AS (
    SELECT DISTINCT scenario, unnest(string_split(caveat, chr(10))) AS caveat
    FROM scenario_fleets
    WHERE caveat <> ''
)
SELECT 'baseline' AS section,
       string_agg(deployment, ', ' ORDER BY deployment) || ': ' || caveat AS caveat
FROM baseline
GROUP BY caveat
UNION ALL
SELECT 'what_if' AS section,
       'what-if ' || string_agg('`' || scenario || '`', ', ' ORDER BY scenario) || ': ' || caveat
FROM what_if
WHERE caveat NOT IN (SELECT caveat FROM baseline)
GROUP BY caveat
ORDER BY section, caveat
