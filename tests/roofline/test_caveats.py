"""Physics caveats: which deployments they name, and that the report's query finds those of the
replayed and what-if deployments. (That every row beyond 35% is under a caveat or explained is
tests/roofline/test_validation.py::test_rows_beyond_35_percent_are_caveats_or_explained.)"""

from __future__ import annotations

import shutil

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



def test_the_cdna3_caveat_names_the_gpu_it_is_shown_for(catalog, tmp_path):
    """On a user's MI325X (family cdna3) the caveat said "MI300X decode: ...", a warning about
    another GPU; it names the MI325X and says its figures are MI300X runs. MI300X's is as it was."""
    shutil.copytree(catalog.directory, tmp_path / "reference")
    gpus = pl.read_csv(tmp_path / "reference" / "gpus.csv", infer_schema=False)
    prices = pl.read_csv(tmp_path / "reference" / "prices.csv", infer_schema=False)
    pl.concat([gpus, gpus.filter(pl.col("gpu") == "mi300x").with_columns(
        gpu=pl.lit("mi325x"), memory_gb=pl.lit("256"), memory_gib=pl.lit("255.98"))]
    ).write_csv(tmp_path / "reference" / "gpus.csv")
    pl.concat([prices, prices.filter((pl.col("gpu") == "mi300x") & (pl.col("is_default") == "true"))
               .with_columns(gpu=pl.lit("mi325x"))]).write_csv(tmp_path / "reference" / "prices.csv")
    mi325x = load_catalog(tmp_path / "reference").build(model="llama-3.1-70b", gpu="mi325x", tp=8)
    mi300x = catalog.build(model="llama-3.1-70b", gpu="mi300x", tp=8)
    [on_mi325x], [on_mi300x] = caveats(mi325x), caveats(mi300x)
    assert on_mi325x.startswith("mi325x decode (a CDNA3 GPU, costed with the cdna3 factors"
                                " estimated on MI300X; no measurement of mi325x is checked):"
                                " against AMD's and Oracle's vLLM runs on MI300X the modelled step")
    assert "MI300X decode" not in on_mi325x
    assert on_mi300x.startswith("MI300X decode: against AMD's and Oracle's vLLM runs the modelled")
    assert on_mi300x.split(" the modelled step ")[1] == on_mi325x.split(" the modelled step ")[1]

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
