-- Every ingested file with the identity it must keep to be skipped (content hash, sidecar
-- options) and its trace name.
SELECT file, trace, sha256, options FROM trace_files;
