-- The physics caveats (roofline.caveat, pipelines/roofline/caveats.py) of the deployments the
-- baseline replay ran on, one line each, for the report to say under the deployment's name.
SELECT DISTINCT deployment || ': ' || caveat AS caveat
FROM roofline
WHERE caveat <> ''
  AND deployment IN (SELECT DISTINCT deployment FROM request_stages WHERE scenario = 'baseline')
ORDER BY caveat
