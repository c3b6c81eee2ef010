-- Every file with rejected rows: how many, and its first two rejected lines with their reasons
-- (what to fix when a folder yields no usable row).
SELECT source_file, count(*) OVER (PARTITION BY source_file) AS rows_rejected, line, reason
FROM rejected_requests
QUALIFY row_number() OVER (PARTITION BY source_file ORDER BY line) <= 2
ORDER BY source_file, line;
