"""The README's "The tables" section names the columns of every warehouse table: each column a
table has is documented (in backticks, in the table's row), and each name a row documents exists (a column of
another table is written `table.column`), checked against a freshly materialized warehouse (every asset, calibration
included); and it says what an analyst who reads only it needs to get the numbers right in SQL: the units of
GPU-seconds, dollars and hardware columns, how percentiles are taken, when a column is NULL, which deployments
roofline holds and what its derived coefficients leave out, and how a rejected row joins its file."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import duckdb
import pytest

from pipelines.formats.source import trace_files
from pipelines.ingest_folder import ingest_folder
from pipelines.ingest_store import ensure_tables

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SECTION = README.split("\n## The tables\n", 1)[1].split("\n## ", 1)[0]
CATALOG = ROOT / "data" / "reference"

# Backticked words in the table rows that are values or settings, not columns of the row's table.
NOT_COLUMNS = {"baseline", "all", "fit", "held_out", "ttft", "e2e", "tpot",   # values of a column
               "model", "tenant",                                    # chargeback's `dimension` values
               "timeline_bin_s"}                                     # a replay setting


def _rows() -> dict[str, str]:
    """README table name -> the 'what it holds' cell of its row."""
    rows = {}
    for line in SECTION.splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if line.startswith("| `") and len(cells) >= 3:
            for name in re.findall(r"`(\w+)`", cells[0]):
                rows[name] = " | ".join(cells[2:])
    return rows


ROWS = _rows()


def _columns(conn, table: str) -> list[str]:
    return [r[0] for r in conn.sql("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                                   "ORDER BY ordinal_position", params=[table]).fetchall()]


def _documented(table: str, conn) -> set[str]:
    """The backticked names of `table`'s row, plus every column of a table the row starts from
    ("`request_stages` plus ...", "the `request_stages` columns of ...")."""
    cell = ROWS[table]
    names = set(re.findall(r"`(\w+)`", cell))
    base = re.match(r"(?:the )?`(\w+)`(?: plus| columns)", cell)
    if base:
        names |= set(_columns(conn, base.group(1)))
    return names


def _tables(conn, kind: str) -> set[str]:
    return {r[0] for r in conn.sql("SELECT table_name FROM information_schema.tables WHERE table_type = ?",
                                   params=[kind]).fetchall()}


def test_every_warehouse_table_has_a_row_and_every_row_a_table(demo_conn):
    assert _tables(demo_conn, "BASE TABLE") == set(ROWS)


def test_every_view_is_named_in_the_section(demo_conn):
    views = _tables(demo_conn, "VIEW")
    assert views and not {v for v in views if f"`{v}`" not in SECTION}


@pytest.mark.parametrize("table", sorted(ROWS))
def test_the_readme_row_names_every_column_and_no_other(table, demo_conn):
    actual = _columns(demo_conn, table)
    if "`data/reference/`" in ROWS[table]:
        # catalog tables: "the CSV files of data/reference/ as they are"
        with open(CATALOG / f"{table}.csv", newline="") as f:
            assert actual == next(csv.reader(f)), table
        return
    documented = _documented(table, demo_conn)
    assert [c for c in actual if c not in documented] == [], f"{table}: columns the README does not name"
    other_tables = _tables(demo_conn, "BASE TABLE") | _tables(demo_conn, "VIEW")
    unknown = documented - set(actual) - NOT_COLUMNS - other_tables
    assert unknown == set(), f"{table}: the README names columns it does not have"
    # A column of another table is written `table.column`: it must exist there.
    for other, column in re.findall(r"`(\w+)\.(\w+)`", ROWS[table]):
        assert other not in other_tables or column in _columns(demo_conn, other), f"{table}: {other}.{column}"


def test_request_stages_times_are_related_as_the_readme_says(demo_conn):
    """The request_stages row defines each stage from the replica's instants and the client's
    ttft_s / e2e_s from the network settings of `roofline`: an analyst computing e2e time from
    finished_s - arrival_s must know it leaves out network_s."""
    worst = demo_conn.sql("""
        SELECT max(abs(s.queue_s - (s.admitted_s - s.arrival_s))),
               max(abs(s.prefill_s - (s.first_token_s - s.admitted_s))),
               max(abs(s.decode_s - (s.finished_s - s.first_token_s))),
               max(abs(s.network_s - r.net_tail_s)),
               max(abs(s.ttft_s - (s.queue_s + s.prefill_s + r.net_one_way_s))),
               max(abs(s.e2e_s - (s.queue_s + s.prefill_s + s.decode_s + s.network_s))),
               max(abs(s.e2e_s - (s.finished_s - s.arrival_s + s.network_s))),
               min(r.net_one_way_s)
        FROM request_stages AS s JOIN roofline AS r USING (deployment)""").fetchall()[0]
    assert max(worst[:-1]) < 1e-9 and worst[-1] > 0


def test_request_shapes_is_the_baseline_of_request_costs_with_its_shape(demo_conn):
    """The views paragraph: request_shapes holds every request_costs column of the baseline
    (the examples read total_usd from it) plus the shape and its buckets."""
    costs = _columns(demo_conn, "request_costs")
    assert _columns(demo_conn, "request_shapes") == [
        *costs, "prompt_bucket", "output_bucket", "prompt_lower", "output_lower", "shape"]
    counts = demo_conn.sql("SELECT (SELECT count(*) FROM request_shapes),"
                           " (SELECT count(*) FROM request_costs WHERE scenario = 'baseline')").fetchall()
    assert counts[0][0] == counts[0][1] > 0


INTRO = SECTION.split("\n| table |", 1)[0]
# Column-name patterns whose unit the section's opening paragraph must give, each with a column
# that has it: `*_s` reads as wall seconds, which a `*_gpu_s` column is not.
UNIT_PATTERNS = {"`*_gpu_s`": "busy_gpu_s", "`gpu_hours`": "gpu_hours", "`*_usd`": "spend_usd",
                 "`usd_per_*`": "usd_per_gpu_hour", "`*_tflops`": "peak_tflops",
                 "`*_gbs`": "hbm_bandwidth_gbs", "`link_gbs_one_way`": "link_gbs_one_way",
                 "`*_bytes_*`": "weight_bytes_per_gpu", "`memory_gib`": "memory_gib",
                 # fractions, as `*_share` columns are, without the suffix that says so
                 "`utilization`": "utilization", "`*kv_use`": "peak_kv_use"}


@pytest.mark.parametrize("pattern", sorted(UNIT_PATTERNS))
def test_the_opening_paragraph_gives_the_unit_of_every_unit_named_column(pattern):
    documented = set(re.findall(r"`(\w+)`", "\n".join(ROWS.values())))
    assert UNIT_PATTERNS[pattern] in documented
    assert pattern in INTRO, f"the units paragraph does not say what {pattern} is in"


def test_gpu_seconds_are_seconds_times_the_replica_s_gpus(demo_conn):
    """The opening paragraph's example: a bin's busy + idle GPU-seconds are its seconds times
    the GPUs of its replica, not its seconds."""
    worst = demo_conn.sql("""
        SELECT max(abs(t.busy_gpu_s + t.idle_gpu_s - t.bin_s * r.gpus_per_replica)), max(r.gpus_per_replica)
        FROM fleet_timeline AS t JOIN roofline AS r USING (deployment)""").fetchall()[0]
    assert worst[0] < 1e-9 and worst[1] > 1


def test_percentiles_are_quantile_cont_as_the_opening_paragraph_says(demo_conn):
    """An analyst recomputing a p95 from request_stages gets the table's number only with the
    same interpolation."""
    assert "`quantile_cont`" in INTRO
    worst = demo_conn.sql("""
        SELECT max(abs(f.p95_ttft_s - s.p95)), max(abs(f.p50_e2e_s - s.p50))
        FROM fleet_summary AS f
        JOIN (SELECT trace, quantile_cont(ttft_s, 0.95) AS p95, quantile_cont(e2e_s, 0.5) AS p50
              FROM request_stages WHERE scenario = 'baseline' GROUP BY trace) AS s USING (trace)""").fetchall()[0]
    assert max(worst) == 0


# Every column that may hold NULL, and the words of its table's README row that say when: an
# analyst's `WHERE x = ...` or `sum(x)` silently drops NULL rows, so none may be a surprise.
NULLABLE = {
    ("requests", "arrival_ts"): "null for a relative clock read without a start time",
    ("requests", "prefix_hashes"): "null where the log carries none",
    ("requests", "model"): "null where the log names none",
    ("requests", "tenant"): "null where the log names none",
    ("requests", "observed_ttft_s"): "null where the log has none",
    ("requests", "observed_e2e_s"): "null where the log has none",
    ("trace_files", "prefix_block_tokens"): "null for a log without prefix hashes",
    ("calibration", "implausible"): "null for a plausible fit",
    ("calibration", "outliers"): "null for none",
    ("roofline", "prefill_s_1k"): "null where the KV cache holds fewer than 1,024 tokens",
    ("request_stages", "tpot_s"): "null for a one-token answer",
    ("shape_spend", "p50_tpot_s"): "null for a shape of only those",
    ("shape_spend", "p95_tpot_s"): "null for a shape of only those",
    ("fleet_summary", "max_seqs"): "null on `all` over deployments of different limits",
    ("scenario_fleets", "prefix_cache"): "null where the scenario leaves them as logged",
    ("scenario_fleets", "output_cap"): "null where the scenario leaves them as logged",
    **{("scenario_fleets", c): "null on a skipped scenario's rows"
       for c in ("gpus_per_replica", "usd_per_gpu_hour", "span_s", "idle_gpu_s", "busy_gpu_s",
                 "decode_step_s_batch1_ctx1k")},
    ("scenario_fleets", "skipped"): "null otherwise",
    **{("what_if", c): "on `all` rows only (null on a shape's)"
       for c in ("baseline_fleet_usd", "fleet_spend_usd", "delta_fleet_usd", "delta_fleet_usd_per_day",
                 "worst_trace_delta_p95_ttft_s", "worst_trace_delta_p95_tpot_s")},
    ("what_if", "prefix_cache"): "null where the scenario has none",
    ("what_if", "skipped"): "null on a replayed one's rows",
}


@pytest.mark.parametrize(("table", "column"), sorted(NULLABLE))
def test_the_readme_row_says_when_a_nullable_column_is_null(table, column):
    assert f"`{column}`" in ROWS[table]
    assert NULLABLE[table, column] in ROWS[table], f"{table}.{column}: the README does not say when it is null"


def test_every_null_of_the_demo_warehouse_is_a_documented_one(demo_conn):
    found = set()
    for table in sorted(t for t in ROWS if "`data/reference/`" not in ROWS[t]):   # catalog CSVs as they are
        for column in _columns(demo_conn, table):
            nulls = demo_conn.sql(f'SELECT count(*) FROM "{table}" WHERE "{column}" IS NULL').fetchall()[0][0]
            if nulls:
                found.add((table, column))
    assert found and found - set(NULLABLE) == set()


def test_the_what_if_columns_of_all_rows_only_are_null_on_every_shape_row(demo_conn):
    """The `what_if` row lists the fleet's columns, which only an `all` row has, apart from
    the columns of every row (truncated_requests is each shape's too)."""
    clause = ROWS["what_if"].split("on `all` rows only", 1)[1].split("; on every row", 1)[0]
    listed = set(re.findall(r"`(\w+)`", clause))
    only_all = {c for c in _columns(demo_conn, "what_if") if demo_conn.sql(
        f"SELECT count(*) FILTER (WHERE shape <> 'all' AND {c} IS NOT NULL),"
        f" count(*) FILTER (WHERE shape = 'all' AND {c} IS NULL) FROM what_if WHERE skipped IS NULL"
    ).fetchall()[0] == (0, 0)}
    assert listed == only_all


def _row_unit(table: str) -> str:
    """The 'one row per' cell of a table's README row."""
    line = next(line for line in SECTION.splitlines() if line.startswith(f"| `{table}` |"))
    return line.split(" | ")[1]


VIEWS = SECTION.split("\nViews used by the steps", 1)[1]


def test_roofline_and_deployment_prices_hold_every_catalog_deployment_replayed_or_not(demo_conn):
    """The demo replays one deployment of six: an analyst who sums or lists `roofline` (or
    `deployment_prices`) gets all six, so the README says so, and names the view's columns."""
    catalog = {r[0] for r in demo_conn.sql("SELECT deployment FROM deployments").fetchall()}
    replayed = {r[0] for r in demo_conn.sql("SELECT DISTINCT deployment FROM request_stages").fetchall()}
    assert replayed < catalog
    for table in ("roofline", "deployment_prices"):
        assert {r[0] for r in demo_conn.sql(f"SELECT deployment FROM {table}").fetchall()} == catalog, table
    assert "replayed or not" in _row_unit("roofline")
    prices_text = VIEWS.split("`deployment_prices` (", 1)[1].split("`request_shapes`", 1)[0]
    assert "replayed or not" in prices_text
    assert {c for c in _columns(demo_conn, "deployment_prices") if f"`{c}`" not in prices_text} == set()


def test_the_ridge_point_and_the_compute_bound_batch_are_the_readme_s_formulas(demo_conn):
    """`decode_compute_bound_batch` is where a decode step's weight GEMMs alone turn compute-bound:
    with its KV reads and fixed overheads a replayed step of that batch is still memory-bound, so
    the README gives the formula rather than "where a step turns compute-bound"; the ridge point is
    of the effective figures, not the peaks."""
    row = ROWS["roofline"]
    assert "`effective_tflops` / `effective_bandwidth_gbs` × 1,000" in row
    assert ("`shared_weight_bytes_read_per_gpu` × `ridge_flops_per_byte` / (`flops_per_token_per_gpu` + "
            "`lm_head_flops_per_sequence_per_gpu`)") in row
    assert "KV-cache reads and fixed step overheads not counted" in row
    worst = demo_conn.sql("""
        SELECT max(abs(ridge_flops_per_byte / (1000 * effective_tflops / effective_bandwidth_gbs) - 1)),
               max(abs(decode_compute_bound_batch / (shared_weight_bytes_read_per_gpu * ridge_flops_per_byte
                   / (flops_per_token_per_gpu + lm_head_flops_per_sequence_per_gpu)) - 1)),
               count(*)
        FROM roofline WHERE expert_weight_bytes_per_gpu = 0""").fetchall()[0]
    assert worst[0] < 1e-12 and worst[1] < 1e-6 and worst[2] > 1


def test_allreduce_rounds_is_the_readme_s_text_not_a_count(demo_conn):
    """A column among the efficiency factors reads as a number; it is the rule's name."""
    assert "`allreduce_rounds` (text, log2 or ring:" in ROWS["roofline"]
    assert {r[0] for r in demo_conn.sql("SELECT DISTINCT allreduce_rounds FROM roofline").fetchall()} \
        <= {"log2", "ring"}


def test_a_rejected_row_s_source_file_is_its_trace_files_file(tmp_path):
    """rejected_requests has no trace column: "which trace lost rows, and why" joins
    source_file to trace_files.file, as its README row says."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "day1.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                     "2023-11-16 18:15:46.6805900,374,44\n"
                                     "2023-11-16 18:15:50.9951690,lots,44\n")
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_tables(conn)
        ingest_folder(conn, trace_files(folder))
        joined = conn.execute("SELECT f.trace, r.line FROM rejected_requests AS r "
                              "JOIN trace_files AS f ON f.file = r.source_file").fetchall()
    assert joined == [("day1", 3)]
    assert "`source_file` (the file, as `trace_files.file`" in ROWS["rejected_requests"]


def test_fleet_timeline_minute_arrivals_are_the_replayed_requests(demo_conn):
    """arrivals comes from request_stages: a request the replay set aside (unserved_requests)
    arrived too but is in no minute, so per trace they add up to fleet_summary.requests, not to
    requests' count; the README row says which."""
    assert "`arrivals` (replayed requests that arrived in its bins" in ROWS["fleet_timeline_minute"]
    off = demo_conn.sql("""
        SELECT count(*) FROM fleet_summary AS f
        JOIN (SELECT trace, sum(arrivals) AS arrivals FROM fleet_timeline_minute GROUP BY trace) AS m USING (trace)
        WHERE m.arrivals <> f.requests""").fetchall()[0][0]
    assert off == 0
