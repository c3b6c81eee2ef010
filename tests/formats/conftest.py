"""Shared fixtures of the format and ingest tests."""

from __future__ import annotations

import pytest

from pipelines.defs.ingest import sensors


@pytest.fixture()
def inbox(tmp_path, monkeypatch):
    """An empty trace folder, set as FLEETSPEND_TRACE_DIR (the warehouse beside it: the inbox
    sensor runs the preflight, which makes a missing warehouse folder), whose files the inbox
    sensor takes as complete however recently written."""
    folder = tmp_path / "inbox"
    folder.mkdir()
    # The files a test writes are seconds old: the sensor would wait for them to stop changing.
    monkeypatch.setattr(sensors, "SETTLE_S", 0.0)
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(folder))
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(tmp_path / "warehouse" / "fleetspend.duckdb"))
    return folder
