-- The ingested trace files of which no row is in the figures: every row rejected (with the first
-- rejected line and its reason), or no data row at all (a header alone). The run succeeds and
-- the balance check passes on such a file, so the summary names it before any figure.
SELECT t.file, t.rows_read, r.line, r.reason
FROM trace_files AS t
LEFT JOIN rejected_requests AS r ON r.source_file = t.file
WHERE t.rows_accepted = 0
QUALIFY row_number() OVER (PARTITION BY t.file ORDER BY r.line) = 1
ORDER BY t.file;
