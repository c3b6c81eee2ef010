"""The warehouse resource publishes a run's results only when every step succeeded."""

from __future__ import annotations

import errno
import fcntl
import os
import time

import dagster as dg
import duckdb
import polars as pl
import pytest

from pipelines import publish
from pipelines.definitions import build_defs
from pipelines.defs.resources import PublishedWarehouse
from pipelines.warehouse import write_table


def _defs(warehouse, value: int, fail: str | None) -> dg.Definitions:
    @dg.asset
    def numbers(duckdb: PublishedWarehouse):
        with duckdb.get_connection() as conn:
            write_table(conn, "numbers", pl.DataFrame({"v": [value]}))

    @dg.asset_check(asset="numbers", blocking=True)
    def numbers_are_sane(duckdb: PublishedWarehouse):
        return dg.AssetCheckResult(passed=fail != "check")

    @dg.asset(deps=["numbers"])
    def report(duckdb: PublishedWarehouse):
        if fail == "asset":
            raise dg.Failure("report broke")
        with duckdb.get_connection() as conn:
            write_table(conn, "report", pl.DataFrame({"v": [value * 10]}))

    return dg.Definitions(assets=[numbers, report], asset_checks=[numbers_are_sane],
                          resources={"duckdb": PublishedWarehouse(database=str(warehouse))})


def _run(warehouse, value, fail=None):
    with dg.DagsterInstance.ephemeral() as instance:
        job = _defs(warehouse, value, fail).resolve_implicit_global_asset_job_def()
        return job.execute_in_process(instance=instance, raise_on_error=False).success


def _published(warehouse):
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute("SELECT (SELECT v FROM numbers), (SELECT v FROM report)").fetchall()[0]


@pytest.mark.parametrize("fail", ["asset", "check"])
def test_a_failed_step_publishes_nothing(tmp_path, fail):
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    assert _run(warehouse, 1)
    assert _published(warehouse) == (1, 10)
    assert not _run(warehouse, 2, fail)
    assert _published(warehouse) == (1, 10)  # not even the run's successful first step
    assert _run(warehouse, 3)
    assert _published(warehouse) == (3, 30)


def test_a_publish_that_fails_fails_the_run(tmp_path, monkeypatch):
    """A full disk while publishing: the run ended RUN_SUCCESS (Dagster logs a teardown error
    and carries on), so `dagster job execute` exited 0 to cron with nothing published."""
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    assert _run(warehouse, 1)
    copy = publish._copy_durably

    def disk_full(source, target):
        if ".publishing-" in target.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        copy(source, target)

    monkeypatch.setattr(publish, "_copy_durably", disk_full)
    with dg.DagsterInstance.ephemeral() as instance:
        job = _defs(warehouse, 2, None).resolve_implicit_global_asset_job_def()
        result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
    assert f"publishing the run to {warehouse} failed ([Errno 28] No space left on device" in str(
        failure.event_specific_data.error)
    assert _published(warehouse) == (1, 10)
    monkeypatch.setattr(publish, "_copy_durably", copy)
    assert _run(warehouse, 3)
    assert _published(warehouse) == (3, 30)


def test_connections_outside_a_run_are_refused(tmp_path):
    resource = PublishedWarehouse(database=str(tmp_path / "w.duckdb"))
    with pytest.raises(dg.Failure, match="only inside a run"):
        with resource.get_connection():
            pass


def test_a_run_that_gives_up_waiting_fails_every_step_at_once(tmp_path, monkeypatch):
    """Behind a hung run, each step that opens a connection waited the whole bound again (two
    root steps: twice FLEETSPEND_LOCK_WAIT_S); the run now waits once and fails every step with
    the same line."""
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    assert _run(warehouse, 1)
    waits = []
    wait = publish.Workspace._wait_for

    def counted(workspace, fd):
        waits.append(fd)
        wait(workspace, fd)

    monkeypatch.setattr(publish.Workspace, "_wait_for", counted)
    monkeypatch.setenv("FLEETSPEND_LOCK_WAIT_S", "0.2")
    with open(publish.private_dir(warehouse) / "lock") as held:  # another run's lock
        fcntl.flock(held, fcntl.LOCK_EX)
        failures = _failures_of_two_root_steps(warehouse)
    assert len(waits) == 1 and len(failures) == 2 and failures[0] == failures[1]
    assert failures[0].startswith(f"warehouse {warehouse}: gave up after waiting")


def test_a_full_disk_before_the_first_step_fails_the_run_once_and_frees_the_space(tmp_path, monkeypatch):
    """The working copy could not be made (disk full): each step that opened a connection copied
    the warehouse again, failed with a bare OSError, and the partial copy stayed on the full disk
    until the next run."""
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    assert _run(warehouse, 1)
    copies = []
    copy = publish._copy_durably

    def disk_full(source, target):
        if target.name.startswith("run-"):
            copies.append(target)
            target.write_bytes(b"partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        copy(source, target)

    monkeypatch.setattr(publish, "_copy_durably", disk_full)
    failures = _failures_of_two_root_steps(warehouse)
    assert len(copies) == 1 and not copies[0].exists()
    assert failures == [f"warehouse {warehouse}: cannot prepare this run's working copy in "
                        f"{publish.private_dir(warehouse)} (No space left on device); nothing was "
                        f"written. A run needs room for up to three copies of the warehouse"] * 2


def _failures_of_two_root_steps(warehouse) -> list[str]:
    """The failure messages of a run of two assets that each open a connection, neither
    depending on the other (as the nightly's ingest and reference steps)."""

    @dg.asset
    def one(duckdb: PublishedWarehouse):
        with duckdb.get_connection():
            pass

    @dg.asset
    def two(duckdb: PublishedWarehouse):
        with duckdb.get_connection():
            pass

    defs = dg.Definitions(assets=[one, two],
                          resources={"duckdb": PublishedWarehouse(database=str(warehouse))})
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, raise_on_error=False)
    assert not result.success
    return [event.event_specific_data.error.message.removeprefix(
        "dagster._core.definitions.events.Failure: ").strip()
        for event in result.get_step_failure_events()]


@pytest.mark.parametrize(("asset", "missing", "first"), [
    ("shape_spend", "request_costs", "request_costs"),
    ("what_if", "request_shapes (made by the asset shape_spend)", "shape_spend"),
    # the calibration reads the ingest's tables first, and `--select requests` alone is refused
    ("calibration,calibration_errors", "requests", "requests (one computation writes it with rejected_requests,"
     " trace_files: select them together, --select rejected_requests,requests,trace_files)"),
])
def test_an_asset_materialized_alone_before_its_upstream_says_what_to_materialize_first(
        tmp_path, asset, missing, first):
    """The UI materializes one asset on its own; on a warehouse its upstream assets never ran
    into, the step failed with DuckDB's 'Table with name request_costs does not exist! Did you
    mean "sqlite_master"?' and a stack, naming no asset."""
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    with dg.DagsterInstance.ephemeral() as instance:
        job = build_defs(warehouse).resolve_implicit_global_asset_job_def()
        result = job.execute_in_process(instance=instance, raise_on_error=False,
                                        asset_selection=[dg.AssetKey(a) for a in asset.split(",")])
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    error = failure.event_specific_data.error
    assert error.cls_name == "Failure" and error.cause is None
    assert f"the warehouse {warehouse} has no table {missing}, which this step reads: materialize" \
           f" {first} and the assets upstream of it first (or run the nightly job)" in error.message


def _numbers_job_of_the_environment():
    """The `numbers` job on the warehouse FLEETSPEND_WAREHOUSE names: reconstructable, as the
    job `dagster job execute` runs."""
    job = dg.define_asset_job("numbers_and_report", executor_def=dg.in_process_executor)
    defs = dg.Definitions.merge(_defs(os.environ["FLEETSPEND_WAREHOUSE"], 2, None),
                                dg.Definitions(jobs=[job]))
    return defs.resolve_job_def("numbers_and_report")


def test_a_run_that_gave_up_waiting_ends_the_cli_with_its_line_not_a_traceback(tmp_path, monkeypatch):
    """`dagster job execute` sets the resources up once more after the run has ended (to load
    outputs from its result). That ran the preflight again, which by then found the holder
    overdue: the CLI ended in a Python traceback (DagsterResourceFunctionError, 'configuration
    problem(s), nothing was run') after a run that had run and failed with its one line."""
    warehouse = tmp_path / "wh" / "fleetspend.duckdb"
    assert _run(warehouse, 1)
    lock = publish.private_dir(warehouse) / "lock"
    wait = publish.Workspace._wait_for

    def gives_up_after_an_hour(workspace, fd):
        try:
            wait(workspace, fd)
        finally:  # as if the wait had lasted its bound: the live holder is overdue now
            lock.write_text(str(os.getpid()))
            os.utime(lock, (time.time() - 3600,) * 2)

    monkeypatch.setattr(publish.Workspace, "_wait_for", gives_up_after_an_hour)
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("FLEETSPEND_LOCK_WAIT_S", "0.2")
    with open(lock) as held:  # another run's lock
        fcntl.flock(held, fcntl.LOCK_EX)
        with dg.DagsterInstance.ephemeral() as instance:
            with dg.execute_job(dg.reconstructable(_numbers_job_of_the_environment),
                                instance=instance, raise_on_error=False) as result:
                assert not result.success
    [failure] = result.get_step_failure_events()
    assert "gave up after waiting" in failure.event_specific_data.error.message
    assert _published(warehouse) == (1, 10)
