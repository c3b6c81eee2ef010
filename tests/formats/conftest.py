"""Shared fixtures of the format and ingest tests."""

from __future__ import annotations

import pytest


@pytest.fixture()
def inbox(tmp_path, monkeypatch):
    """An empty trace folder, set as FLEETSPEND_TRACE_DIR (the warehouse beside it: the inbox
    sensor runs the preflight, which makes a missing warehouse folder)."""
    folder = tmp_path / "inbox"
    folder.mkdir()
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(folder))
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(tmp_path / "warehouse" / "fleetspend.duckdb"))
    return folder
