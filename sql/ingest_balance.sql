-- Per trace file: rows read, and the rows that actually landed in requests and rejected_requests.
-- balanced: read = accepted + rejected, and both counts match the tables.
CREATE OR REPLACE VIEW ingest_balance AS
SELECT
    f.file,
    f.rows_read,
    f.rows_accepted,
    f.rows_rejected,
    coalesce(a.n, 0) AS requests_rows,
    coalesce(r.n, 0) AS rejected_rows,
    f.rows_read = f.rows_accepted + f.rows_rejected
        AND f.rows_accepted = coalesce(a.n, 0)
        AND f.rows_rejected = coalesce(r.n, 0) AS balanced
FROM trace_files AS f
LEFT JOIN (SELECT trace, count(*) AS n FROM requests GROUP BY trace) AS a USING (trace)
LEFT JOIN (SELECT source_file AS file, count(*) AS n FROM rejected_requests GROUP BY 1) AS r USING (file)
ORDER BY f.file;
