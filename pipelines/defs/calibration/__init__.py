"""Calibration of a deployment's efficiency factors on the observed latencies of ingested logs."""
