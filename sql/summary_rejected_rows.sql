-- The ingested trace files some of whose rows were rejected while others are in the figures
-- (files with no usable row at all are sql/summary_unusable_files.sql's): how many of how many,
-- with the first rejected line and its reason. The run succeeds and the balance check passes on
-- such a file, so without this a cron operator would not learn that the figures lack rows.
SELECT t.file, t.rows_read, t.rows_rejected, r.line, r.reason
FROM trace_files AS t
LEFT JOIN rejected_requests AS r ON r.source_file = t.file
WHERE t.rows_accepted > 0 AND t.rows_rejected > 0
QUALIFY row_number() OVER (PARTITION BY t.file ORDER BY r.line) = 1
ORDER BY t.file;
