"""Replay invariants: stages are non-negative, TTFT covers prefill, GPU-seconds are conserved,
every request is replayed or set aside as unservable (and a warning names the ones set aside),
and (a warning) the deployment serves the model the log names.

A failed check stops the run, which then publishes nothing: the offending rows exist only in the
run's discarded working copy, so a failure names them itself (its description, one line in the
run log, and `bad_requests`, the first few rows)."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines.replay.api import BUSY_SNAP
from pipelines.reports.text import markdown_table, other_model_lines
from pipelines.warehouse import run_sql, scalar

CONSERVATION_TOLERANCE = 1e-9
# Attributed against busy GPU-seconds: a bin within BUSY_SNAP of whole is made whole, which moves
# busy time by up to BUSY_SNAP of it; twice that leaves as much again for the sums' rounding. The
# replay's clock adds its own resolution, per row (busy_resolution, sql/replica_gpu_balance.sql).
BUSY_TOLERANCE = 2 * BUSY_SNAP
SHOWN = 5
# Rows in the order of their files: a request id is trace:line, and as text 'x:10' sorts before
# 'x:2'; within a trace (one prefix) the shorter id is the earlier line.
FILE_ORDER = "trace, length(request_id), request_id"


def _first_rows(conn, source: str, columns: str) -> tuple[int, pl.DataFrame]:
    """How many rows `source` (a view or a filtered table) has, and the first SHOWN of them in
    their files' order: what a failing check names, since the run that fails publishes nothing."""
    count = scalar(conn, f"SELECT count(*) FROM {source}")
    rows = conn.sql(f"SELECT {columns} FROM {source} ORDER BY {FILE_ORDER} LIMIT {SHOWN}").pl()
    return count, rows


def _as_markdown(rows: pl.DataFrame) -> dg.MetadataValue:
    return dg.MetadataValue.md(markdown_table(rows, {c: c for c in rows.columns}))


def _bad_rows(conn, source: str, columns: str, what: str) -> dg.AssetCheckResult:
    """Pass when `source` (a view or a filtered table) has no row; else name the first few."""
    bad, rows = _first_rows(conn, source, columns)
    if bad == 0:
        return dg.AssetCheckResult(passed=True, metadata={"bad_rows": 0})
    first = rows.row(0, named=True)
    return dg.AssetCheckResult(
        passed=False,
        description=f"{bad:,} replayed request(s) {what}, first {first['trace']} {first['request_id']}",
        metadata={"bad_rows": bad, "bad_requests": _as_markdown(rows)})


@dg.asset_check(asset="request_stages", blocking=True)
def no_negative_stage(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """No replayed request has a negative stage or GPU time, or no end-to-end time."""
    with duckdb.get_connection() as conn:
        run_sql(conn, "negative_stages")
        return _bad_rows(conn, "negative_stages",
                         "trace, scenario, request_id, queue_s, prefill_s, decode_s, network_s, "
                         "prefill_gpu_s, decode_gpu_s, e2e_s",
                         "with a negative stage or GPU time, or no end-to-end time")


@dg.asset_check(asset="request_stages", blocking=True)
def ttft_covers_prefill(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Every replayed request's time to first token is at least its prefill time."""
    with duckdb.get_connection() as conn:
        return _bad_rows(conn, "(FROM request_stages WHERE ttft_s < prefill_s)",
                         "trace, scenario, request_id, ttft_s, prefill_s",
                         "with a TTFT shorter than their prefill")


@dg.asset_check(asset="request_stages", blocking=True, additional_deps=["fleet_timeline", "roofline"])
def gpu_seconds_conserved(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """attributed + idle GPU-seconds = replicas x GPUs per replica x replayed span, per fleet, and
    attributed = busy GPU-seconds (fleet_timeline's), per replica (sql/replica_gpu_balance.sql)."""
    with duckdb.get_connection() as conn:
        run_sql(conn, "gpu_conservation")
        run_sql(conn, "replica_gpu_balance")
        return conservation_result(conn, "gpu_conservation", "replica_gpu_balance",
                                   "no fleet_timeline rows, or a deployment not in roofline")


def conservation_result(conn, view: str, balance: str, unaccounted: str, *,
                        no_fleet_passes: bool = False) -> dg.AssetCheckResult:
    """The result of a GPU-seconds conservation view (sql/gpu_conservation.sql and its what-if
    twin): passed when every fleet's relative error is within CONSERVATION_TOLERANCE of its
    capacity; a fleet whose error is NULL, one side of the balance missing (`unaccounted` says
    which can be), fails too, named first. A view without fleets fails unless `no_fleet_passes`
    (every what-if scenario skipped leaves nothing to balance; a replay always has a fleet).
    Where every fleet balances its capacity, `balance` (per replica, sql/replica_gpu_balance.sql,
    or per fleet, the what-if view itself) must balance attributed against busy GPU-seconds to
    BUSY_TOLERANCE + its busy_resolution, the worst part named: a mostly idle fleet's capacity
    hides an attribution error, and one replica's error can cancel another's."""
    fleets, worst, missing = conn.execute(
        f"SELECT count(*), max(abs(relative_error)), count(*) FILTER (relative_error IS NULL)"
        f" FROM {view}").fetchone()
    row = conn.execute(f"SELECT trace, scenario, printf('%,.1f', attributed_gpu_s + idle_gpu_s),"
                       f" printf('%,.1f', capacity_gpu_s), printf('%.3g', relative_error)"
                       f" FROM {view} ORDER BY abs(relative_error) DESC NULLS FIRST LIMIT 1").fetchall()
    conserved = (fleets == 0 and no_fleet_passes) or (
        fleets > 0 and missing == 0 and worst <= CONSERVATION_TOLERANCE)
    off, worst_busy, first_off = _busy_balance(conn, balance)
    if conserved:
        description = first_off
    elif not row:
        description = f"no fleet to check in {view}"
    else:
        trace, scenario, accounted, capacity, error = row[0]
        description = (f"{trace} ({scenario}): attributed + idle = {accounted} GPU-s, but the"
                       f" fleet had {capacity} GPU-s (relative error {error}, tolerance"
                       f" {CONSERVATION_TOLERANCE:g})" if error is not None else
                       f"{trace} ({scenario}): its GPU-seconds cannot be balanced ({unaccounted})"
                       f"{f'; {missing - 1:,} more such fleet(s)' if missing > 1 else ''}")
    return dg.AssetCheckResult(
        passed=conserved and off == 0, description=description,
        metadata={"fleets": fleets, "unbalanced_fleets": missing,
                  "worst_relative_error": float(worst or 0.0), "tolerance": CONSERVATION_TOLERANCE,
                  "busy_unbalanced": off, "worst_busy_relative_error": worst_busy},
    )


def _busy_balance(conn, balance: str) -> tuple[int, float, str | None]:
    """How many rows of `balance` attribute other GPU-seconds than they were busy, beyond
    BUSY_TOLERANCE + their busy_resolution (a row missing a side, NULL, is the fleet check's;
    a replica busy on a fleet without stages has no span, so no resolution, and BUSY_TOLERANCE
    alone: its -1 is off, where a NULL tolerance counted it balanced), their worst relative
    error, and a line naming the worst of them against its own tolerance (None where none is
    off): its trace, scenario, replica where the view has one, both sides."""
    limit = f"{BUSY_TOLERANCE!r} + coalesce(busy_resolution, 0)"
    [(off, worst)] = conn.execute(
        f"SELECT count(*) FILTER (abs(busy_relative_error) > {limit}),"
        f" coalesce(max(abs(busy_relative_error)), 0) FROM {balance}").fetchall()
    if off == 0:
        return 0, worst, None
    first = conn.sql(f"SELECT *, {limit} AS tolerance FROM {balance}"
                     f" WHERE abs(busy_relative_error) > {limit}"
                     f" ORDER BY abs(busy_relative_error) / ({limit}) DESC LIMIT 1").pl().row(0, named=True)
    where = f" replica {first['replica']}" if "replica" in first else ""
    part = "replica" if where else "fleet"
    return off, worst, (
        f"{first['trace']} ({first['scenario']}){where}: attributed ="
        f" {first['attributed_gpu_s']:,.12g} GPU-s, but the {part} was busy"
        f" {first['busy_gpu_s']:,.12g} GPU-s (relative error {first['busy_relative_error']:.3g},"
        f" tolerance {first['tolerance']:.3g}){f'; {off - 1:,} more such {part}(s)' if off > 1 else ''}")


@dg.asset_check(asset="request_stages", blocking=True, additional_deps=["requests", "unserved_requests"])
def every_request_replayed_or_set_aside(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """requests = baseline request_stages + unserved_requests, per trace, and no request in
    neither (sql/replay_coverage.sql): no request lost or replayed twice on the way from the
    ingest to the reports, even where a lost one and a doubled one balance the counts."""
    with duckdb.get_connection() as conn:
        run_sql(conn, "replay_coverage")
        off = conn.execute("SELECT trace, requests, replayed, set_aside, missing FROM replay_coverage"
                           " WHERE requests <> replayed + set_aside OR missing > 0"
                           " ORDER BY trace").fetchall()
    description = "; ".join(f"{trace}: {requests:,} requests, {replayed:,} replayed + {aside:,} set aside"
                            f"{f', {missing:,} in neither' if missing else ''}"
                            for trace, requests, replayed, aside, missing in off[:SHOWN]) or None
    return dg.AssetCheckResult(passed=not off, description=description,
                               metadata={"traces_off": len(off)})


@dg.asset_check(asset="unserved_requests")
def every_request_served(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """A warning, not a stop: requests the deployment cannot serve are set aside so that the
    other traces' reports still come out; this names them (the reports' figures leave them out)."""
    with duckdb.get_connection() as conn:
        count, rows = _first_rows(conn, "unserved_requests",
                                  "trace, request_id, prompt_tokens, output_tokens, reason")
    if count == 0:
        return dg.AssetCheckResult(passed=True, metadata={"unserved_requests": 0})
    first = rows.row(0, named=True)
    return dg.AssetCheckResult(
        passed=False, severity=dg.AssetCheckSeverity.WARN,
        description=(f"{count:,} request(s) set aside, not replayed: the deployment their trace"
                     f" replays on cannot serve them, first {first['trace']} {first['request_id']},"
                     f" which {first['reason']}"),
        metadata={"unserved_requests": count, "first_requests": _as_markdown(rows)})


@dg.asset_check(asset="request_stages", additional_deps=["requests", "roofline", "models",
                                                         "fleet_timeline", "unserved_requests"])
def replayed_model_is_the_logged_one(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """A warning, not a stop: a log whose requests name another catalog model than the replayed
    deployment's (meta-llama/Llama-2-70b-chat-hf on a Llama-3.1-8B fleet) is priced as the
    deployment's model, every dollar of it, without a word elsewhere. This names each trace,
    the name, how many requests carry it and the deployment's model (other_model_lines); a
    name the catalog cannot place is not judged."""
    with duckdb.get_connection() as conn:
        lines = other_model_lines(conn)
    if not lines:
        return dg.AssetCheckResult(passed=True, metadata={"names_of_another_model": 0})
    return dg.AssetCheckResult(
        passed=False, severity=dg.AssetCheckSeverity.WARN, description="; ".join(lines),
        metadata={"names_of_another_model": len(lines),
                  "names": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines))})
