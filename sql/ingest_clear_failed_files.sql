-- Forget the previous ingest's failures, before recording this one's.
DELETE FROM failed_trace_files;
