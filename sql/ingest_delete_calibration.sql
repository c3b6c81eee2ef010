-- Forget the fitted factors of one trace whose rows are being replaced or removed: they were
-- fitted on rows the warehouse no longer holds. $1: the trace name.
DELETE FROM calibration WHERE trace = $1;
