-- The canonical requests table (DESIGN.md), plus `line`: the row's line number in its file.
-- request_id (trace:line) is a virtual column, computed when read: storing 27M distinct strings
-- would double the time a week-long trace takes to write.
CREATE TABLE IF NOT EXISTS requests (
    request_id      VARCHAR GENERATED ALWAYS AS (trace || ':' || CAST(line AS VARCHAR)) VIRTUAL,
    trace           VARCHAR,
    arrival_ts      TIMESTAMPTZ,
    arrival_s       DOUBLE,
    prompt_tokens   BIGINT,
    output_tokens   BIGINT,
    cached_tokens   BIGINT,
    prefix_hashes   BIGINT[],
    model           VARCHAR,
    tenant          VARCHAR,
    observed_ttft_s DOUBLE,
    observed_e2e_s  DOUBLE,
    line            BIGINT
);
