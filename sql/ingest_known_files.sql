-- Every ingested file with the identity it must keep to be skipped (content hash, sidecar
-- options, the version of the reader rules it was read under) and its trace name.
SELECT file, trace, sha256, options, reader_version FROM trace_files;
