"""The warehouse resource: DuckDBResource's get_connection(), pointed at the run's working copy.

Asset code is unchanged (`with duckdb.get_connection() as conn`); underneath, the run's first
connection takes the writer lock and copies the last published warehouse (pipelines/publish.py),
and the end of the run publishes it atomically if no step failed. With the in-process executor a
run initializes this resource once, so `setup_for_execution` is the start of the run (where the
preflight runs, before any step) and `teardown_after_execution` its end.
"""

import re
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from pipelines import settings
from pipelines.defs.preflight import check_run
from pipelines.preflight import ConfigurationError
from pipelines.publish import PublishError, Workspace
from pipelines.reports.sql_tables import SQL_TABLES

# The asset each sql/ step of a report table belongs to: a view made on the way to a table
# (request_shapes, shape_spend's first step) is that table's asset's; any other table is its own.
ASSET_OF_SQL_STEP = {step: table.name for table in SQL_TABLES for step in table.steps}


class PublishedWarehouse(DuckDBResource):
    """`database` is the published file analysts read; runs never open it (see publish.py)."""

    _workspace: Workspace | None = PrivateAttr(default=None)
    _run: dg.InitResourceContext | None = PrivateAttr(default=None)
    _unavailable: str | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # `dagster job execute` sets the resources up once more after the run has ended (to load
        # outputs from its result): not the start of a run, so no preflight. Its preflight found
        # a lock the run had just given up on overdue, and ended the CLI in a traceback.
        finished = context.run is not None and context.run.is_finished
        self._run = context if context.run is not None and not finished else None
        self._unavailable = None
        if self._run is None:
            return
        try:
            check_run(Path(self.database), context.run.run_config)
        except ConfigurationError as exc:
            raise dg.Failure(str(exc)) from None

    @contextmanager
    def get_connection(self):
        if self._run is None:
            raise dg.Failure("get_connection() writes a run's working copy and works only inside a "
                             "run; outside one (sensors, notebooks) open the published file "
                             "read-only: duckdb.connect(path, read_only=True)")
        if self._unavailable is not None:
            raise dg.Failure(self._unavailable)
        if self._workspace is None:
            workspace = Workspace(Path(self.database), self._run.run.run_id, self._run.log.info,
                                  lock_wait_s=settings.lock_wait_s())
            try:
                workspace.begin()
            except PublishError as exc:
                # E.g. it gave up waiting for a hung run: the run's other steps fail with the
                # same line at once, instead of each waiting the whole FLEETSPEND_LOCK_WAIT_S.
                self._unavailable = str(exc)
                raise dg.Failure(self._unavailable) from None
            self._workspace = workspace
        with duckdb.connect(str(self._workspace.working), config=self.connection_config) as conn:
            try:
                yield conn
            except duckdb.CatalogException as exc:
                line = missing_table_line(exc, self.database)
                if line is None:
                    raise
                raise dg.Failure(line) from None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        workspace, self._workspace = self._workspace, None
        if workspace is None:
            return
        failures = context.instance.get_records_for_run(
            context.run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
        if failures:
            workspace.abandon()
            return
        try:
            workspace.commit()
        except Exception as exc:  # a full disk, a folder made read-only during the run, ...
            raise UnpublishedRun(f"publishing the run to {self.database} failed ({exc}); readers"
                                 f" keep the last run published whole, and the next run finishes"
                                 f" or redoes this one: free the space or fix the folder, then"
                                 f" run again") from exc


def missing_table_line(exc: duckdb.CatalogException, warehouse: str) -> str | None:
    """What to materialize first, when a step reads a table the warehouse lacks: an asset
    materialized alone (the UI's Materialize on one asset, a subset of the launchpad) before the
    assets upstream of it ever ran into this warehouse. Without it the run page showed DuckDB's
    "Table with name request_costs does not exist! Did you mean "sqlite_master"?" and its stack.
    None for any other catalog error."""
    found = re.search(r"Table with name (\S+) does not exist", str(exc))
    if found is None:
        return None
    table = found.group(1)
    asset = ASSET_OF_SQL_STEP.get(table, table)
    made_by = f" (made by the asset {asset})" if asset != table else ""
    together = written_with(asset)
    first = (f"{asset} (one computation writes it with {', '.join(together)}: select them"
             f" together, --select {','.join(sorted([asset, *together]))})" if together else asset)
    return (f"the warehouse {warehouse} has no table {table}{made_by}, which this step reads:"
            f" materialize {first} and the assets upstream of it first (or run the nightly job),"
            f" then this one")


def written_with(asset: str) -> list[str]:
    """The other assets of the one computation that writes `asset` (none for an asset of its
    own). Dagster refuses to materialize part of such a multi-asset: `dagster asset materialize
    --select shape_buckets`, as the line above advised on a warehouse without the catalog tables,
    stopped with DagsterInvalidSubsetError and its traceback. Imported here, when a step fails:
    pipelines.definitions imports this module."""
    from pipelines.definitions import ASSET_MODULES

    for assets in dg.load_assets_from_modules(ASSET_MODULES):
        keys = sorted(k.to_user_string() for k in assets.keys)
        if asset in keys and len(keys) > 1:
            return [k for k in keys if k != asset]
    return []


class UnpublishedRun(dg.DagsterError):
    """The run's steps succeeded but its publish failed. Dagster turns any other exception of a
    resource's teardown into a logged "Teardown of resources failed" event and still ends the run
    RUN_SUCCESS (`dagster job execute` exits 0, the UI shows it green) with nothing published:
    cron would never hear of it. A DagsterError is the one kind Dagster lets through its user
    code boundary, which makes the run fail with this message (its base class asks users not to
    subclass it; nothing else fails a run from teardown)."""
