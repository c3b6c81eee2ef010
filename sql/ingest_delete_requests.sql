-- Forget one trace file's accepted rows (before re-ingesting it, or when it left the trace folder).
-- $1: the file's trace name.
DELETE FROM requests WHERE trace = $1;
