-- Forget the fitted factors of one trace: the ingest, when the trace's requests are replaced or
-- removed (they were fitted on rows the warehouse no longer holds), and the calibration asset,
-- before it writes the trace's new fit. $1: the trace name.
DELETE FROM calibration WHERE trace = $1;
