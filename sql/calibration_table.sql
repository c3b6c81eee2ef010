-- The calibration asset's fitted factors (pipelines/defs/calibration/assets.py, PARAMETER_SCHEMA):
-- one row per observed trace x parameter. Created empty with the warehouse, so SQL against it
-- works before calibration (on demand) first runs; each run replaces the rows of the traces it
-- calibrates (sql/calibration_delete_trace.sql) and keeps the others', and the ingest deletes a
-- trace's rows when it replaces or removes the trace's requests. A table of other
-- columns (an older release's) is dropped first and created anew (pipelines/ingest_store.py).
CREATE TABLE IF NOT EXISTS calibration (
    trace      VARCHAR,
    deployment VARCHAR,
    parameter  VARCHAR,
    before     DOUBLE,
    after      DOUBLE,
    at_bound   BOOLEAN,
    -- why the deployment cannot have served the log (Calibration.warnings, one per line, as in
    -- the asset's implausible_fits metadata); null for a plausible fit
    implausible VARCHAR,
    -- per fitted metric with any, the observations more than 10 x off the fitted prediction: how
    -- many, and the worst (Calibration.outliers, one per line, as in the asset's
    -- outlying_observations metadata); null where there is none
    outliers    VARCHAR
);
