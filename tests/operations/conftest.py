"""Helpers for operations tests: small real traces, a fresh environment per test, real processes."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
DAGSTER = Path(sys.executable).with_name("dagster")
DUCKDB_CLI = Path(sys.executable).with_name("duckdb")


def head_of_sample(folder: Path, name: str, rows: int) -> Path:
    """The header and first `rows` rows of a sample trace (real data, small enough to replay fast)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = (SAMPLES / name).read_text().splitlines(keepends=True)
    target = folder / name
    target.write_text("".join(lines[: rows + 1]))
    return target


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Env:
    """A fresh DAGSTER_HOME, warehouse, reports folder and trace folder under tmp_path."""

    def __init__(self, tmp_path: Path):
        self.home = tmp_path / "dagster_home"
        self.home.mkdir()
        (self.home / "dagster.yaml").write_text("")
        self.warehouse = tmp_path / "wh" / "fleetspend.duckdb"
        self.traces = tmp_path / "traces"
        self.traces.mkdir()
        self.vars = {**os.environ, "DAGSTER_HOME": str(self.home),
                     "FLEETSPEND_WAREHOUSE": str(self.warehouse),
                     "FLEETSPEND_TRACE_DIR": str(self.traces),
                     "FLEETSPEND_REPORTS_DIR": str(tmp_path / "reports")}

    def materialize_command(self, select: str = "*", *extra: str) -> list[str]:
        return [str(DAGSTER), "asset", "materialize", "-m", "pipelines.definitions",
                "--select", select, *extra]

    def materialize(self, select: str = "*", *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.materialize_command(select, *extra), cwd=ROOT, env=self.vars,
                              capture_output=True, text=True, timeout=600)

    def start(self, command: list[str], **kwargs) -> subprocess.Popen:
        """A process in its own group, so the test can kill it and everything it started."""
        return subprocess.Popen(command, cwd=ROOT, env=self.vars, start_new_session=True,
                                text=True, **kwargs)


def kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def stop_group(process: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM the process group of `process`, give it `grace_s` to exit, then SIGKILL what is left."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while group_members(process.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not group_members(process.pid):
            break
    process.wait(timeout=30)


@pytest.fixture()
def env(tmp_path) -> Env:
    return Env(tmp_path)
