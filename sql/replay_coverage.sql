-- Per trace: its requests, those the baseline replayed and those it set aside as unservable
-- (requests = replayed + set_aside when no request was lost or replayed twice).
CREATE OR REPLACE VIEW replay_coverage AS
WITH ingested AS (SELECT trace, count(*) AS requests FROM requests GROUP BY trace),
replayed AS (
    SELECT trace, count(*) AS replayed FROM request_stages WHERE scenario = 'baseline' GROUP BY trace
),
set_aside AS (SELECT trace, count(*) AS set_aside FROM unserved_requests GROUP BY trace)
SELECT
    trace,
    coalesce(i.requests, 0) AS requests,
    coalesce(r.replayed, 0) AS replayed,
    coalesce(s.set_aside, 0) AS set_aside
FROM ingested AS i
FULL JOIN replayed AS r USING (trace)
FULL JOIN set_aside AS s USING (trace);
