-- Per replayed trace, each model name its log gives (requests.model; rows that name none are
-- left out): how many of its requests name it, of how many, the deployment the trace was
-- replayed on (a trace whose every request was set aside is in unserved_requests alone) and
-- the model that deployment serves. Whether a name is another catalog model than the served
-- one is decided by pipelines.roofline.catalog.model_named (words of names, not SQL) among
-- `catalog_models`, the warehouse's `models` the run priced with: the replay's check and the
-- summary name such traces, whose dollars are the deployment's model's, not the named one's.
WITH replayed AS (
    SELECT DISTINCT trace, deployment FROM fleet_timeline WHERE scenario = 'baseline'
    UNION
    SELECT DISTINCT trace, deployment FROM unserved_requests
),
named AS (
    SELECT trace, model AS name, count(*) AS requests,
           CAST(sum(count(*)) OVER (PARTITION BY trace) AS BIGINT) AS trace_requests
    FROM requests
    GROUP BY trace, model
)
SELECT named.trace, named.name, named.requests, named.trace_requests, replayed.deployment,
       roofline.model AS served_model, (SELECT list(model ORDER BY model) FROM models) AS catalog_models
FROM named
JOIN replayed USING (trace)
JOIN roofline USING (deployment)
WHERE named.name IS NOT NULL
ORDER BY named.trace, named.requests DESC, named.name
