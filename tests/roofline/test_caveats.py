"""Physics caveats: which deployments they name, and that the report's query finds those of the
replayed and what-if deployments. (That every row beyond 35% is under a caveat or explained is
tests/roofline/test_validation.py::test_rows_beyond_35_percent_are_caveats_or_explained.)"""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from pipelines.roofline import load_catalog
from pipelines.roofline.caveats import CAVEATS, caveats
from pipelines.warehouse import run_sql, write_table


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_caveats_name_the_classes(catalog):
    deepseek = catalog.build(model="deepseek-v3", gpu="h200-sxm", tp=8, weights="fp8")
    mixtral = catalog.build(model="mixtral-8x7b", gpu="h100-sxm", tp=2, weights="fp8")
    mi300x = catalog.build(model="llama-3.1-70b", gpu="mi300x", tp=8, weights="fp8")
    h100 = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    assert [c.name for c in CAVEATS if c.applies(deepseek)] == ["mla-moe"]
    assert caveats(mixtral) == [] and caveats(h100) == []  # MoE without MLA, dense on Hopper
    assert [c.name for c in CAVEATS if c.applies(mi300x)] == ["cdna3-decode"]
    assert "DeepSeek-V3" in deepseek.as_row()["caveat"] and h100.as_row()["caveat"] == ""


def test_report_caveats_are_those_of_the_replayed_and_what_if_deployments():
    conn = duckdb.connect()
    write_table(conn, "roofline", pl.DataFrame({
        "deployment": ["dense", "deepseek", "unused"], "caveat": ["", "MLA caveat", "MI300X caveat"]}))
    write_table(conn, "request_stages", pl.DataFrame({
        "deployment": ["dense", "deepseek"], "scenario": ["baseline", "baseline"]}))
    write_table(conn, "scenario_fleets", pl.DataFrame({
        "scenario": ["h200", "mi300x", "mi300x"],  # one row per trace
        "deployment": ["dense@h200", "dense@mi300x", "dense@mi300x"],
        "caveat": ["", "MI300X caveat", "MI300X caveat"]}))
    assert run_sql(conn, "report_caveats").fetchall() == [
        ("baseline", "deepseek: MLA caveat"),
        ("what_if", "what-if `mi300x` (dense@mi300x): MI300X caveat"),
    ]
