"""The ingest assets and inbox sensor: per-file, idempotent by content hash, a bad file fails
alone, and the per-file balance check."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from dagster_duckdb import DuckDBResource
from polars.testing import assert_frame_equal

from pipelines import ingest_folder, ingest_store
from pipelines.defs.ingest import assets as ingest_assets
from pipelines.defs.ingest import checks as ingest_checks
from pipelines.defs.ingest import sensors as ingest_sensors
from pipelines.defs.ingest.sensors import trace_inbox_sensor
from pipelines.formats import rows
from pipelines.formats.common import READER_VERSION
from pipelines.formats.source import trace_files
from pipelines.ingest_store import ensure_tables
from pipelines.warehouse import run_sql

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def ingest(warehouse: Path) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        [ingest_assets.ingested_traces, ingest_checks.rows_read_equal_accepted_plus_rejected],
        resources={"duckdb": DuckDBResource(database=str(warehouse))},
    )
    assert result.success
    return result


def files_metadata(result) -> dict:
    mats = [m for m in result.asset_materializations_for_node("ingested_traces")
            if m.asset_key.to_user_string() == "trace_files"]
    return {k: v.value for k, v in mats[0].metadata.items()}


def query(warehouse: Path, sql: str):
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_incremental_idempotent_and_a_bad_file_fails_alone(inbox, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_code.csv", inbox)
    shutil.copy(PUBLIC / "mooncake_conversation.excerpt.jsonl", inbox)
    (inbox / "broken.csv").write_bytes(bytes(range(256)) * 8)
    (inbox / "README.md").write_text("not a trace, not even looked at")

    first = ingest(warehouse)
    meta = files_metadata(first)
    assert meta["files_ingested_this_run"] == 2
    assert list(meta["files_failed"]) == ["broken.csv"]
    assert "broken.csv: binary data" in meta["files_failed"]["broken.csv"]
    assert query(warehouse, "SELECT count(*), count(DISTINCT trace) FROM requests") == [(8819 + 14, 2)]
    assert query(warehouse, "SELECT prefix_block_tokens, exact_duplicates FROM trace_files WHERE format = 'mooncake'") \
        == [(512, 1)]
    checks = {e.check_name: e for e in first.get_asset_check_evaluations()}
    assert checks["rows_read_equal_accepted_plus_rejected"].passed
    assert checks["rows_read_equal_accepted_plus_rejected"].description is None
    assert checks["rows_read_equal_accepted_plus_rejected"].metadata["files"].value == 2
    assert not checks["every_trace_file_ingested"].passed
    assert checks["every_trace_file_ingested"].metadata["failed_files"].value == ["broken.csv"]
    listed = checks["every_trace_file_ingested"].metadata["reasons"].value
    assert listed.startswith(f"- {inbox / 'broken.csv'}: binary data") and listed.count("broken.csv") == 1

    again = ingest(warehouse)                       # same files: nothing read, nothing changed
    assert files_metadata(again)["files_ingested_this_run"] == 0
    assert query(warehouse, "SELECT count(*) FROM requests") == [(8819 + 14,)]

    (inbox / "broken.csv").unlink()                 # fixed inbox: a new file adds only its rows
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_conv.csv", inbox)
    third = ingest(warehouse)
    assert all(e.passed for e in third.get_asset_check_evaluations())
    assert files_metadata(third)["files_ingested_this_run"] == 1
    assert files_metadata(third)["files_failed"] == {}
    assert query(warehouse, "SELECT count(*) FROM requests") == [(8819 + 14 + 19366,)]

    (inbox / "mooncake_conversation.excerpt.jsonl").unlink()   # the warehouse mirrors the folder
    assert files_metadata(ingest(warehouse))["files_removed_this_run"] == [
        str(inbox / "mooncake_conversation.excerpt.jsonl")]
    assert query(warehouse, "SELECT count(*), count(*) FILTER (prefix_hashes IS NOT NULL) FROM requests") \
        == [(8819 + 19366, 0)]
    assert query(warehouse, "SELECT count(*) FROM trace_files") == [(2,)]


def test_a_log_whose_file_name_is_not_utf8_fails_alone(inbox, tmp_path):
    """A name in another system's encoding (Latin-1 `café.csv` from an archive made on Windows)
    is bytes Python holds as surrogates, which Polars' scan and DuckDB take no text of: the
    whole folder's ingest failed with a TypeError. It fails alone, named as it can be shown,
    and the folder's other logs ingest."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    latin1 = os.path.join(os.fsencode(inbox), b"caf\xe9.csv")
    try:
        shutil.copyfile(PUBLIC / "vidur_splitwise_code.excerpt.csv", latin1)
    except OSError:
        pytest.skip("this file system takes only UTF-8 names")
    shown = f"{inbox}/caf\\xe9.csv"
    check = [e for e in ingest(warehouse).get_asset_check_evaluations()
             if e.check_name == "every_trace_file_ingested"][0]
    assert check.metadata["reasons"].value == (
        f"- {shown}: its file name is not UTF-8 text (a name in another encoding, e.g. from an archive"
        f" made on Windows); expected a UTF-8 name: rename the file")
    assert query(warehouse, "SELECT trace FROM trace_files") == [("vidur_splitwise_code.excerpt",)]
    assert query(warehouse, "SELECT file FROM failed_trace_files") == [(shown,)]


def test_calibration_tables_exist_empty_before_calibration_runs(inbox, tmp_path):
    """The ingest (every run's first step) creates the calibration tables and the view
    calibration_requests, so SQL against them works, with no rows, before the on-demand
    calibration first runs (the samples carry no observed latencies: the view is empty too)."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    ingest(warehouse)
    for name in ("calibration", "calibration_errors", "calibration_requests"):
        assert query(warehouse, f"SELECT count(*) FROM {name}") == [(0,)]
    assert query(warehouse, "SELECT column_name FROM information_schema.columns"
                            " WHERE table_name = 'calibration' ORDER BY ordinal_position") == [
        ("trace",), ("deployment",), ("parameter",), ("before",), ("after",), ("at_bound",),
        ("implausible",), ("outliers",)]


def test_changed_file_is_replaced_not_added(inbox, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    path = inbox / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.0000000,5,1\n"
                    "2023-11-16 18:17:04.0000000,x,1\n")
    ingest(warehouse)
    assert query(warehouse, "SELECT count(*) FROM rejected_requests") == [(1,)]
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.0000000,5,1\n"
                    "2023-11-16 18:17:04.0000000,6,1\n")
    ingest(warehouse)
    assert query(warehouse, "SELECT count(*) FROM requests") == [(2,)]
    assert query(warehouse, "SELECT count(*) FROM rejected_requests") == [(0,)]
    assert query(warehouse, "SELECT rows_read, rows_accepted FROM trace_files") == [(2, 2)]


def test_same_trace_name_twice_fails_the_second_file_only(inbox, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox / "t.csv")
    shutil.copy(PUBLIC / "mooncake_conversation.excerpt.jsonl", inbox / "t.jsonl")
    meta = files_metadata(ingest(warehouse))
    assert list(meta["files_failed"]) == ["t.jsonl"] and "rename one" in meta["files_failed"]["t.jsonl"]
    assert query(warehouse, "SELECT count(*) FROM requests") == [(20,)]


def test_every_pass_logs_what_it_found_in_the_folder(inbox, tmp_path):
    """A night with nothing new reads no file and logged nothing of the ingest: one line says
    how many files the folder holds and what became of them."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    (inbox / "broken.csv").write_bytes(bytes(range(256)))
    (inbox / "gone.csv").write_text((PUBLIC / "vidur_splitwise_code.excerpt.csv").read_text())
    ingest(warehouse)
    (inbox / "gone.csv").unlink()
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([ingest_assets.ingested_traces], instance=instance,
                                resources={"duckdb": DuckDBResource(database=str(warehouse))})
        lines = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert f"{inbox}: 2 trace file(s): 0 read, 1 unchanged since they were ingested, 1 failed;" \
           f" 1 removed from the folder" in lines


def test_files_the_ingest_passes_over_are_named(inbox, tmp_path):
    """A log compressed with bzip2, or named .tsv, is not a trace file name: it was passed over
    in silence, run after run; so were a subfolder of logs (the ingest does not descend) and a
    sidecar misnamed for its log (its options never applied: an LLMPerf log replayed with one
    client instead of its concurrency). The ingest's log names them (READMEs, the sidecars of
    logs in the folder and hidden files are expected there and not named)."""
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    for name in ("day2.csv.bz2", "team.tsv", "README.md", ".partial.csv",
                 "vidur_splitwise_code.excerpt.csv.fleetspend.json", "t.fleetspend.json"):
        (inbox / name).write_text("{}" if name.endswith(".json") else "x")
    (inbox / "2026-11-30").mkdir()
    (inbox / ".cache").mkdir()
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([ingest_assets.ingested_traces], instance=instance,
                                resources={"duckdb": DuckDBResource(database=str(tmp_path / "w.duckdb"))})
        lines = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert (f"{inbox}: not read, not named as a trace file (*.csv, *.jsonl, *.json, *.parquet,"
            f" optionally .gz/.zst), a subfolder (not descended into), or a sidecar of no log in"
            f" the folder: 2026-11-30/, day2.csv.bz2, t.fleetspend.json, team.tsv") in lines


def test_a_log_uploaded_twice_under_two_names_is_named(inbox, tmp_path):
    """Two names, one content: each file is a trace of its own, so the log's requests and spend
    counted twice in every figure, silently. The ingest warns, naming both (empty logs aside)."""
    log = inbox / "day1.csv"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", log)
    shutil.copy(log, inbox / "day1 (1).csv")
    for name in ("a.csv", "b.csv"):   # two header-only logs: the same content, and no cost
        (inbox / name).write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n")
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([ingest_assets.ingested_traces], instance=instance,
                                resources={"duckdb": DuckDBResource(database=str(tmp_path / "w.duckdb"))})
        lines = [entry.user_message for entry in instance.all_logs(result.run_id)]
    named = [line for line in lines if "the same content" in line]
    assert len(named) == 1 and named[0].startswith(f"{inbox / 'day1 (1).csv'}, {log}: the same")
    assert named[0].endswith("rows): each is replayed as a trace of its own, so its requests and"
                             " spend count 2 times; remove the copies")


def test_a_log_uploaded_again_gzipped_or_with_other_line_endings_is_named(inbox, tmp_path):
    """A gzipped copy, or one saved with CRLF endings, has other bytes (another sha256) and the
    same requests: each counted in every figure again, and the warning, which compared hashes of
    the files as stored, said nothing. Its requests are what is compared."""
    log = inbox / "day1.csv"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", log)
    (inbox / "day1-archive.csv.gz").write_bytes(gzip.compress(log.read_bytes()))
    (inbox / "day1-crlf.csv").write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    (inbox / "other.csv").write_text("".join(log.read_text().splitlines(keepends=True)[:-1]))  # a row fewer
    shutil.copy(log, inbox / "dated.csv")   # the same bytes read into other requests: still a copy
    (inbox / "dated.csv.fleetspend.json").write_text('{"start_time": "2026-11-30T00:00:00Z"}')
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([ingest_assets.ingested_traces], instance=instance,
                                resources={"duckdb": DuckDBResource(database=str(tmp_path / "w.duckdb"))})
        lines = [entry.user_message for entry in instance.all_logs(result.run_id)]
    named = [line for line in lines if "the same" in line]
    assert len(named) == 2 and named[1].startswith(
        f"{inbox / 'day1-archive.csv.gz'}, {inbox / 'day1-crlf.csv'}, {log}: the same requests (in files of"
        f" other bytes: compressed, reordered or saved again, ")
    assert named[1].endswith("so its requests and spend count 3 times; remove the copies")
    assert named[0].startswith(f"{inbox / 'dated.csv'}, {log}: the same content (sha256 ")


def test_inbox_sensor_requests_runs_for_new_or_changed_files(inbox):
    context = dg.build_sensor_context(cursor=None)
    assert isinstance(trace_inbox_sensor(context), dg.SkipReason)

    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    context = dg.build_sensor_context(cursor=context.cursor)
    request = trace_inbox_sensor(context)
    assert isinstance(request, dg.RunRequest) and request.tags["fleetspend/new_trace_files"] == "1"

    context = dg.build_sensor_context(cursor=context.cursor)
    skip = trace_inbox_sensor(context)
    assert isinstance(skip, dg.SkipReason) and str(inbox) in skip.skip_message

    shutil.copy(PUBLIC / "mooncake_conversation.excerpt.jsonl", inbox)
    (inbox / "notes.txt").write_text("ignored")
    context = dg.build_sensor_context(cursor=context.cursor)
    second = trace_inbox_sensor(context)
    assert isinstance(second, dg.RunRequest) and second.tags["fleetspend/new_trace_files"] == "1"
    assert second.run_key != request.run_key


def test_inbox_sensor_waits_for_a_file_being_uploaded(inbox, monkeypatch):
    """A log copied in over four ticks asked for four runs, each ingesting part of it and
    waiting on the warehouse for the one before; now one, once it has stopped changing."""
    monkeypatch.setattr(ingest_sensors, "SETTLE_S", 60.0)
    lines = (ROOT / "data" / "samples" / "AzureLLMInferenceTrace_code.csv").read_text().splitlines(keepends=True)
    log = inbox / "AzureLLMInferenceTrace_code.csv"
    cursor = None
    for start, end in ((0, 1000), (1000, 3000), (3000, 6000), (6000, len(lines))):
        with log.open("a") as upload:
            upload.write("".join(lines[start:end]))
        context = dg.build_sensor_context(cursor=cursor)
        skip = trace_inbox_sensor(context)
        cursor = context.cursor
        assert isinstance(skip, dg.SkipReason)
        assert skip.skip_message == (f"still being written (changed in the last 60 s): {log}; a run "
                                     f"is asked for once it stops changing")
    os.utime(log, (time.time() - 61, time.time() - 61))
    context = dg.build_sensor_context(cursor=cursor)
    request = trace_inbox_sensor(context)
    assert isinstance(request, dg.RunRequest) and request.tags["fleetspend/new_trace_files"] == "1"
    assert isinstance(trace_inbox_sensor(dg.build_sensor_context(cursor=context.cursor)), dg.SkipReason)


def test_inbox_sensor_takes_a_file_dated_in_the_future_as_written(inbox, monkeypatch):
    """A log dated a year ahead (unpacked from an archive made on a fast clock) was 'still being
    written' at every tick until that date: the sensor never asked for its run."""
    monkeypatch.setattr(ingest_sensors, "SETTLE_S", 60.0)
    log = inbox / "AzureLLMInferenceTrace_code.csv"
    shutil.copy(ROOT / "data" / "samples" / "AzureLLMInferenceTrace_code.csv", log)
    next_year = time.time() + 365 * 86_400
    os.utime(log, (next_year, next_year))
    request = trace_inbox_sensor(dg.build_sensor_context())
    assert isinstance(request, dg.RunRequest) and request.tags["fleetspend/new_trace_files"] == "1"


def test_inbox_sensor_requests_a_run_when_a_file_is_removed(inbox):
    """Removing a file (a bad upload) asks for the run that drops its rows and its failed
    entry; moving it back in, with its size and mtime, asks again under a new run key (Dagster
    skips a request whose key it has seen, which would leave the file out until the nightly)."""
    (inbox / "bad.csv").write_bytes(bytes(range(256)))
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    first = dg.build_sensor_context(cursor=None)
    request = trace_inbox_sensor(first)
    assert isinstance(request, dg.RunRequest)
    moved = (inbox / "bad.csv").rename(inbox.parent / "bad.csv")
    gone = dg.SensorEvaluationContext(instance_ref=None, cursor=first.cursor,
                                      last_run_key=request.run_key)
    removal = trace_inbox_sensor(gone)
    assert isinstance(removal, dg.RunRequest)
    assert removal.tags["fleetspend/removed_trace_files"] == "1"
    assert removal.tags["fleetspend/new_trace_files"] == "0"
    moved.rename(inbox / "bad.csv")
    back = dg.SensorEvaluationContext(instance_ref=None, cursor=gone.cursor,
                                      last_run_key=removal.run_key)
    again = trace_inbox_sensor(back)
    assert isinstance(again, dg.RunRequest) and again.tags["fleetspend/new_trace_files"] == "1"
    assert again.run_key not in (request.run_key, removal.run_key)


def test_inbox_sensor_names_a_missing_folder_and_keeps_its_cursor(inbox):
    """A trace folder that is not there (mistyped, unmounted) is named as such, not reported as
    holding no new files, and what the sensor knew of its files is kept for its return."""
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    context = dg.build_sensor_context(cursor=None)
    assert isinstance(trace_inbox_sensor(context), dg.RunRequest)
    moved = inbox.rename(inbox.with_name("elsewhere"))
    missing = dg.build_sensor_context(cursor=context.cursor)
    skip = trace_inbox_sensor(missing)
    assert isinstance(skip, dg.SkipReason)
    assert skip.skip_message.startswith(f"FLEETSPEND_TRACE_DIR={inbox}: no such folder")
    assert missing.cursor == context.cursor
    moved.rename(inbox)
    assert isinstance(trace_inbox_sensor(dg.build_sensor_context(cursor=missing.cursor)), dg.SkipReason)


def test_inbox_sensor_skips_a_run_the_preflight_refuses_until_it_is_fixed(inbox, monkeypatch):
    """A file arriving under a bad setting is skipped with the preflight's message, as a nightly
    tick is, not a run that fails; it asks again once the setting is fixed."""
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "no-such-fleet")
    context = dg.build_sensor_context(cursor=None)
    skip = trace_inbox_sensor(context)
    assert isinstance(skip, dg.SkipReason) and "FLEETSPEND_DEPLOYMENT='no-such-fleet'" in skip.skip_message
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT")
    context = dg.build_sensor_context(cursor=context.cursor)
    request = trace_inbox_sensor(context)
    assert isinstance(request, dg.RunRequest) and request.tags["fleetspend/new_trace_files"] == "1"


def test_inbox_sensor_ignores_a_file_removed_while_listing(inbox, monkeypatch):
    """A file listed, then removed before its stat, is not in the folder: no run for it."""
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    listed = ingest_sensors.trace_files(inbox)
    monkeypatch.setattr(ingest_sensors, "trace_files", lambda folder: [*listed, folder / "gone.csv"])
    context = dg.build_sensor_context(cursor=None)
    request = trace_inbox_sensor(context)
    assert isinstance(request, dg.RunRequest) and request.tags["fleetspend/new_trace_files"] == "1"
    assert list(json.loads(context.cursor)) == [str(listed[0])]


def _calibrated(conn, traces: list[str]) -> None:
    """Calibration rows of `traces`, keyed by trace as the calibration asset writes them, in
    tables of the declared columns (the ingest would drop others as an older release's)."""
    for table, step in ingest_store.CALIBRATION_TABLE_SQL.items():
        run_sql(conn, step)
        conn.execute(f"INSERT INTO {table} BY NAME SELECT unnest($1) AS trace", [traces])


@pytest.mark.parametrize("failing_step", ["ingest_delete_file", "calibration_errors_delete_trace"])
def test_forget_file_rolls_back_when_a_delete_fails(tmp_path, monkeypatch, failing_step):
    """A failing delete leaves the ingest and calibration tables as they were and no transaction
    open."""
    from pipelines.formats import read_trace

    result = read_trace(PUBLIC / "vidur_splitwise_code.excerpt.csv")
    real = ingest_store.run_sql

    def failing(conn, step, params=None):
        if step == failing_step:
            raise duckdb.IOException("disk went away")
        return real(conn, step, params)

    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ingest_store.ensure_tables(conn)
        ingest_store.replace_file(conn, result, None)
        _calibrated(conn, [result.trace])
        monkeypatch.setattr(ingest_store, "run_sql", failing)
        with pytest.raises(duckdb.IOException):
            ingest_store.forget_file(conn, str(result.file), result.trace)
        assert conn.execute("SELECT count(*) FROM requests").fetchall() == [(result.rows.height,)]
        for table in ("calibration", "calibration_errors"):
            assert conn.execute(f"SELECT trace FROM {table}").fetchall() == [(result.trace,)]
        conn.execute("BEGIN TRANSACTION")   # none left open
        conn.execute("ROLLBACK")


def test_calibration_rows_go_with_their_trace(inbox, tmp_path):
    """Calibration ran on traces a, b and c; then b's file changed and c's left the folder: the
    ingest removes their calibration rows with their requests (the warehouse mirrors the folder,
    and those fits describe rows it no longer holds), keeps a's, and says so: each file's log
    line counts the calibration rows that went, and the trace_files metadata the total."""
    for name in ("a", "b", "c"):
        shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox / f"{name}.csv")
    warehouse = tmp_path / "w.duckdb"
    assert files_metadata(ingest(warehouse))["calibration_rows_removed_this_run"] == 0
    with duckdb.connect(str(warehouse)) as conn:
        _calibrated(conn, ["a", "b", "c"])
    lines = (inbox / "b.csv").read_text().splitlines(keepends=True)
    (inbox / "b.csv").write_text("".join(lines[:10]))
    (inbox / "c.csv").unlink()
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([ingest_assets.ingested_traces], instance=instance,
                                resources={"duckdb": DuckDBResource(database=str(warehouse))})
        log = [entry.user_message for entry in instance.all_logs(result.run_id)]
    meta = files_metadata(result)
    assert meta["files_ingested_this_run"] == 1 and meta["files_removed_this_run"] == [str(inbox / "c.csv")]
    assert meta["calibration_rows_removed_this_run"] == 4
    note = "; its trace's 2 calibration rows (calibration, calibration_errors) were removed"
    assert f"{inbox / 'c.csv'}: no longer in the folder; its rows were removed{note}" in log
    assert f"b.csv: vidur, 9 rows read, 9 accepted, 0 rejected{note}" in log
    for table in ("calibration", "calibration_errors"):
        assert query(warehouse, f"SELECT trace FROM {table}") == [("a",)]


def test_requests_preview_leaves_out_prefix_hashes(inbox, tmp_path):
    shutil.copy(PUBLIC / "mooncake_conversation.excerpt.jsonl", inbox)
    mats = {m.asset_key.to_user_string(): m.metadata for m in
            ingest(tmp_path / "w.duckdb").asset_materializations_for_node("ingested_traces")}
    assert mats["requests"]["dagster/row_count"].value == 14
    preview = mats["requests"]["preview"].value
    assert "prefix_hashes" not in preview and "prompt_tokens" in preview


@pytest.mark.parametrize("name", ["mooncake_conversation.excerpt.jsonl", "aibrix_output.jsonl",
                                  "vidur_splitwise_code.excerpt.csv"])
def test_warehouse_rows_equal_read_trace(tmp_path, name):
    """The warehouse write (DuckDB fills defaults, request_id is virtual) is the canonical frame."""
    from pipelines.ingest_store import ensure_tables, replace_file
    from pipelines.formats import read_trace

    result = read_trace(PUBLIC / name)
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_tables(conn)
        replace_file(conn, result, None)
        stored = conn.sql("FROM requests ORDER BY arrival_s, line").pl()
    assert stored["line"].to_list() == [int(i.rsplit(":", 1)[1]) for i in result.requests["request_id"]]
    assert_frame_equal(stored.drop("line").with_columns(pl.col("arrival_ts").dt.convert_time_zone("UTC")),
                       result.requests)


def test_warehouse_of_an_older_release_is_rebuilt(inbox, tmp_path):
    """Tables written by the first release (no `line`, fewer trace_files columns) are replaced,
    and the calibration fitted on their rows goes with them (here of a trace no longer there)."""
    warehouse = tmp_path / "w.duckdb"
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("CREATE TABLE requests AS SELECT 'old:2' AS request_id, 'old' AS trace")
        conn.execute("CREATE TABLE trace_files AS SELECT 'old.csv' AS file, 'old' AS trace, 'x' AS sha256")
        conn.execute("CREATE TABLE rejected_requests AS SELECT 'old.csv' AS source_file")
        _calibrated(conn, ["old"])
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    ingest(warehouse)
    assert query(warehouse, "SELECT count(*), min(trace) FROM requests") == [(20, "vidur_splitwise_code.excerpt")]
    assert query(warehouse, "SELECT (SELECT count(*) FROM calibration), count(*) FROM calibration_errors") \
        == [(0, 0)]


def test_a_rebuild_of_an_older_release_s_tables_is_said_and_its_calibration_rows_counted(
        inbox, tmp_path):
    """The first run of a release whose ingest tables have other columns drops and recreates
    them, the calibration tables with them: a warehouse's fits went without a word (the run log
    said only that every file was read, calibration_rows_removed_this_run said 0). One warning
    names the tables and the calibration rows gone, which the metadata counts."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    ingest(warehouse)
    with duckdb.connect(str(warehouse)) as conn:
        _calibrated(conn, ["vidur_splitwise_code.excerpt"])   # a row in each calibration table
        conn.execute("ALTER TABLE trace_files DROP COLUMN reader_version")   # an older release's
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([ingest_assets.ingested_traces], instance=instance,
                                resources={"duckdb": DuckDBResource(database=str(warehouse))})
        lines = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert ("tables an older release wrote with other columns were dropped and created anew"
            " (requests, rejected_requests, trace_files, failed_trace_files, calibration,"
            " calibration_errors): every trace file is read again, and the 2 calibration rows"
            " they held are gone: materialize the calibration again") in lines
    meta = files_metadata(result)
    assert (meta["files_ingested_this_run"], meta["calibration_rows_removed_this_run"]) == (1, 2)


def test_calibration_tables_of_an_older_shape_are_recreated_empty(inbox, tmp_path):
    """CREATE TABLE IF NOT EXISTS would keep a calibration table of an older release's columns:
    the ingest drops it and creates it as sql/calibration_table.sql declares it now. A current
    one keeps its rows, and the ingest tables (current too) are not rebuilt."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    ingest(warehouse)
    trace = "vidur_splitwise_code.excerpt"
    with duckdb.connect(str(warehouse)) as conn:
        _calibrated(conn, [trace])
        conn.execute("CREATE OR REPLACE TABLE calibration AS"
                     " SELECT $1 AS trace, 'compute_efficiency' AS factor, 0.5 AS value", [trace])
    again = ingest(warehouse)
    assert files_metadata(again)["files_ingested_this_run"] == 0
    assert query(warehouse, "SELECT count(*) FROM calibration") == [(0,)]
    assert [c for (c,) in query(warehouse, "SELECT column_name FROM information_schema.columns"
                                           " WHERE table_name = 'calibration'")] == [
        "trace", "deployment", "parameter", "before", "after", "at_bound", "implausible", "outliers"]
    assert query(warehouse, "SELECT trace FROM calibration_errors") == [(trace,)]


def test_balance_check_fails_when_a_row_goes_missing(inbox, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    ingest(warehouse)
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("DELETE FROM requests WHERE line = 5")
    result = ingest_checks.rows_read_equal_accepted_plus_rejected(duckdb=DuckDBResource(database=str(warehouse)))
    assert not result.passed
    assert result.metadata["unbalanced_files"].value == [str(inbox / "vidur_splitwise_code.excerpt.csv")]
    assert "| 20 | 20 | 0 | 19 | 0 | NO |" in result.metadata["per_file"].value
    # a failed blocking check stops the run, which publishes nothing: its one line in the run
    # log says which file and which counts disagree, as the replay and report checks do
    assert result.description == (f"{inbox / 'vidur_splitwise_code.excerpt.csv'}: 20 rows read,"
                                  f" 20 accepted + 0 rejected, but requests holds 19 and"
                                  f" rejected_requests 0")


def test_an_unreadable_file_fails_alone(inbox, tmp_path, monkeypatch):
    """A file the run cannot open (permissions, an I/O error; simulated: CI runs as root, which
    reads any file) is one failed file with the reason, not a crash of the whole ingest."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_code.csv", inbox)
    shutil.copy(PUBLIC / "mooncake_conversation.excerpt.jsonl", inbox / "locked.jsonl")
    real = ingest_folder.sha256_of

    def sha256_of(path):
        if path.name == "locked.jsonl":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(ingest_folder, "sha256_of", sha256_of)
    meta = files_metadata(ingest(warehouse))
    assert meta["files_ingested_this_run"] == 1
    assert meta["files_failed"] == {"locked.jsonl": f"{inbox / 'locked.jsonl'}: cannot be read"
                                                    f" (Permission denied)"}
    assert query(warehouse, "SELECT count(*) FROM requests") == [(8819,)]


def test_ingest_folder_works_without_dagster(inbox, tmp_path):
    """The folder logic is plain DuckDB: what it read, failed and removed, and one log line a
    file, for any caller (the asset is wiring around it)."""
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_code.csv", inbox)
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_code.csv", inbox / "AzureLLMInferenceTrace_code.csv.gz")
    lines = []
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_tables(conn)
        first = ingest_folder.ingest_folder(conn, trace_files(inbox), lines.append)
        (inbox / "AzureLLMInferenceTrace_code.csv").unlink()
        second = ingest_folder.ingest_folder(conn, trace_files(inbox), lines.append)
    assert [row["trace"] for row in first.added] == ["AzureLLMInferenceTrace_code"]
    assert "is taken by" in first.failed[str(inbox / "AzureLLMInferenceTrace_code.csv.gz")]
    assert second.removed == [str(inbox / "AzureLLMInferenceTrace_code.csv")]
    assert lines[0] == "AzureLLMInferenceTrace_code.csv: azure-llm, 8819 rows read, 8819 accepted, 0 rejected"
    assert lines[1].endswith("no longer in the folder; its rows were removed")


def test_a_log_named_all_fails_alone_as_the_fleets_totals_name(inbox, tmp_path):
    """fleet_summary's row of all traces together is trace 'all', which what_if, the report and
    the summary pick out by name: a trace of that name was taken for the totals (the report's
    fleet cost was its alone) and summed into them again (every what-if's baseline fleet dollars
    doubled). The file fails alone, asking to be renamed; the other logs are read."""
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_code.csv", inbox / "all.csv")
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_code.csv", inbox)
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_tables(conn)
        outcome = ingest_folder.ingest_folder(conn, trace_files(inbox))
        traces = conn.execute("SELECT DISTINCT trace FROM requests").fetchall()
    assert [row["trace"] for row in outcome.added] == ["AzureLLMInferenceTrace_code"]
    assert traces == [("AzureLLMInferenceTrace_code",)]
    assert outcome.failed == {str(inbox / "all.csv"): (
        f"{inbox / 'all.csv'}: its trace name 'all' is the name of the fleet's totals"
        " (fleet_summary.trace = 'all'); rename the file")}


def test_failed_files_are_recorded_until_they_read_again_or_leave(inbox, tmp_path):
    """A file that ingested and then became unreadable keeps its rows, and failed_trace_files
    names it with its error beside the trace_files row (with its time) the reports still show;
    the next pass that reads it, or that finds it gone, clears it."""
    log = inbox / "t.csv"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", log)
    good = log.read_bytes()
    failures = "SELECT file, error FROM failed_trace_files"
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_tables(conn)
        ingest_folder.ingest_folder(conn, trace_files(inbox))
        assert conn.execute(failures).fetchall() == []
        (before,) = conn.execute("SELECT sha256, ingested_at FROM trace_files").fetchall()
        assert before[1] is not None

        log.write_bytes(bytes(range(256)) * 8)
        outcome = ingest_folder.ingest_folder(conn, trace_files(inbox))
        assert conn.execute(failures).fetchall() == [(str(log), outcome.failed[str(log)])]
        assert "binary data" in outcome.failed[str(log)]
        assert conn.execute("SELECT sha256, ingested_at FROM trace_files").fetchall() == [before]
        assert conn.execute("SELECT count(*) FROM requests").fetchall() == [(20,)]

        log.write_bytes(good)
        ingest_folder.ingest_folder(conn, trace_files(inbox))
        assert conn.execute(failures).fetchall() == []

        log.write_bytes(b"")
        ingest_folder.ingest_folder(conn, trace_files(inbox))
        assert [file for file, _ in conn.execute(failures).fetchall()] == [str(log)]
        log.unlink()
        ingest_folder.ingest_folder(conn, trace_files(inbox))
        assert conn.execute(failures).fetchall() == []
        assert conn.execute("SELECT count(*) FROM trace_files").fetchall() == [(0,)]


def test_an_unreadable_sidecar_is_named_not_its_log(inbox, tmp_path, monkeypatch):
    shutil.copy(SAMPLES / "AzureLLMInferenceTrace_code.csv", inbox)
    sidecar = inbox / "AzureLLMInferenceTrace_code.csv.fleetspend.json"

    def raw_options(path):
        raise PermissionError(13, "Permission denied", str(sidecar))

    monkeypatch.setattr(ingest_folder, "raw_options", raw_options)
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_tables(conn)
        outcome = ingest_folder.ingest_folder(conn, trace_files(inbox))
    assert outcome.failed == {str(inbox / "AzureLLMInferenceTrace_code.csv"):
                              f"{sidecar}: cannot be read (Permission denied)"}


def test_a_file_read_under_older_reader_rules_is_read_again(inbox, tmp_path, monkeypatch):
    """The content hash and options say a file is unchanged, not that today's readers would
    take the same rows from it: a 2024 arrival among 2023's, accepted before arrivals alone in
    time were rejected, kept pricing a year of idle fleet after the upgrade. A file whose
    trace_files row records an older reader version is read again; one of this version is not."""
    warehouse = tmp_path / "w.duckdb"
    lines = (SAMPLES / "AzureLLMInferenceTrace_code.csv").read_text().splitlines()[:201]
    lines[20] = "2024" + lines[20][4:]
    (inbox / "slipped.csv").write_text("\n".join(lines) + "\n")
    with monkeypatch.context() as older:   # the rules before arrivals alone in time
        older.setattr(rows, "_outlier_check", lambda arrivals, labels: None)
        ingest(warehouse)
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("UPDATE trace_files SET reader_version = $1", [READER_VERSION - 1])
    assert query(warehouse, "SELECT count(*) FROM requests") == [(200,)]
    assert files_metadata(ingest(warehouse))["files_ingested_this_run"] == 1
    assert query(warehouse, "SELECT count(*) FROM requests") == [(199,)]
    assert query(warehouse, "SELECT count(*) FROM rejected_requests") == [(1,)]
    assert files_metadata(ingest(warehouse))["files_ingested_this_run"] == 0


def test_a_generic_log_read_by_reader_version_3_is_read_again(inbox, tmp_path, monkeypatch):
    """Version 3 rejected a generic log's rows without a cached_tokens value; today's readers
    take them with 0 (and read +02 offsets, decimal commas and JSONL field names with spaces):
    a log ingested by version 3 must be read again, or its rows stay out of the figures."""
    from pipelines.formats import generic
    from pipelines.formats.common import whole_count

    warehouse = tmp_path / "w.duckdb"
    (inbox / "team.csv").write_text("ts,in,out,hit\n0,100,10,40\n1,100,10,\n")
    (inbox / "team.csv.fleetspend.json").write_text(json.dumps({
        "format": "csv", "time_unit": "s",
        "columns": {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out", "cached_tokens": "hit"}}))
    with monkeypatch.context() as older:   # version 3's rule: a count, or the row is rejected
        older.setattr(generic, "known_count", whole_count)
        ingest(warehouse)
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute("UPDATE trace_files SET reader_version = 3")
    assert query(warehouse, "SELECT count(*) FROM rejected_requests") == [(1,)]
    assert files_metadata(ingest(warehouse))["files_ingested_this_run"] == 1
    assert query(warehouse, "SELECT cached_tokens FROM requests ORDER BY arrival_s") == [(40,), (0,)]
    assert query(warehouse, "SELECT count(*) FROM rejected_requests") == [(0,)]


def test_the_failed_files_check_names_the_first_broken_file_in_its_description(tmp_path):
    """The UI shows a check's description on its page and in the run log: the failed
    every_trace_file_ingested had none, so it read only 'Failed' until one opened its metadata."""
    failed = {"z.csv": f"{tmp_path / 'z.csv'}: empty file", "broken.csv": f"{tmp_path / 'broken.csv'}:"
              f" binary data, not a text log"}
    result = ingest_assets._failed_files_check(tmp_path, 5, failed)
    assert not result.passed
    assert result.description == (f"2 of 5 trace file(s) could not be ingested (each in reasons),"
                                  f" first {tmp_path / 'broken.csv'}: binary data, not a text log")
    assert ingest_assets._failed_files_check(tmp_path, 5, {}).description is None
