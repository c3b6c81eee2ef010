-- The trace files the last ingest could not use, with what the warehouse still holds of each:
-- its trace_files row from the last time it did ingest (the rows every report shows in its
-- place), or nulls for a file never ingested. The summary and the report name them before any
-- figure.
SELECT f.file, f.error, t.rows_accepted, t.ingested_at, t.sha256
FROM failed_trace_files AS f
LEFT JOIN trace_files AS t USING (file)
ORDER BY f.file;
