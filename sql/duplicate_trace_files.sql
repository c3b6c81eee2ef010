-- Trace files whose content (sha256 of the file as stored) is another file's too, with rows: each
-- is replayed as a trace of its own, so a log uploaded twice under two names counts its traffic
-- and its spend twice. (Files without a data row are left out: two empty logs cost nothing.)
SELECT sha256, list(file ORDER BY file) AS files, max(rows_read) AS rows_read
FROM trace_files
WHERE rows_read > 0
GROUP BY sha256
HAVING count(*) > 1
ORDER BY min(file);
