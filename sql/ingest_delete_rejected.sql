-- Forget one trace file's rejected rows. $1: the file path as stored in rejected_requests.
DELETE FROM rejected_requests WHERE source_file = $1;
