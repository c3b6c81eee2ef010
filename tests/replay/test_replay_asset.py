"""The replay asset: all traces' results replace both tables at once, a replay that fails or
is interrupted part-way leaves the previous tables whole and no staging tables behind, and an
ingested Mooncake log's prefix hashes reach the replay."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.ingest.assets import ingested_traces
from pipelines.defs.replay import checks as replay_checks
from pipelines.defs.replay.assets import REPLAY_TABLES, replayed_fleet
from pipelines.replay.api import UNSERVED_SCHEMA, remedies, set_aside_unservable
from pipelines.roofline import load_catalog
from pipelines.warehouse import publish_staged, read_table, run_sql, stage_rows, write_table


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _write_requests(conn, frame: pl.DataFrame) -> None:
    """The requests table and the trace_files rows the replay reads beside it."""
    write_table(conn, "requests", frame)
    write_table(conn, "trace_files", frame.select("trace").unique(maintain_order=True).with_columns(
        file=pl.format("/logs/{}.csv", "trace"), options=pl.lit("{}"),
        prefix_block_tokens=pl.lit(None, pl.Int64)))


def _requests(trace: str, prompts: list[int]) -> pl.DataFrame:
    n = len(prompts)
    return pl.DataFrame({
        "request_id": [f"{trace}:{k}" for k in range(n)], "trace": [trace] * n,
        "arrival_s": [0.5 * k for k in range(n)], "prompt_tokens": prompts,
        "output_tokens": [20] * n, "cached_tokens": [0] * n,
    })


def _materialize(path) -> dg.ExecuteInProcessResult:
    return dg.materialize([replayed_fleet], resources={"duckdb": DuckDBResource(database=str(path))},
                          raise_on_error=False)


# the checks that read catalog tables these hand-made warehouses do not hold (roofline, models)
CATALOG_CHECKS = dg.AssetSelection.checks(replay_checks.gpu_seconds_conserved,
                                          replay_checks.replayed_model_is_the_logged_one)


def _materialize_with_checks(path, selection: dg.AssetSelection) -> dg.ExecuteInProcessResult:
    """The replay asset with the replay checks, `selection` of them run."""
    return dg.materialize([replayed_fleet, *dg.load_asset_checks_from_modules([replay_checks])],
                          resources={"duckdb": DuckDBResource(database=str(path))},
                          selection=selection, raise_on_error=False)


def _connect(path):
    """A connection configured like the asset's (DuckDB refuses two configurations at once)."""
    return DuckDBResource(database=str(path)).get_connection()


def _tables(path) -> set[str]:
    with _connect(path) as conn:
        return {row[0] for row in conn.sql("SELECT table_name FROM duckdb_tables()").fetchall()}


def test_replay_replaces_both_tables(tmp_path):
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, pl.concat([_requests("a", [100, 200]), _requests("b", [300])]))
    result = _materialize(path)
    assert result.success
    with _connect(path) as conn:
        stages = read_table(conn, "request_stages")
        timeline = read_table(conn, "fleet_timeline")
    assert sorted(stages["request_id"]) == ["a:0", "a:1", "b:0"]
    assert set(timeline["trace"]) == {"a", "b"}
    assert _tables(path) == {"requests", "trace_files", *REPLAY_TABLES}
    # traces without prefix hashes have no prefix-cache hit rate to report (it read 0.0)
    metadata = result.asset_materializations_for_node("replayed_fleet")[0].metadata
    assert metadata["prefix_cache_hit_rate"].value == {"a": None, "b": None}


def _on_deployment(conn, trace: str, deployment: str) -> None:
    """`trace`'s log's sidecar names `deployment` (trace_files.options, as the ingest keeps it)."""
    conn.execute("UPDATE trace_files SET options = json_object('deployment', ?::VARCHAR) WHERE trace = ?",
                 [deployment, trace])


def test_traces_of_two_deployments_interleaved_are_each_replayed_once_on_their_own(tmp_path):
    """Traces grouped by deployment (x and z on the run's, y on its sidecar's) are staged group
    by group: every trace's rows are in each table once, set-aside ones with their deployment,
    and a second run replaces them (the first group's first trace starts the staging tables)."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, pl.concat([_requests("x", [100, 200]), _requests("y", [300, 10**6]),
                                         _requests("z", [400])]))
        _on_deployment(conn, "y", "seed-example")
    for _ in range(2):
        result = _materialize(path)
        assert result.success
        with _connect(path) as conn:
            assert conn.sql("SELECT trace, deployment, count(*) FROM request_stages GROUP BY ALL"
                            " ORDER BY trace").fetchall() == [
                ("x", "azure-2023-70b-h100", 2), ("y", "seed-example", 1), ("z", "azure-2023-70b-h100", 1)]
            assert conn.sql("SELECT DISTINCT trace, deployment FROM fleet_timeline ORDER BY trace"
                            ).fetchall() == [("x", "azure-2023-70b-h100"), ("y", "seed-example"),
                                             ("z", "azure-2023-70b-h100")]
            assert conn.sql("SELECT trace, deployment, request_id FROM unserved_requests").fetchall() \
                == [("y", "seed-example", "y:1")]
    metadata = result.asset_materializations_for_node("replayed_fleet")[0].metadata
    assert metadata["deployment"].value == "azure-2023-70b-h100, seed-example"


def test_a_sidecars_deployment_the_catalog_no_longer_lists_is_named_with_its_sidecar(tmp_path):
    """The ingest checks a sidecar's deployment, but deployments.csv can change after (a log
    ingested naming a row gone since is not read again: same content, same options): the replay
    stops naming the sidecar and its key, as the README and the preflight's note say, not the
    run's deployment setting."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, pl.concat([_requests("x", [100]), _requests("y", [100])]))
        _on_deployment(conn, "y", "gone-fleet")
    result = _materialize(path)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.event_specific_data.error.message.startswith(
        "dagster._core.definitions.events.Failure: /logs/y.csv.fleetspend.json, key 'deployment':"
        " unknown deployment 'gone-fleet': ")


def test_the_run_log_gives_no_hit_rate_for_a_trace_without_prefix_hashes(tmp_path):
    """The metadata's rate is null for a trace without prefix hashes (90d4152); the run log's
    line for the trace said "prefix-cache hit rate 0.0%" all the same, as if the cache had found
    nothing, on every run of the demo's Azure traces."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("a", [100, 200]))
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([replayed_fleet], instance=instance,
                                resources={"duckdb": DuckDBResource(database=str(path))})
        lines = [entry.user_message for entry in instance.all_logs(result.run_id)
                 if entry.user_message.startswith("a: replayed 2 requests")]
    assert len(lines) == 1, lines
    assert "no prefix hashes" in lines[0] and "hit rate 0.0%" not in lines[0]


def test_the_deployment_setting_holds_for_runs_without_config_and_config_overrides_it(tmp_path,
                                                                                    monkeypatch):
    """The nightly schedule, the inbox sensor and a cron line start runs without run config: the
    fleet the user chose (FLEETSPEND_DEPLOYMENT) must be the one they replay on."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("a", [100, 200]))
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "seed-example")
    result = _materialize(path)
    assert result.success
    assert result.asset_materializations_for_node("replayed_fleet")[0].metadata[
        "deployment"].value == "seed-example"
    with _connect(path) as conn:
        assert set(read_table(conn, "request_stages")["deployment"]) == {"seed-example"}
    chosen = dg.materialize([replayed_fleet], resources={"duckdb": DuckDBResource(database=str(path))},
                            run_config={"ops": {"replayed_fleet": {"config": {
                                "deployment": "splitwise-70b-a100-tp2"}}}})
    with _connect(path) as conn:
        assert set(read_table(conn, "request_stages")["deployment"]) == {"splitwise-70b-a100-tp2"}
    monkeypatch.delenv("FLEETSPEND_DEPLOYMENT")
    assert chosen.success and _materialize(path).success
    with _connect(path) as conn:
        assert set(read_table(conn, "request_stages")["deployment"]) == {"azure-2023-70b-h100"}


def test_a_typo_in_the_deployment_setting_is_named_as_that_setting(tmp_path, monkeypatch):
    """Materialized without the preflight (a plain DuckDBResource), a bad FLEETSPEND_DEPLOYMENT
    is reported as that setting, not as run config the user never wrote; `deployment: null` in
    run config names no deployment either."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("a", [100, 200]))
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "seed-exampel")
    for run_config in ({}, {"ops": {"replayed_fleet": {"config": {"deployment": None}}}}):
        result = dg.materialize([replayed_fleet], raise_on_error=False, run_config=run_config,
                                resources={"duckdb": DuckDBResource(database=str(path))})
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        message = failure.event_specific_data.error.message
        assert "FLEETSPEND_DEPLOYMENT: unknown deployment 'seed-exampel': " in message
        assert "replay config" not in message


def test_a_catalog_file_problem_is_not_blamed_on_the_deployment_choice(tmp_path, monkeypatch):
    """A broken catalog file failed the replay as "FLEETSPEND_DEPLOYMENT: <gpus.csv problem>"
    (or "the default: ..."), as if the deployment chosen were the cause; the file's own message
    names what to fix."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("a", [100, 200]))
    reference = tmp_path / "reference"
    shutil.copytree(settings.reference_dir(), reference)
    gpus = reference / "gpus.csv"
    gpus.write_text(gpus.read_text().replace("NVIDIA L4 24GB,NVIDIA,ada,", "NVIDIA L4 24GB,NVIDIA,,"))
    monkeypatch.setenv("FLEETSPEND_REFERENCE_DIR", str(reference))
    monkeypatch.setenv("FLEETSPEND_DEPLOYMENT", "seed-example")
    result = dg.materialize([replayed_fleet], raise_on_error=False,
                            resources={"duckdb": DuckDBResource(database=str(path))})
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert "gpus.csv" in message and "FLEETSPEND_DEPLOYMENT" not in message


def test_a_failing_second_trace_leaves_the_previous_tables(tmp_path):
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("old", [100]))
    assert _materialize(path).success
    with _connect(path) as conn:
        before = read_table(conn, "request_stages"), read_table(conn, "fleet_timeline")
        # the first trace replays (and is staged), the second fails the replay's own checks
        bad = _requests("bad", [100]).with_columns(cached_tokens=pl.lit(100, pl.Int64))
        _write_requests(conn, pl.concat([_requests("good", [100]), bad]))
    result = _materialize(path)
    assert not result.success
    with _connect(path) as conn:
        assert read_table(conn, "request_stages").equals(before[0])
        assert read_table(conn, "fleet_timeline").equals(before[1])
    assert _tables(path) == {"requests", "trace_files", *REPLAY_TABLES}


def test_a_request_the_deployment_cannot_serve_is_set_aside_and_the_rest_replays(tmp_path):
    """One oversized row (a 10^8-token prompt in one upload) failed the replay of every trace,
    every night. It is set aside into unserved_requests with its reason, every other request
    replays (a trace left with none is not replayed), the coverage check counts it as set aside
    and the warning check names it."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, pl.concat([_requests("good", [100, 200]), _requests("mixed", [300, 10**8]),
                                         _requests("bad", [10**8])]))
    result = _materialize_with_checks(path, dg.AssetSelection.all() - CATALOG_CHECKS)
    assert result.success
    with _connect(path) as conn:
        replayed = sorted(read_table(conn, "request_stages")["request_id"])
        unserved = read_table(conn, "unserved_requests")
    assert replayed == ["good:0", "good:1", "mixed:0"]
    assert unserved.columns == ["trace", "deployment", "request_id", "prompt_tokens", "output_tokens", "reason"]
    assert unserved.select("trace", "request_id").rows() == [("mixed", "mixed:1"), ("bad", "bad:0")]
    assert unserved["reason"][0] == ("has 100,000,020 tokens (prompt + output), more than"
                                     " llama-3.1-70b's context of 131,072")
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evaluations["every_request_replayed_or_set_aside"].passed
    warning = evaluations["every_request_served"]
    assert not warning.passed and warning.severity == dg.AssetCheckSeverity.WARN
    assert warning.description.startswith("2 request(s) set aside, not replayed")


def test_a_request_beyond_the_models_context_is_set_aside_with_its_reason():
    """seed-example serves Llama-2-7B (a 4,096-token context) with room in its KV cache for far
    longer sequences: a 7,437-token prompt of the Azure code trace was replayed on it as if the
    engine took it; vLLM refuses it (max_model_len). One token within the context is served."""
    deployment = load_catalog().deployment("seed-example")
    assert deployment.model.max_context == 4096 < deployment.kv_capacity_tokens
    trace = _requests("t", [4076, 4077, 7437])   # 20 output tokens each
    served, unserved = set_aside_unservable({"t": trace}, deployment)
    assert served["t"]["request_id"].to_list() == ["t:0"]
    assert unserved.rows() == [
        ("t", "t:1", 4077, 20, "has 4,097 tokens (prompt + output), more than llama-2-7b's context of 4,096"),
        ("t", "t:2", 7437, 20, "has 7,457 tokens (prompt + output), more than llama-2-7b's context of 4,096")]
    small = load_catalog().build(model="llama-3.1-8b", gpu="l4")   # 37,648 tokens of KV cache
    _, kv = set_aside_unservable({"t": _requests("t", [37629, 37630])}, small)
    assert kv.select("request_id", "reason").rows() == [
        ("t:1", "needs 37,649 tokens of KV cache: one replica of llama-3.1-8b@l4-tp1-bf16 holds 37,648")]
    everything, none = set_aside_unservable({"t": trace.head(1)}, deployment)
    assert list(everything) == ["t"] and none.height == 0 and none.columns == list(UNSERVED_SCHEMA)


def test_the_warning_names_the_first_request_set_aside_in_the_file(tmp_path):
    """Request ids are trace:line, and ordered as text 'x:10' comes before 'x:2': the warning
    called the request of line 10 the first set aside (the summary's example too), on the demo
    traces replayed on seed-example 'AzureLLMInferenceTrace_code:1005' where line 2 is."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("x", [100, 100, 10**8, *[100] * 7, 10**8]))
    result = _materialize_with_checks(path, dg.AssetSelection.all() - CATALOG_CHECKS)
    [warning] = [e for e in result.get_asset_check_evaluations() if e.check_name == "every_request_served"]
    assert warning.description.startswith("2 request(s) set aside, not replayed: the deployment"
                                          " their trace replays on cannot serve them, first x x:2,"
                                          " which has")
    with _connect(path) as conn:
        assert run_sql(conn, "summary_unserved_requests").fetchall()[0][:3] == ("x", 2, "x:2")


def test_a_log_of_which_no_request_can_be_served_fails_naming_why(tmp_path):
    """Every request set aside leaves nothing to replay: the run fails, saying why and what to
    change, rather than publishing empty figures."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("x", [10**8, 10**8]))
    result = _materialize(path)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert ("no request can be served by azure-2023-70b-h100: every one is set aside, e.g. one"
            " that has 100,000,020 tokens (prompt + output), more than llama-3.1-70b's context"
            " of 131,072; replay on a deployment with a model with a context of more than"
            " 131,072 tokens (2 request(s))") in message
    assert "KV cache" not in message.split("replay on")[1]   # the context, not the KV cache, is short


def test_a_fleet_of_which_no_request_can_be_served_names_each_deployments_remedy(tmp_path):
    """Traces on two deployments (one named by its log's sidecar), none of whose requests can be
    served: the remedy named the first deployment's alone, with its count of requests, as if
    every trace were on it."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, pl.concat([_requests("x", [10**8, 10**8]), _requests("y", [10**6] * 3)]))
        _on_deployment(conn, "y", "seed-example")
    result = _materialize(path)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert "no request can be served by azure-2023-70b-h100, seed-example: every one is set aside" in message
    assert message.rstrip().endswith(
        "; replay azure-2023-70b-h100's traces on a deployment with a model with a context of more"
        " than 131,072 tokens (2 request(s)); replay seed-example's traces on a deployment with a"
        " model with a context of more than 4,096 tokens (3 request(s))")


def test_remedies_name_only_what_the_set_aside_requests_need():
    """The all-set-aside failure advised more GPUs and an fp8 KV cache also when only the
    model's context was short (and a longer context when only the KV cache was): each remedy is
    named only for the requests it would let in, with their count."""
    context_bound = load_catalog().deployment("seed-example")     # 4,096-token context
    kv_bound = load_catalog().build(model="llama-3.1-8b", gpu="l4")   # 37,648 tokens of KV cache
    _, by_context = set_aside_unservable({"t": _requests("t", [5000, 6000])}, context_bound)
    assert remedies(by_context, context_bound) == (
        "a model with a context of more than 4,096 tokens (2 request(s))")
    _, by_kv = set_aside_unservable({"t": _requests("t", [40000])}, kv_bound)
    assert remedies(by_kv, kv_bound) == ("a larger KV cache than 37,648 tokens per replica: more"
                                         " GPUs per replica, an fp8 KV cache or a GPU with more"
                                         " memory (1 request(s))")
    _, both = set_aside_unservable({"t": _requests("t", [40000, 200000])}, kv_bound)
    assert remedies(both, kv_bound) == (
        "a model with a context of more than 131,072 tokens (1 request(s)); a larger KV cache"
        " than 37,648 tokens per replica: more GPUs per replica, an fp8 KV cache or a GPU with"
        " more memory (1 request(s))")


def test_remedies_advise_no_fp8_kv_cache_to_a_deployment_that_has_one():
    """A deployment whose KV cache is already fp8 was told to use 'an fp8 KV cache'."""
    fp8 = load_catalog().build(model="llama-3.1-8b", gpu="l4", kv_cache="fp8")  # 75,296 tokens
    _, by_kv = set_aside_unservable({"t": _requests("t", [80000])}, fp8)
    assert remedies(by_kv, fp8) == ("a larger KV cache than 75,296 tokens per replica: more GPUs"
                                    " per replica or a GPU with more memory (1 request(s))")


def test_remedies_advise_no_more_gpus_at_the_largest_tensor_parallel_degree():
    """A deployment already at tp 8, the largest its model splits into, was told to use 'more
    GPUs per replica'; with an fp8 KV cache too, a GPU with more memory is the lever left (the
    advice named none)."""
    catalog = load_catalog()
    widest = catalog.build(model="llama-3.1-8b", gpu="l4", tp=8, kv_memory_fraction=0.12)
    _, by_kv = set_aside_unservable({"t": _requests("t", [40000])}, widest)
    assert remedies(by_kv, widest) == ("a larger KV cache than 34,368 tokens per replica: an fp8"
                                       " KV cache or a GPU with more memory (1 request(s))")
    fp8 = catalog.build(model="llama-3.1-8b", gpu="l4", tp=8, kv_cache="fp8", kv_memory_fraction=0.12)
    _, by_kv = set_aside_unservable({"t": _requests("t", [80000])}, fp8)
    assert remedies(by_kv, fp8) == ("a larger KV cache than 68,736 tokens per replica: a GPU with"
                                    " more memory (1 request(s))")


@pytest.mark.parametrize(("also", "description"), [
    ((), "a: 2 requests, 1 replayed + 0 set aside, 1 in neither"),
    # a request lost while another is both replayed and set aside leaves the counts equal
    # (2 = 1 + 1): the check compared only them, and passed
    (("INSERT INTO unserved_requests VALUES ('a', 'd', 'a:0', 100, 20, 'twice')",),
     "a: 2 requests, 1 replayed + 1 set aside, 1 in neither"),
], ids=["lost", "lost-and-balanced"])
def test_a_replay_that_misses_a_request_fails_the_coverage_check(tmp_path, also, description):
    """requests = replayed + set aside: a request neither replayed nor set aside is named."""
    path = tmp_path / "w.duckdb"
    with _connect(path) as conn:
        _write_requests(conn, _requests("a", [100, 200]))
    assert _materialize(path).success
    with _connect(path) as conn:
        conn.execute("DELETE FROM request_stages WHERE request_id = 'a:1'")
        for statement in also:
            conn.execute(statement)
    check = _materialize_with_checks(path, dg.AssetSelection.checks(
        replay_checks.every_request_replayed_or_set_aside))
    [evaluation] = check.get_asset_check_evaluations()
    assert not evaluation.passed
    assert evaluation.description == description


def test_the_coverage_view_does_not_deduplicate_the_ids_it_anti_joins():
    """The by-id anti-join of replay_coverage runs over every request on every nightly run: its
    right side was a UNION, which grouped all the replayed and set-aside ids (a hash group-by of
    27M strings, half the check's 9 s) though the anti-join only asks whether an id is there.
    No group-by of the plan reads the union but through the anti-join."""
    conn = duckdb.connect()
    write_table(conn, "requests", _requests("a", [100, 100]))
    write_table(conn, "request_stages", _requests("a", [100]).with_columns(scenario=pl.lit("baseline")))
    write_table(conn, "unserved_requests", pl.DataFrame(schema=UNSERVED_SCHEMA))
    run_sql(conn, "replay_coverage")
    plan = json.loads(conn.sql("EXPLAIN (FORMAT json) SELECT * FROM replay_coverage").fetchall()[0][1])

    def names(node) -> list[str]:
        return [node["name"], *(name for child in node["children"] for name in names(child))]

    def below(node) -> list[str]:   # the operators a node reads before any join
        return [name for child in node["children"]
                for name in ([child["name"]] + ([] if "JOIN" in child["name"] else below(child)))]

    def grouped_unions(node) -> int:
        here = "GROUP_BY" in node["name"] and "UNION" in below(node)
        return here + sum(grouped_unions(child) for child in node["children"])

    assert "UNION" in names(plan[0]) and grouped_unions(plan[0]) == 0
    assert conn.sql("SELECT requests, replayed, missing FROM replay_coverage").fetchall() == [(2, 1, 1)]


def test_publish_is_all_or_nothing(tmp_path):
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        write_table(conn, "one", pl.DataFrame({"x": [1]}))
        write_table(conn, "two", pl.DataFrame({"x": [2]}))
        stage_rows(conn, "one", pl.DataFrame({"x": [10]}), first=True)
        stage_rows(conn, "one", pl.DataFrame({"x": [11]}), first=False)
        with pytest.raises(duckdb.Error):
            publish_staged(conn, ["one", "two"])     # nothing staged for "two"
        assert read_table(conn, "one")["x"].to_list() == [1]
        stage_rows(conn, "two", pl.DataFrame({"x": [20]}), first=True)
        publish_staged(conn, ["one", "two"])
        assert read_table(conn, "one")["x"].to_list() == [10, 11]
        assert read_table(conn, "two")["x"].to_list() == [20]


def test_a_mooncake_log_is_ingested_and_replayed_with_its_prefix_hashes(tmp_path, monkeypatch):
    """End to end through ingest: the Mooncake reader's prefix hashes and block size reach the
    replay, which reports a non-zero prefix-cache hit rate."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "mooncake_conversation.jsonl").write_text(
        (FIXTURES / "mooncake" / "conversation_trace_excerpt.jsonl").read_text())
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(folder))
    path = tmp_path / "w.duckdb"
    result = dg.materialize([ingested_traces, replayed_fleet],
                            resources={"duckdb": DuckDBResource(database=str(path))})
    assert result.success
    metadata = result.asset_materializations_for_node("replayed_fleet")[0].metadata
    (rate,) = metadata["prefix_cache_hit_rate"].value.values()
    assert 0.01 < rate < 0.5
    with _connect(path) as conn:
        stages = read_table(conn, "request_stages")
    assert stages.height == 600
    assert (stages["cached_hit_tokens"] % 512 == 0).all() and stages["cached_hit_tokens"].sum() > 0


def test_a_folder_whose_every_row_is_rejected_names_each_file_and_its_first_reasons(tmp_path, monkeypatch):
    """Nothing to replay means nothing is published, so the rejected rows cannot be queried
    afterwards: the failure itself names the file, a line and the reason."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "bad.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2023-11-16 18:15:46.6805900,-5,10\n"
                                    "2023-11-16 18:15:47.6805900,-7,10\n")
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(folder))
    result = dg.materialize([ingested_traces, replayed_fleet], raise_on_error=False,
                            resources={"duckdb": DuckDBResource(database=str(tmp_path / "w.duckdb"))})
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert ("no requests to replay: every row of the trace files was rejected: bad.csv: 2 rows"
            " rejected, e.g. line 2: ContextTokens is -5") in message
    assert "line 3: ContextTokens is -7" in message


def test_a_folder_whose_every_file_cannot_be_read_names_them(tmp_path, monkeypatch):
    """Every file failed whole (here: a format the folder ingest cannot tell without options):
    the replay said only "no file of the trace folder has a usable row"; it names the files and
    why, and where the ingest lists them."""
    message = _folder_replay_failure(tmp_path, monkeypatch, "mystery.csv", "when,in,out\n1,2,3\n")
    assert "no requests to replay: no trace file could be read: mystery.csv: " in message
    assert "cannot tell the log format" in message and "failed_trace_files" in message


def test_a_folder_of_header_only_files_names_them(tmp_path, monkeypatch):
    """A file with a header and no row ingests (0 read, 0 rejected); a folder of only such files
    has nothing to replay, and the failure names them (it said only 'no file of the trace
    folder has a usable row')."""
    message = _folder_replay_failure(tmp_path, monkeypatch, "today.csv",
                                     "TIMESTAMP,ContextTokens,GeneratedTokens\n")
    assert (
        "no requests to replay: no file of the trace folder has a data row: today.csv (expected"
        " request rows after the header)") in message


def test_a_folder_of_files_failing_in_different_ways_names_each(tmp_path, monkeypatch):
    """One file unreadable, one a header alone, one with every row rejected: the failure said
    'every row of the trace files was rejected' and named only the last, or, without it, 'no
    trace file could be read' beside a file that was read. Each file is named with its cause."""
    message = _folder_replay_failure(tmp_path, monkeypatch, {
        "mystery.csv": "when,in,out\n1,2,3\n",
        "today.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n",
        "bad.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,-5,10\n"})
    assert (": no requests to replay: no trace file gave a usable row: bad.csv: 1 rows rejected, e.g. line 2:"
            " ContextTokens is -5") in message
    assert "; mystery.csv could not be read: " in message and "cannot tell the log format" in message
    assert "; today.csv has no data row (expected request rows after the header)" in message
    assert "every row of the trace files" not in message and "no trace file could be read" not in message
    assert message.rstrip().endswith("the ingest's failed_trace_files and its every_trace_file_ingested"
                                     " check list the files that could not be read")
    assert ": no requests to replay: no trace file gave a usable row: mystery.csv could not be read" in (
        _folder_replay_failure(tmp_path / "two", monkeypatch, {
            "mystery.csv": "when,in,out\n1,2,3\n", "today.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n"}))


def _folder_replay_failure(tmp_path, monkeypatch, name: str | dict[str, str], text: str = "") -> str:
    """The replay's failure message after ingesting a trace folder of one file `name` (or of
    each file of a name -> text mapping)."""
    folder = tmp_path / "traces"
    folder.mkdir(parents=True)
    for file, content in (name.items() if isinstance(name, dict) else [(name, text)]):
        (folder / file).write_text(content)
    monkeypatch.setenv("FLEETSPEND_TRACE_DIR", str(folder))
    result = dg.materialize([ingested_traces, replayed_fleet], raise_on_error=False,
                            resources={"duckdb": DuckDBResource(database=str(tmp_path / "w.duckdb"))})
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    return failure.event_specific_data.error.message


def test_bad_replay_options_fail_naming_each(tmp_path):
    """Materialized without the preflight (a plain DuckDBResource), the asset runs its checks."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        _write_requests(conn, _requests("t", [100, 200]))
    result = dg.materialize([replayed_fleet], raise_on_error=False,
                            resources={"duckdb": DuckDBResource(database=str(path))},
                            run_config={"ops": {"replayed_fleet": {"config": {
                                "router": "fastest", "timeline_bin_s": 0.0}}}})
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert "ops.replayed_fleet.config.router: 'fastest', expected one of" in message
    assert "ops.replayed_fleet.config.timeline_bin_s: 0.0, expected a positive number" in message
