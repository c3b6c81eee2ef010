-- The most frequent rejection reasons per file (what to fix when a log yields no usable rows),
-- with one example line each.
SELECT source_file, reason, count(*) AS rows_rejected, min(line) AS first_line
FROM rejected_requests
GROUP BY source_file, reason
ORDER BY rows_rejected DESC, source_file, reason
LIMIT 5;
