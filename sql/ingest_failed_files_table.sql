-- The trace files the last ingest could not use, each with its error (the message that names the
-- file and what was expected). Such a file's previous rows, if it had any, stay in requests and
-- trace_files, so the reports go on showing them: this table is how the summary and the report
-- tell their reader so. Every ingest rewrites it (sql/ingest_clear_failed_files.sql, then one row per failure), so
-- a file that ingests again, or leaves the folder, drops out.
CREATE TABLE IF NOT EXISTS failed_trace_files (
    file  VARCHAR,
    error VARCHAR
);
