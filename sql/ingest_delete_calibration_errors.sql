-- Forget the calibration errors of one trace whose rows are being replaced or removed: they were
-- measured on rows the warehouse no longer holds. $1: the trace name.
DELETE FROM calibration_errors WHERE trace = $1;
