"""Runs write a private working copy of the warehouse and publish it whole, atomically, at the end.

Why: analysts keep `duckdb` sessions open on the warehouse while cron and the UI materialize. A
DuckDB file has one writer *or* many readers, so writing the file analysts read would make a run
fail (or retry and stall) whenever a session is open — and a run killed half-way would leave them
a mix of new and old tables. Instead:

    <dir>/fleetspend.duckdb                 published: what analysts open; only ever replaced whole
    <dir>/.fleetspend.duckdb.private/
        lock                                held (flock) by the one run writing; freed if it dies
        current.duckdb                      the pipeline's own copy of the last published state
        run-<run id>.duckdb                 this run's working copy: every asset writes here
        set-aside-run-<run id>.wal          an analyst's unsaved changes to the old published file
        publish-pending                     marker: a publish was started and may be incomplete

A run begins by copying `current` to its working copy and ends, if every step succeeded, by
checkpointing it, copying it beside the published file, renaming the working copy onto `current`
and `os.replace`-ing the copy onto the published path. `os.replace` is atomic on one file system:
a reader opening the path sees the old file or the new one, never a mix, and a session that has
the old file open keeps reading it (its inode lives until the session closes). Nothing the
pipeline does ever opens the published file, so no reader lock can stop a run, and no run can
stop a reader.

A run that fails or is killed publishes nothing: the published file and `current` are exactly as
before, and the next run deletes the abandoned working copy. A run killed during the publish
leaves `publish-pending`; the next run repeats the publish from `current` before anything else.
Runs that overlap wait for each other on the lock (they would otherwise overwrite each other),
each at most FLEETSPEND_LOCK_WAIT_S: a hung run holds the lock until it is stopped.

The published file is a product for reading: tables an analyst creates in it are replaced at the
next publish (use your own database and ATTACH the warehouse read-only). If a read-write session
has unsaved changes when a run publishes, its write-ahead log is moved aside (see
`_set_aside_stale_wal`) so new sessions can open the new file. The cost is two file
copies per run and up to three copies of the warehouse on disk.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from pipelines.settings import DEFAULT_LOCK_WAIT_S, LOCK_WAIT_SETTING

PRIVATE_PREFIX = "."
PRIVATE_SUFFIX = ".private"
WAIT_NOTE_EVERY_S = 600.0


class PublishError(RuntimeError):
    """The warehouse could not be prepared or published; the message says which path and why."""


def private_dir(published: Path) -> Path:
    """The pipeline's own folder beside the published file (same file system, so renames are atomic)."""
    return published.parent / f"{PRIVATE_PREFIX}{published.name}{PRIVATE_SUFFIX}"


def current_copy(published: Path) -> Path:
    """The pipeline's copy of the last published state, which the next run starts from; without
    it, the next run adopts the file at `published`."""
    return private_dir(published) / "current.duckdb"


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    """Take the writer lock on `fd` if no other run holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder_pid(fd: int) -> str | None:
    """The pid the run holding the lock on `fd` wrote into it, if that process is alive; None
    for a holder that wrote none (an operator's `flock`): a message must never say to kill a
    pid since reused."""
    pid = os.pread(fd, 64, 0).decode(errors="replace").strip()
    return pid if pid.isdigit() and _alive(int(pid)) else None


def _holder(pid: str | None) -> str:
    return f"the run in process {pid}" if pid else "another run"


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        pass
    return True


def _duration(seconds: float) -> str:
    """`seconds` as an operator reads it in a log: 5.3 s, 45 s, 12 min, 3 h, 3 h 5 min. Tenths
    below 10 s: a lock held 5.3 s under a 5 s bound read "for 5 s, longer than ...=5"."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def _copy_durably(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    with open(target, "rb+") as handle:
        os.fsync(handle.fileno())


def overdue_run(published: Path, lock_wait_s: float) -> str | None:
    """A problem line when a live run has held the writer lock of `published` for longer than
    `lock_wait_s`, since it wrote its pid there: a run started now would wait for it and give up.
    Said by the preflight, in one line before any process waits (cron's first command), and
    as a skipped tick by the schedule and the inbox sensor, which so start no run to pile up."""
    try:
        fd = os.open(private_dir(published) / "lock", os.O_RDONLY)
    except OSError:  # no run yet, or a warehouse folder the preflight names as a problem of its own
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free: released by the close below
            return None
        except BlockingIOError:
            pid = _holder_pid(fd)
            held = time.time() - os.fstat(fd).st_mtime
        if pid is None or held <= lock_wait_s:
            return None
        return (f"warehouse {published}: the run in process {pid} has held its writer lock for "
                f"{_duration(held)}, longer than {LOCK_WAIT_SETTING}={lock_wait_s:g}; a run now "
                f"would wait for it and give up. If it is hung, stop it (kill {pid}) and run "
                f"again: the lock is freed when it exits")
    finally:
        os.close(fd)


class Workspace:
    """One run's private working copy of the warehouse at `published`, and its publication.

    `begin` takes the writer lock and prepares the working copy; then `commit` publishes it or
    `abandon` throws it away, and both release the lock. `log` receives one line per step.
    """

    def __init__(self, published: Path, run_id: str, log: Callable[[str], None] = lambda _: None,
                 lock_wait_s: float = DEFAULT_LOCK_WAIT_S):
        if not run_id or not run_id.replace("-", "").isalnum():
            raise ValueError(f"run id {run_id!r}: expected letters, digits and dashes")
        self.published = published
        self.private = private_dir(published)
        self.current = current_copy(published)
        self.working = self.private / f"run-{run_id}.duckdb"
        self._pending = self.private / "publish-pending"
        self._staged = published.parent / f"{PRIVATE_PREFIX}{published.name}.publishing-{run_id}"
        self._log = log
        self.lock_wait_s = lock_wait_s
        self._lock: int | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def begin(self) -> Path:
        """Lock, finish or clean up what an earlier killed run left, and copy the last published
        state into this run's working copy; returns its path."""
        try:
            self.private.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PublishError(f"warehouse folder {self.published.parent}: cannot create "
                               f"{self.private.name} ({exc.strerror})") from None
        self._acquire()
        try:
            self._recover()
            if self.current.exists():
                _copy_durably(self.current, self.working)
            elif self.published.exists():
                # First run with this layout: adopt the file that is there.
                self._log(f"adopting existing warehouse {self.published}")
                _copy_durably(self.published, self.working)
            self._log(f"run writes to private working copy {self.working}")
        except OSError as exc:  # a full disk: the partial copy goes, so the space comes back
            self.working.unlink(missing_ok=True)
            self._release()
            raise PublishError(f"warehouse {self.published}: cannot prepare this run's working "
                               f"copy in {self.private} ({exc.strerror}); nothing was written. A "
                               f"run needs room for up to three copies of the warehouse") from None
        except BaseException:
            self._release()
            raise
        return self.working

    def commit(self) -> None:
        """Publish the working copy atomically and make it the base of the next run."""
        try:
            self._checkpoint(self.working)
            self._pending.touch()
            _fsync_dir(self.private)
            _copy_durably(self.working, self._staged)
            os.replace(self.working, self.current)
            os.replace(self._staged, self.published)
            self._set_aside_stale_wal()
            _fsync_dir(self.published.parent)
            self._pending.unlink()
            self._log(f"published {self.published}")
        finally:
            self._release()

    def abandon(self) -> None:
        """Drop the working copy; the published warehouse stays exactly as it was."""
        try:
            for path in (self.working, self.working.with_name(self.working.name + ".wal")):
                path.unlink(missing_ok=True)
            self._log(f"run did not complete: nothing published, {self.published} unchanged")
        finally:
            self._release()

    # -- internals ---------------------------------------------------------------------------
    def _acquire(self) -> None:
        fd = os.open(self.private / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _try_lock(fd):
                self._wait_for(fd)
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock = fd

    def _wait_for(self, fd: int) -> None:
        """Wait for the run holding the lock, at most `lock_wait_s`: a hung run never frees it,
        and every cron run after it would otherwise wait forever, one more process each night.
        The log says how long it has waited every `WAIT_NOTE_EVERY_S`, so a cron log shows that
        a wait is still going on."""
        self._log(f"waiting for {_holder(_holder_pid(fd))} to publish {self.published} (at most "
                  f"{_duration(self.lock_wait_s)}, {LOCK_WAIT_SETTING})")
        start = time.monotonic()
        noted = 0.0
        while not _try_lock(fd):
            waited = time.monotonic() - start
            if waited >= self.lock_wait_s:
                pid = _holder_pid(fd)  # another run may have taken the lock since the first line
                stop = f"kill {pid}" if pid else f"fuser -v {self.private / 'lock'} names it"
                raise PublishError(
                    f"warehouse {self.published}: gave up after waiting {_duration(waited)} "
                    f"({LOCK_WAIT_SETTING}={self.lock_wait_s:g}) for {_holder(pid)}, which holds "
                    f"its writer lock; nothing was written. If that run is hung, stop it ({stop}) "
                    f"and run again: the lock is freed when it exits")
            if waited - noted >= WAIT_NOTE_EVERY_S:
                noted = waited
                self._log(f"still waiting for {_holder(_holder_pid(fd))} to publish "
                          f"{self.published}: {_duration(waited)} so far")
            time.sleep(min(1.0, self.lock_wait_s - waited))

    def _release(self) -> None:
        """Free the writer lock, and first forget this run's pid in it: an operator's `flock`,
        which writes none, would otherwise be reported as this process (told to kill it) while
        it still lives, a notebook kernel that ran a materialize, say."""
        if self._lock is not None:
            os.ftruncate(self._lock, 0)
            os.close(self._lock)  # closing the descriptor releases the flock
            self._lock = None

    def _recover(self) -> None:
        """Under the lock, nobody else is writing: whatever a dead run left can go."""
        if self._pending.exists() and self.current.exists():
            self._log("an earlier run was stopped while publishing: publishing its result again")
            _copy_durably(self.current, self._staged)
            os.replace(self._staged, self.published)
            self._set_aside_stale_wal()
            _fsync_dir(self.published.parent)
        self._pending.unlink(missing_ok=True)
        stale = [*self.private.glob("run-*.duckdb*"), *self.private.glob("set-aside-*.wal"),
                 *self.published.parent.glob(f"{PRIVATE_PREFIX}{self.published.name}.publishing-*")]
        for path in stale:
            path.unlink()
        if stale:
            self._log(f"removed {len(stale)} file(s) left by a run that was stopped")

    def _set_aside_stale_wal(self) -> None:
        """A read-write session that changed the old published file keeps its unsaved changes in
        `<file>.wal`, named after the path, not the file. Left there, it would stop every new
        session on the new file ("WAL checkpoint iteration does not match"); moved aside, the
        session keeps writing to it through its open handle, and new sessions open cleanly."""
        wal = self.published.with_name(self.published.name + ".wal")
        if wal.exists():
            os.replace(wal, self.private / f"set-aside-{self.working.stem}.wal")
            self._log(f"a read-write session had unsaved changes in the old {self.published.name}; "
                      f"they stay in that session (the published file is for reading)")

    @staticmethod
    def _checkpoint(path: Path) -> None:
        """Fold the write-ahead log into the file, so the copy is the whole database."""
        if not path.exists():
            raise PublishError(f"{path}: the run wrote nothing to publish")
        with duckdb.connect(str(path)) as conn:
            conn.execute("CHECKPOINT")
        if path.with_name(path.name + ".wal").exists():
            raise PublishError(f"{path}: write-ahead log still present after CHECKPOINT")
