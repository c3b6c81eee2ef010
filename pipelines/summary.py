"""`python -m pipelines.summary`: print the fleet summary (led by the deployment replayed and the
price its dollars are at; on a fleet of several, a line per deployment before the traces'), the
top request shapes, the what-if savings and the top of the chargeback from the warehouse
(read-only), and say where the warehouse (published when: a failed run publishes nothing)
and the report files are.
Trace files the last ingest could not read come first (the figures show their previous rows, or
leave them out), then those it read with no usable row and those with another's content (counted
twice), the requests the replay set aside as unservable and the traces whose log names another
model than the deployment replayed serves (priced as that deployment's), then the physics caveats of what it
prices, before any dollar figure (the report puts a what-if fleet's under its table; here every
caveat leads, a what-if one named as such), then what the on-demand calibration found, when it
has run: per trace, its deployment, whether that deployment can have served the log, the fitted
factors and the held-out errors against the shape-median baseline.
Before reading, it checks the warehouse has every table and column it reads (`READS`), so a
warehouse an older release built gets one line naming what it lacks, not a traceback halfway
through."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl

from pipelines import settings
from pipelines.formats.common import sha256_of
from pipelines.formats.source import UNREAD_KINDS, folder_mark, trace_files, unread_files
from pipelines.ingest_folder import duplicate_lines
from pipelines.preflight import warehouse_problem
from pipelines.reports.text import (
    BASELINE_ROW_COLUMNS,
    CHARGEBACK_COLUMNS,
    CUT_SHORT_COLUMNS,
    DEPLOYMENT_LINE_COLUMNS,
    HEADLINE_COLUMNS,
    NO_WHAT_IF,
    REPORT_TABLES,
    SHAPE_COLUMNS,
    SHAPE_SIGN_COLUMNS,
    SKIPPED_INTRO,
    SPEND_NOTE,
    STAGES_NOTE,
    SUMMARY_LINE_COLUMNS,
    WHAT_IF_COLUMNS,
    ReportTables,
    chargeback_note,
    deployment_sentence,
    failed_file_error,
    fleet_lines,
    other_model_lines,
    headline,
    markdown_table,
    shape_sign_note,
    what_if_note,
    what_if_scenarios,
    what_if_table,
)
from pipelines.warehouse import run_sql

# The report's shape and what-if tables, narrowed to what fits a terminal.
SHAPES_SHOWN = {k: v for k, v in SHAPE_COLUMNS.items()
                if k not in ("cum_pct_spend", "bound", "usd_per_1m_output_tokens", "lever", "cost_lever")}
WHAT_IFS_SHOWN = {k: v for k, v in WHAT_IF_COLUMNS.items() if k != "change"}
CHARGEBACK_ROWS = 5   # the top rows of each dimension the summary prints (all: the report)


def _union(*parts: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Table -> every column any of `parts` names for it."""
    merged: dict[str, frozenset[str]] = {}
    for part in parts:
        for table, columns in part.items():
            merged[table] = merged.get(table, frozenset()) | frozenset(columns)
    return merged


# What sql/summary_calibration.sql reads: without the report tables, the summary still prints
# the calibration where these are whole (main).
CALIBRATION_READS = {
    "calibration": ("trace", "deployment", "implausible", "outliers", "parameter", "before", "after"),
    "calibration_errors": ("trace", "shape", "split", "metric", "observations", "error_before",
                           "error_after", "error_baseline", "fitted"),
}
# Every table and column the summary reads, checked before it reads any (`lacking`).
READS = _union(
    {table: () for table in REPORT_TABLES},  # ReportTables.read reads each one whole
    {"fleet_summary": SUMMARY_LINE_COLUMNS, "deployment_summary": DEPLOYMENT_LINE_COLUMNS,
     "shape_spend": SHAPES_SHOWN,
     "what_if": ("shape", "skipped", *WHAT_IFS_SHOWN, *BASELINE_ROW_COLUMNS, *CUT_SHORT_COLUMNS,
                 *SHAPE_SIGN_COLUMNS)},
    HEADLINE_COLUMNS,
    {"chargeback": CHARGEBACK_COLUMNS,
     "fleet_summary": ("requests", "attributed_usd", "idle_usd", "spend_usd")},  # chargeback_note
    {"roofline": ("deployment", "caveat"), "request_stages": ("deployment", "scenario"),
     "scenario_fleets": ("scenario", "caveat")},  # sql/report_caveats.sql
    {"deployment_prices": ("deployment", "provider", "plan", "usd_per_gpu_hour"),
     "deployment_summary": ("deployment", "trace_names", "traces")},  # sql/report_prices.sql
    {"trace_files": ("file", "rows_accepted", "ingested_at", "sha256"),
     "failed_trace_files": ("file", "error")},  # sql/summary_failed_files.sql
    {"trace_files": ("file", "rows_read", "rows_accepted", "rows_rejected"),
     "rejected_requests": ("source_file", "line", "reason")},  # sql/summary_incomplete_files.sql
    {"trace_files": ("sha256", "file", "rows_read", "trace"),
     "requests": ("trace", "arrival_s", "arrival_ts", "prompt_tokens", "output_tokens", "cached_tokens",
                  "model", "tenant", "observed_ttft_s", "observed_e2e_s")},  # sql/duplicate_trace_files.sql
    {"unserved_requests": ("trace", "request_id", "reason")},  # sql/summary_unserved_requests.sql
    {"requests": ("trace", "model"), "fleet_timeline": ("trace", "deployment", "scenario"),
     "unserved_requests": ("trace", "deployment"), "roofline": ("deployment", "model"),
     "models": ("model",)},  # sql/replay_model_names.sql, other_model_lines
    CALIBRATION_READS,
)


def lacking(conn: duckdb.DuckDBPyConnection,
            reads: Mapping[str, frozenset[str]]) -> list[tuple[str, str | None]]:
    """(table, None) for each table of `reads` the warehouse lacks and (table, column) for each
    column, from information_schema (sql/summary_columns.sql) before any table is read: a warehouse an older release built
    is then named for what it lacks, and a KeyError while printing stays the bug it is."""
    present: dict[str, set[str]] = {}
    for table, column in run_sql(conn, "summary_columns").fetchall():
        present.setdefault(table, set()).add(column)
    lacks: list[tuple[str, str | None]] = []
    for table, columns in sorted(reads.items()):
        if table not in present:
            lacks.append((table, None))
        else:
            lacks += [(table, column) for column in sorted(columns - present[table])]
    return lacks


def lack_message(path: Path, lacks: list[tuple[str, str | None]]) -> str:
    """One line for what `lacking` found: a warehouse with no report table at all was never
    built this far; one that lacks some was built by another release (or by hand)."""
    if {table for table, column in lacks if column is None} >= set(REPORT_TABLES):
        return (f"fleetspend: {path} has no report tables yet: the nightly job builds them"
                f" (`make demo`, or your nightly job)")
    what = "; ".join(f"table {table}" if column is None else f"column {column} of table {table}"
                     for table, column in lacks)
    return (f"fleetspend: {path} lacks {what}, which the summary reads; rebuild the warehouse with"
            f" this release (`make demo`, or the nightly job)")


# DuckDB's words for a file another process holds read-write (its program and PID).
LOCK_HELD = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


def _where_from() -> str:
    """Where the warehouse path came from, when the setting is not set: the summary run by hand
    after a cron line that sets FLEETSPEND_WAREHOUSE looks in the default place, and 'run make
    demo' alone sent the operator to build a second warehouse."""
    if os.environ.get("FLEETSPEND_WAREHOUSE", "").strip():
        return ""
    return (" (FLEETSPEND_WAREHOUSE is not set; set it as your runs do to summarize their"
            " warehouse)")


def unreadable_message(path: Path, exc: duckdb.Error) -> str:
    """One line for a warehouse DuckDB would not open. A read-write session of another process
    (an analyst's `duckdb` without -readonly) locks the file until a run publishes a new one;
    DuckDB's message names the process but not what to do, so this says it."""
    first = str(exc).splitlines()[0]
    held = LOCK_HELD.search(first)
    if held is None:
        return f"fleetspend: cannot read the warehouse {path}: {first}"
    return (f"fleetspend: cannot read the warehouse {path}: a read-write session holds it"
            f" (PID {held[2]}, {held[1]}); close that session, or open the warehouse with"
            f" `duckdb -readonly`, then run the summary again")


def main(top: int = 10) -> int:
    """Print the summary; 1, with one line on stderr, where there is nothing to summarize: no
    warehouse, a file that is not one, or one without a table or column the summary reads (the
    calibration, where its own tables are whole, printed first all the same)."""
    path = settings.warehouse_path()
    if not path.exists():
        # a first run of one's own logs that failed (every request longer than the model's
        # context) publishes nothing: "run `make demo` first" sent its operator to the demo
        print(f"fleetspend: no warehouse at {path}{_where_from()}: no run has published one"
              f" there yet (a run that fails publishes nothing: its log says why); run the"
              f" pipeline first (`make demo`, or your nightly job)", file=sys.stderr)
        return 1
    if problem := warehouse_problem(path):   # DuckDB's words for a log there: "in-memory database"
        print(f"fleetspend: {problem}", file=sys.stderr)
        return 1
    # A run replaces the file whole when it publishes, and a failed run leaves it as it was:
    # its time is the last successful run's, which the summary says beside the figures.
    published = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            lacks = lacking(conn, READS)
            if lacks:
                # the on-demand calibration needs no report table: a warehouse only ingested and
                # calibrated holds fits the user asked for, shown before what it lacks
                if not {table for table, _ in lacks} & set(CALIBRATION_READS):
                    _print_calibration(run_sql(conn, "summary_calibration").fetchall(), figures=False)
                print(lack_message(path, lacks), file=sys.stderr)
                return 1
            tables = ReportTables.read(conn)
            caveats = run_sql(conn, "report_caveats").fetchall()
            prices = run_sql(conn, "report_prices").fetchall()
            ingested = {file: (at, sha256) for file, at, sha256 in
                        conn.sql("SELECT file, ingested_at, sha256 FROM trace_files").fetchall()}
            failed = run_sql(conn, "summary_failed_files").fetchall()
            incomplete = run_sql(conn, "summary_incomplete_files").fetchall()
            duplicates = duplicate_lines(conn)
            unserved = run_sql(conn, "summary_unserved_requests").fetchall()
            other_models = other_model_lines(conn)
            calibrated = run_sql(conn, "summary_calibration").fetchall()
    except duckdb.Error as exc:  # not a DuckDB file, or held by another process
        print(unreadable_message(path, exc), file=sys.stderr)
        return 1
    _print_summary(path, tables, caveats, ingested, failed, incomplete, duplicates, unserved,
                   other_models, calibrated, top, prices, published)
    return 0


def _failed_lines(failed: list[tuple]) -> list[str]:
    """One item per row of sql/summary_failed_files.sql: its error, which names the file
    (text.failed_file_error, as the report says it), and what the figures below hold of it: its
    previous rows (how many, when they were ingested, the prefix of the content hash they were
    read from, to tell which version of the file they are), or nothing. The run exits 0 on such
    a file (one bad upload must not hold back the reports), so this is where a cron operator
    learns of it."""
    lines = []
    for file, error, rows, ingested_at, sha256 in failed:
        held = ("nothing of it is in the figures below: it was never ingested" if rows is None else
                f"the figures below show its previous rows: {rows:,} requests ingested"
                f" {ingested_at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
                f" (sha256 {sha256[:12]}...)")
        lines.append(f"- {failed_file_error(file, error)}\n  {held}")
    return lines


def _unusable_lines(unusable: list[tuple]) -> list[str]:
    """One item per row of sql/summary_incomplete_files.sql with no accepted row: a file that
    ingested but gave no row to the figures (its format changed upstream, say, and every line
    is now rejected), with its first rejected line and reason; the run and its balance check
    both pass on it."""
    return [f"- {file}: {rows:,} rows read, none usable, e.g. line {line}: {reason}" if rows else
            f"- {file}: no data row (a header alone, or blank lines)"
            for file, rows, _, _, line, reason in unusable]


def _rejected_lines(rejected: list[tuple]) -> list[str]:
    """One item per row of sql/summary_incomplete_files.sql with accepted rows: a file that is
    in the figures without some of its rows, with its first rejected line and reason."""
    return [f"- {file}: {rows_rejected:,} of {rows_read:,} rows rejected, e.g. line {line}: {reason}"
            for file, rows_read, _, rows_rejected, line, reason in rejected]


def _pct(x: float | None) -> str:
    """A share as a percentage; n/a for none (null or NaN: a group with no observation)."""
    return "n/a" if x is None or x != x else f"{100 * x:.1f}%"


def _held_out_line(e: dict) -> str:
    """A held-out error of sql/summary_calibration.sql, and whether it beats its baseline: the
    README prices with fitted factors only where it does on the metrics the fit used. A metric
    reported but not fitted (the time per output token, by default) is named so, not judged: a
    TPOT of hardly any spread of its own, not fitted, was called a fit that explains nothing."""
    beaten = e["after"] is None or e["baseline"] is None or e["after"] < e["baseline"]
    verdict = (" (reported, not fitted)" if not e["fitted"] else "" if beaten
               else " (not below it: the model explains nothing of the per-request spread)")
    return (f"  held-out {e['metric']} ({e['observations']:,} observed): median error"
            f" {_pct(e['before'])} → {_pct(e['after'])}, shape-median baseline {_pct(e['baseline'])}"
            + verdict)


def _calibration_lines(calibrated: list[tuple]) -> list[str]:
    """One item per row of sql/summary_calibration.sql. Why the deployment cannot have served
    the log comes first, one reason a line: such a fit's factors say nothing of the fleet,
    however good its errors look; then the observations the robust fit discounted without a
    word (a TTFT of 5,000 s), which good medians hide. The errors are the held-out half's,
    beside the shape-median baseline a model must beat to explain anything per request
    (docs/physics.md section 6)."""
    lines = []
    for trace, deployment, implausible, outliers, factors, errors in calibrated:
        lines.append(f"- {trace}, fitted on {deployment}:")
        lines += [f"  IMPLAUSIBLE: {reason}" for reason in (implausible or "").splitlines()]
        lines += [f"  outliers: {sentence}" for sentence in (outliers or "").splitlines()]
        lines.append("  " + ", ".join(f"{f['parameter']} {f['before']:.4g} → {f['after']:.4g}"
                                      for f in factors))
        lines += [_held_out_line(e) for e in errors or ()]
    return lines


def _print_calibration(calibrated: list[tuple], *, figures: bool) -> None:
    """The calibration section, when it has run; `figures`: the fleet figures follow it (they
    keep the catalog's factors, which it says), not so for a warehouse without report tables."""
    if not calibrated:
        return
    print(f"\n== Calibration on observed latencies: {len(calibrated)} trace(s) ==")
    print("\n".join(_calibration_lines(calibrated)))
    kept = "; the figures below keep the catalog's factors" if figures else ""
    print(f"(catalog → fitted{kept}. Per shape: FROM calibration_errors)")


def _added_since(ingested: set[str], failed: set[str]) -> list[Path]:
    """Trace files of the folder the warehouse mirrors that it neither holds nor names as failed:
    added since the last ingest. The folder is the one its files came from, not
    FLEETSPEND_TRACE_DIR, which a summary run by hand may not set (the default folder would
    hide every file of the real one) or may set to another folder (whose files would all be
    called missing): the summary describes the warehouse."""
    known = ingested | failed
    return [f for folder in sorted({Path(file).parent for file in known})
            for f in trace_files(folder) if str(f) not in known]


def _stale_since(ingested: Mapping[str, tuple[datetime, str]],
                 failed: set[str]) -> tuple[list[Path], list[Path]]:
    """Files the warehouse holds rows of that their folder no longer has (removed) or has with
    other content (changed), the failed ones aside (listed with their error): the figures below
    show the version ingested until the next run reads the folder again. Only a file modified
    after its rows were written is hashed: a file touched but not changed keeps its old rows and
    time (the ingest skips it by content), and is not called changed on every run after. A file
    whose whole folder is gone is not listed: the warehouse is being read away from its logs,
    and every file would be called removed."""
    removed, changed = [], []
    for file, (ingested_at, sha256) in sorted(ingested.items()):
        path = Path(file)
        if file in failed or not path.parent.is_dir():
            continue
        try:
            modified = path.stat().st_mtime
            if (ingested_at is not None and modified > ingested_at.timestamp()
                    and sha256_of(path) != sha256):
                changed.append(path)
        except FileNotFoundError:
            removed.append(path)
        except OSError:   # unreadable now (permissions, I/O): the next ingest names it as failed
            continue
    return removed, changed


def _print_summary(path: Path, tables: ReportTables, caveats: list[tuple[str, str]],
                   ingested: dict[str, tuple[datetime, str]], failed: list[tuple], incomplete: list[tuple],
                   duplicates: list[str], unserved: list[tuple], other_models: list[str],
                   calibrated: list[tuple], top: int, prices: list[tuple],
                   published: datetime) -> None:
    """The summary on stdout. It runs after `lacking` found every column it reads, so an error
    here is a bug of the summary, and it propagates as one. `prices`: rows of
    sql/report_prices.sql, the deployment replayed and its price, said as the report says them
    (text.deployment_sentence): every dollar below is GPU-hours at that price. `published`:
    when the warehouse file was published, so that figures read after a failed night are not
    taken for that night's."""
    if failed:
        print(f"\n== Trace files the last ingest could not read: {len(failed)} ==")
        print("\n".join(_failed_lines(failed)))
    unusable = [row for row in incomplete if row[2] == 0]   # rows_accepted: none in the figures
    rejected = [row for row in incomplete if row[2] > 0]
    if unusable:
        print(f"\n== Trace files with no row in the figures: {len(unusable)} ==")
        print("\n".join(_unusable_lines(unusable)))
        if any(rows_read for _, rows_read, *_ in unusable):   # a header alone rejected none
            print("(their rejected rows, with reasons: FROM rejected_requests WHERE source_file = ...)")
    if rejected:
        print(f"\n== Trace files with rows rejected: {len(rejected)} ==")
        print("\n".join(_rejected_lines(rejected)))
        print("(the figures below leave those rows out; each with its reason:"
              " FROM rejected_requests WHERE source_file = ...)")
    if duplicates:
        print(f"\n== Trace files counted more than once: {len(duplicates)} ==")
        print("\n".join(f"- {line}" for line in duplicates))
    if unserved:
        print(f"\n== Requests set aside, not replayed: {sum(n for _, n, *_ in unserved):,} ==")
        print("\n".join(f"- {trace}: {n:,} request(s), e.g. {request_id}, which {reason}"
                        for trace, n, request_id, reason in unserved))
        print("(the deployment their trace replays on cannot serve them; the figures below leave"
              " them out: FROM unserved_requests)")
    if other_models:
        # one line per trace and name: the same name in two traces is two lines
        print(f"\n== Priced as another model than the log names: {len(other_models)} trace and"
              f" name pair(s) ==")
        print("\n".join(f"- {line}" for line in other_models))
        print("(replay such a log on a deployment of the model it names: its sidecar's"
              " \"deployment\", FLEETSPEND_DEPLOYMENT, or the replay config's deployment)")
    failed_files = {file for file, *_ in failed}
    missing = _added_since(set(ingested), failed_files)
    if missing:
        folders = ", ".join(sorted({str(f.parent) for f in missing}))
        print(f"\n== Not in the warehouse yet: {len(missing)} file(s) of {folders} ==\n"
              f"{', '.join(f.name for f in missing)}\n(added since the last ingest; the next run"
              f" reads them)")
    removed, changed = _stale_since(ingested, failed_files)
    if changed:
        print(f"\n== Changed since the last ingest: {len(changed)} file(s) ==\n"
              f"{', '.join(str(f) for f in changed)}\n(the figures below show the version ingested;"
              f" the next run reads them again)")
    if removed:
        print(f"\n== Gone from the folder: {len(removed)} file(s) ==\n"
              f"{', '.join(str(f) for f in removed)}\n(the figures below still hold their rows;"
              f" the next run removes them)")
    unread = [f for folder in sorted({Path(file).parent for file in ingested})
              for f in unread_files(folder)]
    if unread:
        print(f"\n== Never read: {len(unread)} file(s) or folder(s): {UNREAD_KINDS} ==\n"
              f"{', '.join(f'{f}{folder_mark(f)}' for f in unread)}")
    if caveats:
        print("\n== Physics caveats (docs/physics.md section 5) ==")
        print("\n".join(f"- {text}" for _, text in caveats))
    _print_calibration(calibrated, figures=True)
    print("\n== Fleet summary ==")
    if prices:
        print(deployment_sentence(", ".join(name for name, *_ in prices), prices))
    print("\n".join(f"- {line}" for line in fleet_lines(tables)))
    print(f"\n== Top {top} request shapes by share of spend ==")
    print(markdown_table(tables.shape_spend.sort("rank").head(top), SHAPES_SHOWN))
    print(STAGES_NOTE + SPEND_NOTE)   # the summary's table has no `bound` column
    print("\n== What-if replays (all shapes) ==")
    scenarios, skipped = what_if_scenarios(tables.what_if)
    if scenarios.height:
        print(markdown_table(what_if_table(scenarios, WHAT_IFS_SHOWN), WHAT_IFS_SHOWN))
        print(what_if_note(tables.what_if, tables.fleet_summary))
        shape_sign = shape_sign_note(tables.what_if)
        if shape_sign:
            print(shape_sign)
    else:
        print(NO_WHAT_IF)
    if skipped:
        print(f"{SKIPPED_INTRO}\n" + "\n".join(f"- {line}" for line in skipped))
    _print_chargeback(tables)
    print("\n" + headline(tables))
    reports = settings.reports_dir()
    # quoted for the shell, so the line runs as pasted where a folder's name has a space or a quote
    command = shlex.join([str(Path(sys.executable).with_name("duckdb")), "-readonly", str(path),
                          "FROM shape_spend LIMIT 5"])
    print(f"\nWarehouse: {path}, published {published:%Y-%m-%d %H:%M} UTC by the last run that"
          f" succeeded (a run that fails publishes nothing)\n  query it: {command}")
    print(f"Reports:   {reports / 'report.html'}, {reports / 'report.md'} (charts beside them)")


def _print_chargeback(tables: ReportTables) -> None:
    """The top rows of the chargeback (busy-GPU spend by model and by tenant) and what it leaves
    out: whoever splits the bill by team read it only in the report. Nothing when the traces
    name no model or tenant (the report says so; here it would be a line of no figures)."""
    if not tables.chargeback.height:
        return
    top = (tables.chargeback.sort(["dimension", "spend_usd", "value"], descending=[False, True, False])
           .filter(pl.int_range(pl.len()).over("dimension") < CHARGEBACK_ROWS))
    print(f"\n== Chargeback: busy-GPU spend by model and tenant (top {CHARGEBACK_ROWS} of each) ==")
    print(markdown_table(top, CHARGEBACK_COLUMNS))
    print(chargeback_note(tables.chargeback, tables.fleet_summary))


def run(argv: list[str] | None = None) -> int:
    """`main`, for the command line. It takes no argument, but `--help` printed the whole
    summary and a mistyped option was ignored: argparse answers both (usage, exit 0 or 2)
    before the warehouse is opened. A reader that stops early (`| head`, a pager quit) closes
    the pipe, which is no error of the summary and printed a BrokenPipeError traceback. As the
    Python docs advise, stdout is pointed at devnull so the exit's flush fails no more."""
    argparse.ArgumentParser(
        prog="python -m pipelines.summary",
        description="Print, read-only, the summary of the warehouse the last run published"
                    " (FLEETSPEND_WAREHOUSE, default data/warehouse/fleetspend.duckdb): the trace"
                    " files it could not read or left rows out of, the physics caveats, the"
                    " calibration, the fleet's figures, the top request shapes, the what-if"
                    " replays and the chargeback. It takes no arguments; exit 1 where there is"
                    " nothing to summarize.").parse_args(argv)
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(run())
