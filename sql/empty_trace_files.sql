-- The ingested trace files that hold no data row (a header alone, or blank lines): what to name
-- when a folder yields no request and no row was rejected.
SELECT file
FROM trace_files
WHERE rows_read = 0
ORDER BY file;
