-- Per trace, the requests the replay set aside because its deployment cannot serve them: how
-- many, and the first one's id and reason. The reports' figures leave them out and the run
-- succeeds (one oversized request must not hold back every trace), so the summary and the
-- report name them. The example is the first in its file: ids are trace:line, and as text
-- 'x:10' sorts before 'x:2'.
SELECT trace, count(*) OVER (PARTITION BY trace) AS requests, request_id, reason
FROM unserved_requests
QUALIFY row_number() OVER (PARTITION BY trace ORDER BY length(request_id), request_id) = 1
ORDER BY trace;
