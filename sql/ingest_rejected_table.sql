-- Rows of a trace file that could not be used: file, 1-based line, raw text, reason.
CREATE TABLE IF NOT EXISTS rejected_requests (
    source_file VARCHAR,
    line        BIGINT,
    raw         VARCHAR,
    reason      VARCHAR
);
