"""Readers never block writers, and see only complete results: two real processes.

An analyst's `duckdb` shell (read-only, or read-write as it opens by default) is open on the
published warehouse while `dagster asset materialize` runs from the command line (cron runs the
nightly job through `dagster job execute`: the same run, the same publish).
The run must succeed, the open session keeps its complete old results, every session opened
during the run sees the old or the new results whole, and sessions opened afterwards see the new
ones. (A read-write shell locks the file it opened against other sessions — DuckDB's rule, one
writer or many readers per file — so during such a session other readers get the lock error
until the run publishes a new file; the run itself never opens the published file.)
"""

from __future__ import annotations

import shutil
import subprocess
import time

import duckdb
import pytest

from tests.operations.conftest import DUCKDB_CLI, head_of_sample, kill_group

CODE, CONV = "AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv"


class Shell:
    """The duckdb CLI as an analyst uses it, one query at a time over its stdin."""

    def __init__(self, env, database, *options):
        self.process = env.start([str(DUCKDB_CLI), "-csv", "-noheader", *options, str(database)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, bufsize=1)

    def query(self, sql: str) -> str:
        self.process.stdin.write(sql.rstrip(";") + ";\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def close(self) -> str:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        return self.process.stderr.read()


def _counts(database) -> tuple[int, int] | str:
    try:
        with duckdb.connect(str(database), read_only=True) as conn:
            return conn.execute("SELECT (SELECT count(*) FROM requests),"
                                " (SELECT sum(requests) FROM shape_spend)").fetchall()[0]
    except duckdb.IOException as exc:
        assert "Conflicting lock is held" in str(exc) and "duckdb_cli" in str(exc)
        return "locked by the read-write shell"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["-readonly", "-readwrite"])
def test_open_shell_neither_blocks_nor_sees_a_partial_run(env, mode):
    head_of_sample(env.traces, CODE, 300)
    first = env.materialize()
    assert first.returncode == 0, first.stderr[-3000:]
    assert _counts(env.warehouse) == (300, 300)

    shell = Shell(env, env.warehouse, *([mode] if mode == "-readonly" else []))
    try:
        assert shell.query("SELECT count(*) FROM requests") == "300"
        shutil.copy(head_of_sample(env.traces.parent / "more", CONV, 500), env.traces)

        log = env.home / "run.log"
        with open(log, "w") as out:  # a file, not a pipe: the run must never wait on the test
            run = env.start(env.materialize_command(), stdout=out, stderr=subprocess.STDOUT)
            seen = set()
            while run.poll() is None:  # fresh sessions during the run: old or new results, whole
                seen.add(_counts(env.warehouse))
                time.sleep(0.05)
        output = log.read_text()
        assert run.returncode == 0, output[-3000:]
        assert "RUN_SUCCESS" in output
        old = (300, 300) if mode == "-readonly" else "locked by the read-write shell"
        assert seen <= {old, (800, 800)} and old in seen

        # The session opened before the run still reads its complete snapshot; new ones the new run.
        assert shell.query("SELECT count(*) FROM requests") == "300"
        assert shell.query("SELECT sum(requests) FROM shape_spend") == "300"
        assert shell.close() == ""
        assert _counts(env.warehouse) == (800, 800)
    finally:
        if shell.process.poll() is None:
            kill_group(shell.process)
