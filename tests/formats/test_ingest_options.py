"""Per-file options in folder ingest (sidecar `<file>.fleetspend.json`), part of a file's
identity, and the check that fails while a file of the folder cannot be ingested."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.ingest import assets as ingest_assets
from pipelines.defs.ingest.sensors import trace_inbox_sensor
from pipelines.formats import read_trace
from pipelines.formats.sidecar import OptionsError, file_options
from tests.public_traces import SHARED

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
GENERIC = "ts,in,out,team\n0.5,100,10,a\n2.0,200,20,b\n1.0,x,30,c\n"
MAPPING = {"format": "csv", "columns": {"arrival": "ts", "prompt_tokens": "in", "output_tokens": "out",
                                        "tenant": "team"}, "time_unit": "s"}


def ingest(warehouse: Path) -> dg.ExecuteInProcessResult:
    result = dg.materialize([ingest_assets.ingested_traces],
                            resources={"duckdb": DuckDBResource(database=str(warehouse))})
    assert result.success          # the check is not blocking: a bad file never fails the run
    return result


def check_of(result) -> dg.AssetCheckEvaluation:
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "every_trace_file_ingested"]
    return evaluation


def ingested_count(result) -> int:
    mats = [m for m in result.asset_materializations_for_node("ingested_traces")
            if m.asset_key.to_user_string() == "trace_files"]
    return mats[0].metadata["files_ingested_this_run"].value


def query(warehouse: Path, sql: str):
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def write_sidecar(log: Path, options) -> Path:
    sidecar = log.with_name(log.name + ".fleetspend.json")
    sidecar.write_text(json.dumps(options))
    return sidecar


def test_generic_csv_needs_a_sidecar_and_a_changed_sidecar_reingests(inbox, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    log = inbox / "team_log.csv"
    log.write_text(GENERIC)
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)

    first = ingest(warehouse)                              # no options: the generic log fails alone
    check = check_of(first)
    assert not check.passed
    assert check.metadata["failed_files"].value == ["team_log.csv"]
    assert check.metadata["files"].value == 2
    assert "team_log.csv" in check.metadata["reasons"].value and "cannot tell the log format" in \
        check.metadata["reasons"].value
    assert query(warehouse, "SELECT count(*) FROM requests") == [(20,)]

    write_sidecar(log, MAPPING)                            # options given: it ingests, the check passes
    second = ingest(warehouse)
    assert check_of(second).passed and check_of(second).metadata["failed_files"].value == []
    assert ingested_count(second) == 1
    assert query(warehouse, "SELECT arrival_s, prompt_tokens, tenant FROM requests WHERE trace = 'team_log' "
                            "ORDER BY arrival_s") == [(0.0, 100, "a"), (1.5, 200, "b")]
    assert query(warehouse, "SELECT rows_read, rows_accepted, rows_rejected, format, options FROM trace_files "
                            "WHERE trace = 'team_log'") == \
        [(3, 2, 1, "csv", json.dumps(MAPPING, sort_keys=True, separators=(",", ":")))]

    assert ingested_count(ingest(warehouse)) == 0          # same content, same options: skipped

    write_sidecar(log, {**MAPPING, "time_unit": "ms"})     # same content, new options: re-ingested
    fourth = ingest(warehouse)
    assert ingested_count(fourth) == 1
    assert query(warehouse, "SELECT max(arrival_s) FROM requests WHERE trace = 'team_log'") == [(0.0015,)]
    assert query(warehouse, "SELECT count(*) FROM requests") == [(22,)]
    assert query(warehouse, "SELECT count(*) FROM trace_files") == [(2,)]


def test_sidecar_options_equal_read_trace_options(inbox, tmp_path):
    """LLMPerf's client concurrency from a sidecar gives exactly read_trace(concurrency=5)."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "lepton_7b.json", inbox)
    write_sidecar(inbox / "lepton_7b.json", {"concurrency": 5, "failed": "reject"})
    ingest(warehouse)
    expected = read_trace(PUBLIC / "lepton_7b.json", concurrency=5, failed="reject")
    assert query(warehouse, "SELECT count(*), sum(arrival_s) FROM requests") == \
        [(expected.requests.height, pytest.approx(expected.requests["arrival_s"].sum()))]
    assert query(warehouse, "SELECT count(*) FROM rejected_requests") == [(expected.rejected.height,)]


@pytest.mark.parametrize(("options", "message"), [
    ({"concurency": 5}, "key 'concurency' is not an option of any format; did you mean"
                        " 'concurrency'? expected one of"),
    ({"format": "csv", "time_unt": "s"}, "key 'time_unt' is not an option of format 'csv'; did"
                                         " you mean 'time_unit'?"),
    ({"format": "csv", "concurrency": 5}, "key 'concurrency' is not an option of format 'csv'"),
    ({"format": "tsv"}, "key 'format' is 'tsv'; expected one of"),
    ({**MAPPING, "columns": ["ts", "in", "out"]}, "key 'columns' is ['ts', 'in', 'out']; expected a JSON object"),
    ({**MAPPING, "start_time": "yesterday"}, "key 'start_time' is 'yesterday'; expected an ISO 8601"),
    ({**MAPPING, "deployment": ""}, "key 'deployment' is ''; expected the name of the"
                                    " data/reference/deployments.csv row that served t.csv"),
    ({**MAPPING, "deployment": 7}, "key 'deployment' is 7; expected the name of"),
    ({**MAPPING, "deploymnet": "x"}, "key 'deploymnet' is not an option of format 'csv'; did you"
                                     " mean 'deployment'?"),
    (["csv"], "holds a JSON list; expected a JSON object"),
])
def test_bad_sidecar_is_one_message_naming_it_and_the_key(tmp_path, options, message):
    log = tmp_path / "t.csv"
    log.write_text(GENERIC)
    sidecar = write_sidecar(log, options)
    with pytest.raises(OptionsError) as info:
        file_options(log)
    assert str(info.value).startswith(f"{sidecar}: ") and message in str(info.value)


def test_sidecar_that_is_not_json(tmp_path):
    log = tmp_path / "t.csv"
    sidecar = log.with_name("t.csv.fleetspend.json")
    sidecar.write_text("{format: csv}")
    with pytest.raises(OptionsError, match="not valid JSON"):
        file_options(log)


def test_a_sidecar_saved_with_a_bom_is_read_and_one_in_utf16_is_named(tmp_path):
    """Windows Notepad and PowerShell's `Set-Content -Encoding UTF8` write a UTF-8 BOM, which the
    logs may carry but a sidecar could not ("not valid JSON (Unexpected UTF-8 BOM ...)"), failing
    its log; PowerShell's `>` writes UTF-16, which was "'utf-8' codec can't decode byte 0xff"."""
    log = tmp_path / "t.csv"
    log.write_text(GENERIC)
    sidecar = log.with_name("t.csv.fleetspend.json")
    sidecar.write_bytes(b"\xef\xbb\xbf" + json.dumps(MAPPING).encode() + b"\r\n")
    assert file_options(log) == MAPPING
    sidecar.write_bytes(json.dumps(MAPPING).encode("utf-16"))
    with pytest.raises(OptionsError) as info:
        file_options(log)
    assert str(info.value).startswith(f"{sidecar}: UTF-16 text (byte-order mark FF FE), not UTF-8; expected a JSON"
                                      f" object of read_trace options for t.csv")


def test_start_time_from_a_sidecar(tmp_path):
    log = tmp_path / "t.csv"
    log.write_text(GENERIC)
    write_sidecar(log, {**MAPPING, "start_time": "2024-05-10T08:00:00Z"})
    rows = read_trace(log, **file_options(log)).requests
    assert str(rows["arrival_ts"][0]) == "2024-05-10 08:00:00+00:00"


def test_bad_sidecar_fails_its_file_alone_and_names_it(inbox, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    (inbox / "t.csv").write_text(GENERIC)
    sidecar = write_sidecar(inbox / "t.csv", {**MAPPING, "time_unt": "s"})
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    check = check_of(ingest(warehouse))
    assert check.metadata["failed_files"].value == ["t.csv"]
    assert f"{sidecar}: key 'time_unt'" in check.metadata["reasons"].value
    assert query(warehouse, "SELECT count(*) FROM trace_files") == [(1,)]   # the sidecar is no trace


MOONCAKE_ROW = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n'
# Sidecar values of the wrong JSON type where a name belongs: each was looked up in a dict and
# raised TypeError (unhashable type: 'list'), a traceback that failed the whole ingest, every
# other file of the folder with it, and the preflight before it.
WRONG_TYPES = [
    ("mooncake_unit.jsonl", MOONCAKE_ROW, {"time_unit": ["ms"]}, "time_unit=['ms']: expected one of"),
    ("listed_format.jsonl", MOONCAKE_ROW, {"format": ["mooncake"]}, "key 'format' is ['mooncake']; expected one of"),
    ("latency_unit.csv", GENERIC, {**MAPPING, "latency_unit": {"ms": 1}}, "latency_unit={'ms': 1}: expected one of"),
]


def test_a_sidecar_value_of_the_wrong_type_fails_its_file_alone(inbox, tmp_path):
    for name, body, options, _ in WRONG_TYPES:
        (inbox / name).write_text(body)
        write_sidecar(inbox / name, options)
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    warehouse = tmp_path / "w.duckdb"
    check = check_of(ingest(warehouse))
    assert check.metadata["failed_files"].value == sorted(name for name, *_ in WRONG_TYPES)
    reasons = check.metadata["reasons"].value
    for name, _, _, message in WRONG_TYPES:
        assert f"- {inbox / name}" in reasons and message in reasons
    assert query(warehouse, "SELECT trace FROM trace_files") == [("vidur_splitwise_code.excerpt",)]


def test_the_preflight_passes_over_a_sidecar_of_the_wrong_type(inbox, capsys):
    """The preflight reads every sidecar for its deployment; one that cannot be used is the
    ingest's to name, with its log, not a traceback of the preflight."""
    from pipelines.defs.preflight import main

    (inbox / "t.jsonl").write_text(MOONCAKE_ROW)
    write_sidecar(inbox / "t.jsonl", {"format": ["mooncake"]})
    assert main([]) == 0
    assert capsys.readouterr().out.startswith("configuration ok")


def test_option_that_does_not_apply_to_the_detected_format_names_the_sidecar(inbox, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    sidecar = write_sidecar(inbox / "vidur_splitwise_code.excerpt.csv", {"concurrency": 5})
    reasons = check_of(ingest(warehouse)).metadata["reasons"].value
    assert "['concurrency'] do not apply to format 'vidur'" in reasons and str(sidecar) in reasons


def test_a_bad_policy_in_a_sidecar_fails_its_file_naming_the_file_first(inbox, tmp_path):
    """A policy value the sidecar check lets through is refused by read_trace, whose message
    names no file: the reason started 'option duplicates=...', not with the file it is about."""
    shutil.copy(PUBLIC / "vidur_splitwise_code.excerpt.csv", inbox)
    log = inbox / "vidur_splitwise_code.excerpt.csv"
    sidecar = write_sidecar(log, {"duplicates": "rejct"})
    reasons = check_of(ingest(tmp_path / "w.duckdb")).metadata["reasons"].value
    assert reasons == (f"- {log}: option duplicates='rejct': expected one of ('keep', 'reject')"
                       f" (options from {sidecar})")


def test_sensor_asks_for_a_run_when_a_sidecar_changes(inbox):
    log = inbox / "t.csv"
    log.write_text(GENERIC)
    context = dg.build_sensor_context(cursor=None)
    assert isinstance(trace_inbox_sensor(context), dg.RunRequest)
    write_sidecar(log, MAPPING)
    context = dg.build_sensor_context(cursor=context.cursor)
    request = trace_inbox_sensor(context)
    assert isinstance(request, dg.RunRequest) and request.tags["fleetspend/new_trace_files"] == "1"
    context = dg.build_sensor_context(cursor=context.cursor)
    assert isinstance(trace_inbox_sensor(context), dg.SkipReason)


SHARED_VLLM = SHARED / "burstgpt-vllm-replay-logs"


@pytest.mark.skipif(not SHARED_VLLM.is_dir(), reason=f"public traces not present at {SHARED_VLLM}")
def test_burstgpt_vllm_log_ingests_from_the_folder_with_its_sidecar(inbox, tmp_path):
    """The real BurstGPT vLLM detail log fails without out_len_per_token, ingests with it."""
    warehouse = tmp_path / "w.duckdb"
    log = inbox / "detail_log_scale100_prompt500.json"
    shutil.copy(SHARED_VLLM / log.name, log)
    check = check_of(ingest(warehouse))
    assert check.metadata["failed_files"].value == [log.name]
    assert "needs out_len_per_token=" in check.metadata["reasons"].value
    write_sidecar(log, {"format": "burstgpt-vllm", "out_len_per_token": 6.56})
    assert check_of(ingest(warehouse)).passed
    assert query(warehouse, "SELECT count(*), count(observed_ttft_s) FROM requests") == [(500, 500)]
    assert query(warehouse, "SELECT sum(output_tokens) FROM requests") == \
        [(read_trace(log, out_len_per_token=6.56).requests["output_tokens"].sum(),)]


def test_a_file_that_options_would_read_is_told_where_its_sidecar_goes(inbox):
    """In a folder there is no format= to pass: a log that needs options and has no sidecar
    (or a misnamed one, silently not read) names the sidecar path the options go in; a file no
    option can read (empty) is not sent to write one."""
    from pipelines.formats.source import trace_files
    from pipelines.ingest_folder import ingest_folder
    from pipelines.ingest_store import ensure_tables

    (inbox / "team_log.csv").write_text(GENERIC)
    vllm = {"0": {"event_id": 0, "in_len": 5, "out_len": 13, "first_chunk_time": 0.1,
                  "total_chunk_time": 1.0, "record_time": 10.0}}
    (inbox / "detail_log.json").write_text(json.dumps(vllm))
    (inbox / "detail_log.fleetspend.json").write_text(json.dumps({"out_len_per_token": 6.5}))  # misnamed
    (inbox / "empty.csv").write_text("")
    with duckdb.connect() as conn:
        ensure_tables(conn)
        failed = ingest_folder(conn, trace_files(inbox)).failed
    for name, cause in (("team_log.csv", "cannot tell the log format"),
                        ("detail_log.json", "needs out_len_per_token=")):
        assert cause in failed[str(inbox / name)]
        assert failed[str(inbox / name)].endswith(
            f"(the folder ingest takes read_trace options, format= included, from a sidecar JSON object "
            f"{inbox / name}.fleetspend.json; README \"Per-file options\")")
    assert "sidecar" not in failed[str(inbox / "empty.csv")]


def test_a_known_log_with_a_column_more_is_told_where_its_sidecar_goes(inbox):
    """An export of an Azure or BurstGPT log with one column added (a region, a request id) is
    recognised by its columns and then refused by the reader, which takes those columns and no
    others; a sidecar mapping its columns as a generic CSV reads it, but the message, unlike a
    log whose format is not recognised at all, did not say so."""
    from pipelines.formats.source import trace_files
    from pipelines.ingest_folder import ingest_folder
    from pipelines.ingest_store import ensure_tables

    (inbox / "azure.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens,Region\n"
                                     "2023-11-16 18:17:03.9799600,4808,10,eu\n")
    (inbox / "burst.csv").write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,"
                                     "Log Type,Region\n5,ChatGPT,472,18,490,Conversation log,eu\n")
    with duckdb.connect() as conn:
        ensure_tables(conn)
        failed = ingest_folder(conn, trace_files(inbox)).failed
    for name in ("azure.csv", "burst.csv"):
        assert failed[str(inbox / name)].endswith(
            f"(the folder ingest takes read_trace options, format= included, from a sidecar JSON object "
            f"{inbox / name}.fleetspend.json; README \"Per-file options\")")


def test_the_folder_ingest_lists_logs_only(tmp_path):
    """What the folder ingest and the inbox sensor read: every known suffix, compressed or not;
    never a hidden file (macOS leaves a binary `._name` beside each file copied to a foreign
    disk, an office suite its `.~lock.name#`), an option sidecar whatever its case, a README,
    another suffix or a folder."""
    from pipelines.formats.source import trace_files

    logs = ["a.csv", "b.jsonl.gz", "c.JSON", "d.parquet.zst"]
    others = ["._a.csv", ".hidden.jsonl", "a.csv.FLEETSPEND.JSON", "README.md", "notes.txt"]
    for name in logs + others:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "folder.csv").mkdir()
    assert [p.name for p in trace_files(tmp_path)] == logs
    assert trace_files(tmp_path / "absent") == []


def test_a_sidecar_names_the_model_a_log_does_not(inbox, tmp_path):
    """LLMPerf (like AIBrix, Azure, Mooncake and Vidur) records no model, so the checks that
    compare a log's model with the deployment's could not fire; a sidecar's `model` fills every
    request's, as read_trace(model=...) does, and a record's own model is kept."""
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(PUBLIC / "bedrock_13b.json", inbox)
    write_sidecar(inbox / "bedrock_13b.json", {"concurrency": 5,
                                               "model": "meta-llama/Llama-2-13b-chat-hf"})
    ingest(warehouse)
    assert query(warehouse, "SELECT DISTINCT model FROM requests") == \
        [("meta-llama/Llama-2-13b-chat-hf",)]
    without = read_trace(PUBLIC / "bedrock_13b.json", concurrency=5).requests
    assert without["model"].is_null().all()
    named = read_trace(PUBLIC / "bedrock_13b.json", concurrency=5, model="x").requests
    assert named.drop("model").equals(without.drop("model"))
    log = tmp_path / "models.csv"
    log.write_text("ts,in,out,model\n0.5,100,10,llama-3.1-8b\n1.0,200,20,\n")
    mapped = {**MAPPING, "columns": {**MAPPING["columns"], "model": "model"}}
    mapped["columns"].pop("tenant")
    kept = read_trace(log, **mapped, model="llama-2-7b").requests
    assert kept["model"].to_list() == ["llama-3.1-8b", "llama-2-7b"]


@pytest.mark.parametrize("model", ["", "  ", 13])
def test_a_model_option_that_is_no_name_is_one_message(model):
    with pytest.raises(ValueError, match=r"bedrock_13b\.json: model=.*expected the served"
                                         r" model's name as text"):
        read_trace(PUBLIC / "bedrock_13b.json", concurrency=5, model=model)


def test_a_sidecar_names_the_deployment_that_served_its_log(inbox, tmp_path):
    """A fleet of several models or GPUs: the sidecar's `deployment` is no reading option (the
    rows are read as without it) but part of the file's identity, kept for the replay; one the
    catalog does not list fails its log alone, naming the sidecar and the choices, and the
    next pass reads it again."""
    warehouse = tmp_path / "w.duckdb"
    (inbox / "t.csv").write_text(GENERIC)
    sidecar = write_sidecar(inbox / "t.csv", {**MAPPING, "deployment": "seed-exampel"})
    assert file_options(inbox / "t.csv") == MAPPING
    check = check_of(ingest(warehouse))
    reason = check.metadata["reasons"].value
    assert check.metadata["failed_files"].value == ["t.csv"]
    assert f"{sidecar}: key 'deployment' names a deployment the replay cannot use:" in reason
    assert "'seed-exampel'" in reason and "seed-example" in reason
    write_sidecar(inbox / "t.csv", {**MAPPING, "deployment": "seed-example"})
    ingest(warehouse)
    assert query(warehouse, "SELECT trace, deployment FROM trace_files, LATERAL ("
                            "SELECT json_extract_string(options, '$.deployment') AS deployment)") \
        == [("t", "seed-example")]
    assert query(warehouse, "SELECT count(*) FROM requests") == [(2,)]
