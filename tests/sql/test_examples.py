"""The README's SQL examples run in the `duckdb` shell against a freshly materialized warehouse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    warehouse = demo_run / "warehouse" / "fleetspend.duckdb"
    example = EXAMPLES[0].with_name("tenant_bill.sql")
    out = subprocess.run([str(DUCKDB_SHELL), "-readonly", "-csv", str(warehouse)],
                         input=example.read_text(), capture_output=True, text=True, timeout=60)
    header, *rows = out.stdout.strip().splitlines()
    usd = header.split(",").index("usd")
    total = sum(float(row.split(",")[usd]) for row in rows)
    tenant = "AzureLLMInferenceTrace_conv"
    expected = demo_conn.sql("SELECT attributed_usd FROM fleet_summary WHERE trace = ?", params=[tenant]).fetchall()[0][0]
    assert total == pytest.approx(expected, abs=0.005 * len(rows))  # lines are rounded to cents
