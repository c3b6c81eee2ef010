-- Trace files that hold the same requests as another file, or the same bytes, with rows: each is
-- replayed as a trace of its own, so a log uploaded twice counts its traffic and its spend twice.
-- The same requests: every column but the line, in any order (count and sum of row hashes), so
-- that a copy compressed with gzip, reordered or saved with other line endings, whose sha256 is
-- another, is found; sha256 is the files' one hash when they are byte for byte the same, else
-- null. The same bytes read into other requests (a copy with a sidecar of other options) are a
-- set of their own. A file whose every row was rejected has no request: its bytes stand for them.
-- (Files without a data row are left out: two empty logs cost nothing.)
WITH fingerprints AS (
    SELECT trace, count(*)::VARCHAR || ':' || sum(hash(arrival_s, arrival_ts, prompt_tokens,
               output_tokens, cached_tokens, model, tenant, observed_ttft_s, observed_e2e_s))::VARCHAR
               AS fingerprint
    FROM requests
    GROUP BY trace
),
files AS (
    SELECT t.file, t.sha256, t.rows_read, coalesce(f.fingerprint, 'sha256:' || t.sha256) AS fingerprint
    FROM trace_files AS t
    LEFT JOIN fingerprints AS f ON f.trace = t.trace
    WHERE t.rows_read > 0
),
copies AS (
    SELECT CASE WHEN count(DISTINCT sha256) = 1 THEN min(sha256) END AS sha256,
           list(file ORDER BY file) AS files, max(rows_read) AS rows_read
    FROM files
    GROUP BY fingerprint
    HAVING count(*) > 1
    UNION ALL
    SELECT sha256, list(file ORDER BY file), max(rows_read)
    FROM files
    GROUP BY sha256
    HAVING count(DISTINCT fingerprint) > 1
)
SELECT sha256, files, rows_read
FROM copies
ORDER BY files[1], len(files);
