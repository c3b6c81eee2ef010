"""Mirror a folder of trace files into the warehouse's ingest tables, one file at a time.

Incremental and idempotent, keyed by content: a file whose identity (content hash plus sidecar
options, pipelines/formats/sidecar.py, read under today's reader rules, READER_VERSION) is
already in trace_files is skipped; a new or changed
file has its rows swapped in (pipelines/ingest_store.py: one transaction per file); a file that
left the folder has its rows removed. A file that cannot be used (not a trace, bad options,
unreadable, a trace name another file holds or the fleet's totals', `all`) fails alone with its
reason and nothing of it is written: its previous rows, if any, stay, and failed_trace_files
names it with its reason until a pass reads it again (or it has left the folder). Plain DuckDB
and the formats layer; the ingest asset (pipelines/defs/ingest/assets.py) is wiring and
metadata around `ingest_folder`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipelines.formats import TraceFormatError, read_trace
from pipelines.formats.common import READER_VERSION, UnknownFormatError, sha256_of, trace_name
from pipelines.formats.sidecar import canonical, deployment_named, file_options, raw_options, sidecar_of
from pipelines.ingest_store import forget_file, ingested, record_failures, replace_file
from pipelines.roofline import Catalog, CatalogError, load_catalog
from pipelines.settings import reference_dir
from pipelines.warehouse import run_sql


# The `trace` of fleet_summary's row for all traces together (sql/fleet_summary.sql), which
# what_if, the report and the summary pick out by that name: a log named after it would be
# summed into the fleet's totals as if it were them, and the totals counted twice.
TOTALS_TRACE = "all"


@dataclass
class FolderIngest:
    """What one pass over the folder did: the trace_files rows of the files read this time,
    file path -> reason for those that failed, the files whose rows were removed, and how many
    calibration rows went with replaced or removed rows (a fit costs a calibration run)."""

    added: list[dict] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    calibration_rows_removed: int = 0


def ingest_folder(conn: duckdb.DuckDBPyConnection, files: list[Path],
                  log: Callable[[str], None] = lambda _: None) -> FolderIngest:
    """Bring the ingest tables in line with `files` (the folder's trace files, already listed)
    and record this pass's failures; `log` hears one line per file read or removed."""
    outcome = FolderIngest()
    known = ingested(conn)
    traces = {file: trace for file, (trace, *_) in known.items()}
    identity = {file: tuple(rest) for file, (_, *rest) in known.items()}
    present = {str(f) for f in files}
    for gone in sorted(set(known) - present):
        calibration = forget_file(conn, gone, traces[gone])
        outcome.removed.append(gone)
        outcome.calibration_rows_removed += calibration
        log(f"{gone}: no longer in the folder; its rows were removed{_calibration_note(calibration)}")
    claimed = {traces[f]: f for f in traces if f in present}
    catalog = functools.cache(lambda: load_catalog(reference_dir()))   # read once, if a sidecar needs it
    for file in files:
        if (shown := _not_utf8_name(file)) is not None:
            outcome.failed[shown] = (f"{shown}: its file name is not UTF-8 text (a name in another encoding,"
                                     f" e.g. from an archive made on Windows); expected a UTF-8 name:"
                                     f" rename the file")
            continue
        options: dict = {}
        try:
            options = raw_options(file)
            # before the identity check: a file ingested before this rule is named every pass
            if trace_name(file) == TOTALS_TRACE:
                outcome.failed[str(file)] = (f"{file}: its trace name {TOTALS_TRACE!r} is the name"
                                             f" of the fleet's totals (fleet_summary.trace ="
                                             f" {TOTALS_TRACE!r}); rename the file")
                continue
            if identity.get(str(file)) == (sha256_of(file), canonical(options), READER_VERSION):
                continue
            owner = claimed.get(trace_name(file))
            if owner not in (None, str(file)):
                outcome.failed[str(file)] = (f"{file}: its trace name {trace_name(file)!r} is taken"
                                             f" by {owner}; rename one")
                continue
            _check_deployment(file, options, catalog)
            result = read_trace(file, **file_options(file))
        except (TraceFormatError, ValueError) as exc:
            outcome.failed[str(file)] = _with_sidecar(str(exc), file, options, _options_can_fix(exc))
            continue
        except OSError as exc:  # unreadable (permissions, I/O): this file fails alone
            outcome.failed[str(file)] = (f"{exc.filename or file}: cannot be read"
                                         f" ({exc.strerror or exc})")
            continue
        calibration = replace_file(conn, result, traces.get(str(file)), canonical(options))
        claimed[result.trace] = str(file)
        outcome.added.append(result.file_row())
        outcome.calibration_rows_removed += calibration
        log(f"{file.name}: {result.format}, {result.rows_read} rows read, "
            f"{result.rows.height} accepted, {result.rejected.height} rejected"
            f"{_calibration_note(calibration)}")
    record_failures(conn, outcome.failed)
    return outcome


def _not_utf8_name(file: Path) -> str | None:
    """`file` as text that can be shown and stored (its other bytes written \\xe9), when its name
    is not UTF-8, else None. Python holds such a name's bytes as surrogates, which Polars' scan
    (a TypeError) and DuckDB take no text of: one such log failed the whole folder's ingest."""
    try:
        str(file).encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(file).decode("utf-8", "backslashreplace")
    return None


def _check_deployment(file: Path, options: dict, catalog: Callable[[], Catalog]) -> None:
    """A sidecar's `deployment` must name a deployments.csv row that builds: a log whose rows
    went in under a misspelt fleet would stop every later replay, so the log fails here alone,
    named with its sidecar, and is read again by the next pass (a row added to the catalog
    meanwhile lets it in). `catalog` is called only for a sidecar that names a deployment."""
    name = deployment_named(options)
    if name is not None and (problem := unusable_deployment(file, name, catalog)):
        raise ValueError(problem)


def unusable_deployment(log: Path, name: str, catalog: Callable[[], Catalog]) -> str | None:
    """Why the deployment `name` that `log`'s sidecar names cannot be replayed on (the catalog's
    words, after the sidecar's; `catalog` loads it), or None: the ingest fails such a log, the
    preflight notes it."""
    try:
        catalog().deployment(name)
    except CatalogError as exc:
        return f"{sidecar_of(log)}: key 'deployment' names a deployment the replay cannot use: {exc}"
    return None


def duplicate_lines(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """One line per set of ingested files with the same requests (sql/duplicate_trace_files.sql):
    each is a trace of its own, so a log uploaded twice under two names (or once more gzipped)
    doubles its requests and spend in every figure, and nothing else would say so. Not refused:
    which copy is the one to keep is the operator's call."""
    return [f"{', '.join(files)}: {_sameness(sha256)}, {rows:,} rows): each is replayed as a trace"
            f" of its own, so its requests and spend count {len(files)} times; remove the copies"
            for sha256, files, rows in run_sql(conn, "duplicate_trace_files").fetchall()]


def _sameness(sha256: str | None) -> str:
    """What the copies share: their bytes, or (compressed, reordered, saved again) their requests."""
    if sha256 is None:
        return "the same requests (in files of other bytes: compressed, reordered or saved again"
    return f"the same content (sha256 {sha256[:12]}..."


def _calibration_note(rows: int) -> str:
    """The end of a file's log line when its old rows took calibration rows with them (nothing
    when none did): the user learns a fit is gone before looking for it."""
    if not rows:
        return ""
    return f"; its trace's {rows:,} calibration rows (calibration, calibration_errors) were removed"


def _options_can_fix(exc: ValueError) -> bool:
    """Options would read the file: no format was recognised (format= and a column mapping), or
    the format needs an option (a plain ValueError: e.g. burstgpt-vllm's out_len_per_token)."""
    return isinstance(exc, UnknownFormatError) or not isinstance(exc, TraceFormatError)


def _with_sidecar(message: str, file: Path, options: dict, fixable: bool = False) -> str:
    """`message`, starting with the file it is about (an option's own check, e.g.
    `duplicates='rejct'`, names no file; the check's metadata and the summary list reasons by
    the file each starts with), pointing at the file's sidecar where its options came from one,
    or, when options would read it and it has none, at where they go: a folder has no format=
    to pass."""
    if not message.startswith(str(file)):
        message = f"{file}: {message}"
    sidecar = str(sidecar_of(file))
    if sidecar in message:
        return message
    if options:
        return f"{message} (options from {sidecar})"
    if fixable:
        return (f"{message} (the folder ingest takes read_trace options, format= included, from a "
                f"sidecar JSON object {sidecar}; README \"Per-file options\")")
    return message
