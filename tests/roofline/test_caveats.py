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
    h100 = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=2, weights="fp8")
    h100_tp4 = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    b200_tp8 = catalog.build(model="llama-3.1-70b", gpu="b200", tp=8, weights="fp4")

    def named(d):
        return [c.name for c in CAVEATS if c.applies(d)]

    # MLA + MoE and MI300X keep their own caveat only, at tp 8 too
    assert named(deepseek) == ["mla-moe"] and named(mi300x) == ["cdna3-decode"]
    assert caveats(mixtral) == [] and caveats(h100) == []  # MoE without MLA, dense on Hopper
    assert named(h100_tp4) == ["high-tp-heavy-decode"]
    assert named(b200_tp8) == ["high-tp-heavy-decode"]
    b200_deepseek = catalog.build(model="deepseek-v3", gpu="b200", tp=8, weights="fp8")
    assert named(b200_deepseek) == ["mla-moe"]
    assert "DeepSeek-V3" in deepseek.as_row()["caveat"] and h100.as_row()["caveat"] == ""
    assert h100_tp4.as_row()["caveat"].startswith("Tensor parallelism 4-8 under heavy decode")


def test_report_caveats_are_those_of_the_replayed_and_what_if_deployments():
    """Each caveat once: a baseline one with the deployments it applies to; a what-if one with
    the scenarios it applies to, unless the baseline already says it (a cell holds one caveat
    per line)."""
    conn = duckdb.connect()
    write_table(conn, "roofline", pl.DataFrame({
        "deployment": ["dense", "deepseek", "unused"],
        "caveat": ["TP caveat", "MLA caveat\nTP caveat", "MI300X caveat"]}))
    write_table(conn, "request_stages", pl.DataFrame({
        "deployment": ["dense", "deepseek"], "scenario": ["baseline", "baseline"]}))
    write_table(conn, "scenario_fleets", pl.DataFrame({
        "scenario": ["h200", "mi300x", "mi300x", "b200", "tp2"],  # one row per trace
        "deployment": ["dense@h200", "dense@mi300x", "dense@mi300x", "dense@b200", "dense-tp2"],
        "caveat": ["TP caveat", "MI300X caveat", "MI300X caveat", "TP caveat\nB200 caveat",
                   "B200 caveat"]}))
    assert run_sql(conn, "report_caveats").fetchall() == [
        ("baseline", "deepseek, dense: TP caveat"),
        ("baseline", "deepseek: MLA caveat"),
        ("what_if", "what-if `b200`, `tp2`: B200 caveat"),
        ("what_if", "what-if `mi300x`: MI300X caveat"),
    ]


def test_a_deployment_under_two_caveats_has_one_per_line(catalog):
    mi300x = catalog.build(model="deepseek-v3", gpu="mi300x", tp=8, weights="fp8")
    assert mi300x.as_row()["caveat"].split("\n") == caveats(mi300x) and len(caveats(mi300x)) == 2
