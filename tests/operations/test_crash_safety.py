"""A run SIGKILLed during ingest, replay or reports leaves the published warehouse byte for byte
as it was; the next run cleans up after it and succeeds. Real processes: the `dagster` CLI, killed
with its whole process group as soon as the chosen step has started writing."""

from __future__ import annotations

import subprocess
import time

import duckdb
import pytest

from pipelines.publish import private_dir
from tests.operations.conftest import head_of_sample, kill_group, sha256

CODE, CONV = "AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv"


def _kill_when_started(env, step: str) -> str:
    """Start a whole-graph run; SIGKILL it once `step` has started and the run's working copy
    exists (the run is writing); returns what the run printed."""
    run = env.start(env.materialize_command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = []
    for line in run.stdout:
        output.append(line)
        if f'Started execution of step "{step}"' in line:
            break
    deadline = time.monotonic() + 60
    while not list(private_dir(env.warehouse).glob("run-*.duckdb")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(private_dir(env.warehouse).glob("run-*.duckdb")), "the run never started writing"
    kill_group(run)
    assert run.returncode == -9, "".join(output)[-3000:]
    return "".join(output)


@pytest.mark.slow
def test_killed_runs_leave_the_published_warehouse_as_it_was(env):
    head_of_sample(env.traces, CODE, 300)
    first = env.materialize()
    assert first.returncode == 0, first.stderr[-3000:]
    before = sha256(env.warehouse)

    head_of_sample(env.traces, CONV, 2000)  # the next runs have new work to do
    for step in ("ingested_traces", "replayed_fleet", "shape_spend", "report"):
        _kill_when_started(env, step)
        assert sha256(env.warehouse) == before, f"killed during {step}: published file changed"
        with duckdb.connect(str(env.warehouse), read_only=True) as conn:
            assert conn.execute("SELECT count(*) FROM request_costs").fetchall() == [(300,)]

    again = env.materialize()
    assert again.returncode == 0, again.stderr[-3000:]
    assert "removed" in again.stderr and "left by a run that was stopped" in again.stderr
    with duckdb.connect(str(env.warehouse), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM request_costs").fetchall() == [(2300,)]
    assert not list(private_dir(env.warehouse).glob("run-*"))
