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
