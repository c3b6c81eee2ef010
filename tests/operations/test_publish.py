"""The publish protocol of pipelines/publish.py, step by step, without Dagster."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from pipelines.warehouse import WAREHOUSE_CONFIG
from pipelines import publish
from pipelines.publish import PublishError, Workspace, private_dir
from tests.operations.conftest import DUCKDB_CLI, sha256


def _run(published, run_id, value, finish="commit", log=None):
    workspace = Workspace(published, run_id, log or (lambda _: None))
    with duckdb.connect(str(workspace.begin()), config=WAREHOUSE_CONFIG) as conn:
        conn.execute("CREATE OR REPLACE TABLE t AS SELECT ? AS v", [value])
    getattr(workspace, finish)()
    return workspace


def _value(published):
    with duckdb.connect(str(published), read_only=True) as conn:
        return conn.execute("SELECT v FROM t").fetchall()[0][0]


def test_commit_publishes_and_abandon_leaves_it_alone(tmp_path):
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    assert _value(published) == 1
    before = sha256(published)
    _run(published, "r2", 2, finish="abandon")
    assert sha256(published) == before
    assert sorted(p.name for p in private_dir(published).iterdir()) == ["current.duckdb", "lock"]
    _run(published, "r3", 3)
    assert _value(published) == 3


def test_a_run_starts_from_the_last_published_state(tmp_path):
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    workspace = Workspace(published, "r2")
    with duckdb.connect(str(workspace.begin())) as conn:
        assert conn.execute("SELECT v FROM t").fetchall() == [(1,)]
    workspace.abandon()


def test_killed_while_publishing_the_next_run_publishes_again(tmp_path, monkeypatch):
    """Death between making the result current and replacing the published file: the marker
    left behind makes the next run finish that publish first."""
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    real_replace = os.replace

    def die_on_publish(source, target):
        if str(target) == str(published):
            raise KeyboardInterrupt("killed")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", die_on_publish)
    with pytest.raises(KeyboardInterrupt):
        _run(published, "r2", 2)
    monkeypatch.undo()
    assert _value(published) == 1
    lines = []
    workspace = Workspace(published, "r3", lines.append)
    workspace.begin()
    assert _value(published) == 2
    assert any("publishing its result again" in line for line in lines)
    workspace.abandon()
    assert not [p for p in published.parent.iterdir() if ".publishing-" in p.name]


def test_overlapping_runs_wait_for_each_other(tmp_path):
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    first = Workspace(published, "r2")
    first.begin()
    lines = []
    second = threading.Thread(target=_run, args=(published, "r3", 3, "commit", lines.append))
    second.start()
    second.join(timeout=1.0)
    assert second.is_alive() and any("waiting for the run in process" in line for line in lines)
    with duckdb.connect(str(first.working)) as conn:
        conn.execute("CREATE OR REPLACE TABLE t AS SELECT 2 AS v")
    first.commit()
    second.join(timeout=30)
    assert _value(published) == 3


def test_a_run_gives_up_on_a_hung_run_after_the_bound(tmp_path, monkeypatch):
    """A hung run in another process holds the lock for ever: the next run waited for it with no
    end (one log line, then silence) and every nightly cron run piled up behind it. It now waits
    at most `lock_wait_s`, saying how long so far, then fails naming the warehouse, the
    process that holds the lock and how to stop it."""
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    hung = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from pipelines.publish import Workspace; "
         "Workspace(Path(sys.argv[1]), 'hung').begin(); print('holding', flush=True); "
         "time.sleep(600)", str(published)], stdout=subprocess.PIPE, text=True)
    try:
        assert hung.stdout.readline() == "holding\n"
        monkeypatch.setattr(publish, "WAIT_NOTE_EVERY_S", 0.3)
        lines = []
        started = time.monotonic()
        with pytest.raises(PublishError) as failure:
            Workspace(published, "r2", lines.append, lock_wait_s=1.5).begin()
        assert time.monotonic() - started < 10
    finally:
        hung.kill()
        hung.wait(timeout=30)
    assert re.fullmatch(
        rf"warehouse {re.escape(str(published))}: gave up after waiting \d+(\.\d)? s "
        rf"\(FLEETSPEND_LOCK_WAIT_S=1.5\) for the run in process {hung.pid}, which holds its "
        rf"writer lock; nothing was written. If that run is hung, stop it \(kill {hung.pid}\) "
        rf"and run again: the lock is freed when it exits", str(failure.value))
    assert lines[0] == (f"waiting for the run in process {hung.pid} to publish {published} "
                        f"(at most 1.5 s, FLEETSPEND_LOCK_WAIT_S)")
    assert any(line.startswith(f"still waiting for the run in process {hung.pid}") for line in lines)
    assert not list(private_dir(published).glob("run-r2*"))
    _run(published, "r3", 3)  # the hung run gone, the lock is free again
    assert _value(published) == 3


@pytest.mark.parametrize("seconds, said", [
    (5.3, "5.3 s"), (1.5, "1.5 s"), (0.0, "0.0 s"), (45, "45 s"), (720, "12 min"),
    (10800, "3 h"), (11100, "3 h 5 min")])
def test_durations_in_the_lock_messages_read_as_their_bound(seconds, said):
    """Under FLEETSPEND_LOCK_WAIT_S=5 the preflight said a run had held the lock "for 5 s,
    longer than FLEETSPEND_LOCK_WAIT_S=5" (5.3 s rounded), and the default wait was "at most
    3 h 0 min"."""
    assert publish._duration(seconds) == said


def test_a_lock_held_by_no_live_run_names_no_pid_to_kill(tmp_path):
    """The lock file keeps the pid of the last run that wrote it; held by something else (an
    operator's `flock`), that pid may since name another process: the message must not say
    to kill it."""
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    lock = private_dir(published) / "lock"
    lock.write_text("999999999")
    with open(lock) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(PublishError) as failure:
            Workspace(published, "r2", lock_wait_s=0).begin()
    assert "for another run, which holds its writer lock" in str(failure.value)
    assert f"(fuser -v {lock} names it)" in str(failure.value) and "kill" not in str(failure.value)


def test_a_finished_run_leaves_no_pid_in_the_lock(tmp_path):
    """A run's pid stayed in the lock file after it finished; while that process lived on (a
    notebook kernel that ran a materialize), an operator's `flock`, which writes no pid, was
    reported as that process, with the advice to kill it."""
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    lock = private_dir(published) / "lock"
    assert lock.read_text() == ""
    with open(lock) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(PublishError) as failure:
            Workspace(published, "r2", lock_wait_s=0).begin()
    assert f"process {os.getpid()}" not in str(failure.value) and "kill" not in str(failure.value)


def test_run_ids_cannot_name_other_paths(tmp_path):
    with pytest.raises(ValueError, match="run id"):
        Workspace(tmp_path / "wh.duckdb", "../../etc")


def test_a_writing_shell_does_not_stop_new_sessions_after_a_publish(tmp_path):
    """An analyst's read-write `duckdb` shell with unsaved changes leaves `<file>.wal` beside
    the published file; after the publish, new sessions must open the new file cleanly."""
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    shell = subprocess.Popen([str(DUCKDB_CLI), "-csv", "-noheader", str(published)], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        shell.stdin.write("CREATE TABLE mine AS SELECT 42 AS x;\nSELECT count(*) FROM mine;\n")
        shell.stdin.flush()
        assert shell.stdout.readline().strip() == "1"
        assert published.with_name("wh.duckdb.wal").exists()
        _run(published, "r2", 2)
        assert _value(published) == 2  # no "WAL checkpoint iteration does not match"
        shell.stdin.write("SELECT x FROM mine;\n")
        shell.stdin.flush()
        assert shell.stdout.readline().strip() == "42"  # the session keeps its own work
        shell.stdin.close()
        assert shell.wait(timeout=30) == 0 and shell.stderr.read() == ""
    finally:
        if shell.poll() is None:
            shell.kill()
    assert _value(published) == 2


def test_in_one_process_a_new_connection_reads_what_an_open_one_opened(tmp_path):
    """DuckDB keeps one database per file per process, as the README warns notebook users: while
    a connection to the warehouse is open, a new `duckdb.connect` of that process reads the run
    the open one read, not the one published since; once every connection is closed, the newest."""
    published = tmp_path / "wh.duckdb"
    _run(published, "r1", 1)
    with duckdb.connect(str(published), read_only=True) as open_one:
        _run(published, "r2", 2)
        with duckdb.connect(str(published), read_only=True) as new_one:
            assert new_one.execute("SELECT v FROM t").fetchall() == [(1,)]
        assert open_one.execute("SELECT v FROM t").fetchall() == [(1,)]
    assert _value(published) == 2
