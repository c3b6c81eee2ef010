-- Forget one trace file's trace_files row. $1: the file path.
DELETE FROM trace_files WHERE file = $1;
