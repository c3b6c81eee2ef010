-- Forget the calibration errors of one trace: the ingest, when the trace's requests are replaced
-- or removed (they were measured on rows the warehouse no longer holds), and the calibration
-- asset, before it writes the trace's new fit. $1: the trace name.
DELETE FROM calibration_errors WHERE trace = $1;
