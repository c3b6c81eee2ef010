-- One row per ingested trace file: its trace name, format, content hash, row counts, policy
-- counts (pipelines.formats.common.COUNTS), tokens per prefix hash, the version of the reader
-- rules it was read under (pipelines.formats.common.READER_VERSION: another one is read again),
-- sidecar options, and when its rows were written (what a report still shows of a file that has
-- since become unreadable).
CREATE TABLE IF NOT EXISTS trace_files (
    file                VARCHAR,
    trace               VARCHAR,
    format              VARCHAR,
    sha256              VARCHAR,
    rows_read           BIGINT,
    rows_accepted       BIGINT,
    rows_rejected       BIGINT,
    exact_duplicates    BIGINT,
    zero_output_rows    BIGINT,
    failed_rows         BIGINT,
    prefix_block_tokens BIGINT,
    reader_version      BIGINT,
    options             VARCHAR,
    ingested_at         TIMESTAMPTZ
);
