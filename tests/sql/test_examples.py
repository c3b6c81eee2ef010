"""The README's SQL examples run in the `duckdb` shell against a freshly materialized warehouse."""

from __future__ import annotations

import csv
import datetime as dt
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import polars as pl
import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "sql" / "examples").glob("*.sql"))
DUCKDB_SHELL = Path(sys.executable).with_name("duckdb")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_in_duckdb_shell(example, demo_run):
    warehouse = demo_run / "warehouse" / "fleetspend.duckdb"
    out = subprocess.run([str(DUCKDB_SHELL), "-readonly", "-csv", str(warehouse)],
                         input=example.read_text(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    header, *rows = out.stdout.strip().splitlines()
    assert len(rows) >= 2, out.stdout


def test_there_are_examples():
    assert len(EXAMPLES) >= 3


def test_tenant_bill_adds_up_to_the_tenants_spend(demo_run, demo_conn):
    """The bill's lines (the trace stands in for the tenant) sum to that trace's attributed spend."""
    header, *rows = _shell_csv(demo_run, "tenant_bill.sql").strip().splitlines()
    usd = header.split(",").index("usd")
    total = sum(float(row.split(",")[usd]) for row in rows)
    tenant = "AzureLLMInferenceTrace_conv"
    expected = demo_conn.sql("SELECT attributed_usd FROM fleet_summary WHERE trace = ?", params=[tenant]).fetchall()[0][0]
    assert total == pytest.approx(expected, abs=0.005 * len(rows))  # lines are rounded to cents


def test_deployment_bill_adds_up_to_the_fleets_bill(demo_run, demo_conn):
    """Each deployment's `all` line is its traces' lines together, and the fleet's bill (busy +
    idle) is fleet_summary's, at each deployment's price."""
    bill = pl.read_csv(_shell_csv(demo_run, "deployment_bill.sql").encode())
    totals = bill.filter(pl.col("trace") == "all")
    lines = bill.filter(pl.col("trace") != "all")
    assert totals["deployment"].to_list() == ["azure-2023-70b-h100"]
    assert totals["requests"].sum() == lines["requests"].sum() == demo_conn.sql(
        "SELECT count(*) FROM request_stages WHERE scenario = 'baseline'").fetchall()[0][0]
    [(spend, idle)] = demo_conn.sql("SELECT spend_usd, idle_usd FROM fleet_summary WHERE trace = 'all'").fetchall()
    assert totals["usd"].sum() == pytest.approx(spend, abs=0.005)
    assert totals["idle_usd"].sum() == pytest.approx(idle, abs=0.005)
    assert lines["usd"].sum() == pytest.approx(spend, abs=0.005 * lines.height)
    assert totals["pct_of_bill"].sum() == pytest.approx(100.0)


def _utc_hours(demo_conn) -> dict[tuple[str, str], int]:
    """Baseline requests per trace and UTC hour of the first UTC day, counted in Python from
    the aware datetimes DuckDB hands over (whatever zone they come in), not by DuckDB's calendar."""
    rows = demo_conn.sql("SELECT r.trace, r.arrival_ts FROM request_stages AS s "
                         "JOIN requests AS r USING (trace, request_id) "
                         "WHERE s.scenario = 'baseline' AND r.arrival_ts IS NOT NULL").fetchall()
    utc = [(trace, ts.astimezone(dt.timezone.utc)) for trace, ts in rows]
    first_day = min(ts.date() for _, ts in utc)
    return Counter((trace, f"{ts:%Y-%m-%d %H}:00:00") for trace, ts in utc if ts.date() == first_day)


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/Los_Angeles", "Pacific/Kiritimati"])
def test_ttft_day_buckets_utc_days_and_hours_in_any_session_time_zone(zone, demo_run, demo_conn):
    """arrival_ts is UTC (README): the example's day and hours are UTC ones, whether the shell's
    TimeZone comes from TZ or from a SET earlier in the session."""
    warehouse = demo_run / "warehouse" / "fleetspend.duckdb"
    example = EXAMPLES[0].with_name("ttft_day.sql")
    out = subprocess.run([str(DUCKDB_SHELL), "-readonly", "-csv", str(warehouse)],
                         input=f"SET TimeZone = '{zone}';\n{example.read_text()}",
                         env={**os.environ, "TZ": zone}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    table = list(csv.DictReader(out.stdout.strip().splitlines()))
    got = {(row["trace"], row["hour_utc"]): int(row["requests"]) for row in table}
    expected = _utc_hours(demo_conn)
    assert got == expected and sum(got.values()) > 0


def test_ttft_day_leaves_the_sessions_time_zone_alone(demo_run):
    """Pasted into a longer session, the example does not change its TimeZone."""
    with duckdb.connect(str(demo_run / "warehouse" / "fleetspend.duckdb"), read_only=True) as conn:
        conn.execute("SET TimeZone = 'Asia/Kolkata'")
        conn.execute(EXAMPLES[0].with_name("ttft_day.sql").read_text()).fetchall()
        assert conn.execute("SELECT current_setting('TimeZone')").fetchone()[0] == "Asia/Kolkata"


def _readme_python() -> str:
    """The Python block of the README's "SQL against the warehouse" section."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("\n## SQL against the warehouse\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def test_the_readme_python_reads_the_warehouse_into_polars(demo_run, tmp_path, monkeypatch):
    """The README's Polars snippet runs as written from a clone's root (here a folder whose
    data/warehouse is the demo run's) and closes its connection."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "warehouse").symlink_to(demo_run / "warehouse")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(_readme_python(), namespace)  # noqa: S102 - the README's own example
    shapes = namespace["shapes"]
    assert isinstance(shapes, pl.DataFrame) and shapes["rank"].to_list() == list(range(1, shapes.height + 1))
    assert shapes["pct_spend"].sum() == pytest.approx(100)
    with pytest.raises(duckdb.ConnectionException):
        namespace["conn"].execute("SELECT 1")


def test_no_warehouse_column_is_a_hugeint(demo_conn):
    """The README tells Polars users to cast their own integer sums, which DuckDB makes HUGEINT
    (Polars: Decimal(38, 0)), 'as the examples do': the tables and views must not hand them one."""
    wide = demo_conn.sql("SELECT table_name, column_name, data_type FROM information_schema.columns"
                         " WHERE data_type = 'HUGEINT' OR data_type LIKE 'DECIMAL%'").fetchall()
    assert wide == []


def _shell_csv(demo_run, name: str) -> str:
    """What the `duckdb` shell prints for sql/examples/<name> on the demo warehouse, as CSV."""
    warehouse = demo_run / "warehouse" / "fleetspend.duckdb"
    out = subprocess.run([str(DUCKDB_SHELL), "-readonly", "-csv", str(warehouse)],
                         input=EXAMPLES[0].with_name(name).read_text(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    return out.stdout


def _shell_rows(demo_run, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(_shell_csv(demo_run, name).strip().splitlines()))


def test_latency_by_trace_splits_each_traces_e2e_time_and_matches_the_fleet_summary(demo_run, demo_conn):
    """Its comment: where the end-to-end time goes, per trace: the four stage shares (rounded to
    0.1) add up to 100, and its percentiles are fleet_summary's."""
    rows = _shell_rows(demo_run, "latency_by_trace.sql")
    summary = {t: (n, ttft) for t, n, ttft in demo_conn.sql(
        "SELECT trace, requests, p95_ttft_s FROM fleet_summary WHERE trace <> 'all'").fetchall()}
    assert {row["trace"] for row in rows} == set(summary)
    assert {row["deployment"] for row in rows} == {"azure-2023-70b-h100"}   # each trace's
    for row in rows:
        shares = sum(float(row[f"{stage}_pct"]) for stage in ("queue", "prefill", "decode", "network"))
        assert shares == pytest.approx(100, abs=0.2)
        assert int(row["requests"]) == summary[row["trace"]][0]
        assert float(row["p95_ttft_s"]) == pytest.approx(summary[row["trace"]][1], abs=0.0006)
