-- The deployment each ingested log's sidecar says served it (the "deployment" key of
-- trace_files.options, pipelines/formats/sidecar.py), with the sidecar's file; null where the
-- sidecar names none (those traces replay on the run's deployment).
SELECT trace, file || '.fleetspend.json' AS sidecar,
       nullif(trim(json_extract_string(options, '$.deployment')), '') AS deployment
FROM trace_files
ORDER BY trace;
