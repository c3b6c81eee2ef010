-- The whole log of every trace that carries an observed latency on some request: calibration
-- replays all of a trace's requests (unobserved ones queue and batch too) and fits on the
-- observed ones, with the trace's tokens per prefix hash from trace_files. An observed 0 s is a
-- log's "not measured" (the fit leaves it out): a trace of nothing else is unobserved, not one
-- the calibration config may name and the run then skips.
CREATE OR REPLACE VIEW calibration_requests AS
SELECT r.*, f.prefix_block_tokens
FROM requests AS r
LEFT JOIN trace_files AS f USING (trace)
WHERE r.trace IN (SELECT trace FROM requests
                  WHERE observed_ttft_s > 0 OR observed_e2e_s > 0);
