-- The calibration asset's model-vs-observed errors (pipelines/defs/calibration/assets.py,
-- ERROR_SCHEMA): one row per observed trace x shape x half x metric. Created empty with the
-- warehouse, like sql/calibration_table.sql, and kept the same way.
CREATE TABLE IF NOT EXISTS calibration_errors (
    trace              VARCHAR,
    deployment         VARCHAR,
    shape              VARCHAR,
    split              VARCHAR,
    metric             VARCHAR,
    observations       BIGINT,
    median_observed_s  DOUBLE,
    error_before       DOUBLE,
    error_after        DOUBLE,
    shape_error_before DOUBLE,
    shape_error_after  DOUBLE,
    error_baseline     DOUBLE,
    fitted             BOOLEAN    -- the metric is one the trace was fitted on (fit_metrics)
);
