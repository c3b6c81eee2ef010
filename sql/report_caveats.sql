-- The physics caveats (pipelines/roofline/caveats.py) of what the report prices: the deployments
-- the baseline replay ran on (roofline.caveat) and the what-if fleets (scenario_fleets.caveat),
-- one line each; `section` says where the report puts it.
SELECT DISTINCT 'baseline' AS section, deployment || ': ' || caveat AS caveat
FROM roofline
WHERE caveat <> ''
  AND deployment IN (SELECT DISTINCT deployment FROM request_stages WHERE scenario = 'baseline')
UNION
SELECT DISTINCT 'what_if' AS section, 'what-if `' || scenario || '` (' || deployment || '): ' || caveat
FROM scenario_fleets
WHERE caveat <> ''
ORDER BY section, caveat
