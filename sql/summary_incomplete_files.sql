-- The ingested trace files of which not every row is in the figures, with the first rejected
-- line and its reason: those with no usable row (every row rejected, or no data row at all: a
-- header alone; rows_accepted = 0) and those with some rows rejected beside the rows the figures
-- hold. The run succeeds and the balance check passes on such a file, so the summary names it
-- before any figure: a cron operator would not learn otherwise that the figures lack rows.
SELECT t.file, t.rows_read, t.rows_accepted, t.rows_rejected, r.line, r.reason
FROM trace_files AS t
LEFT JOIN rejected_requests AS r ON r.source_file = t.file
WHERE t.rows_accepted = 0 OR t.rows_rejected > 0
QUALIFY row_number() OVER (PARTITION BY t.file ORDER BY r.line) = 1
ORDER BY t.file;
