"""The reference catalog (data/reference/*.csv) and the roofline physics derived from it."""

from __future__ import annotations

import csv
import math
import re
import shutil
import warnings
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.roofline import CatalogError, load_catalog
from pipelines.roofline.catalog import DEFAULT_REFERENCE_DIR, TABLES, load_shape_buckets
from pipelines.roofline.deployment import Network
from pipelines.roofline.step import ALLREDUCE_LATENCY_S, weight_bytes


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture()
def copied(tmp_path):
    """A copy of the reference catalog's files in a temporary folder, for a test to break."""
    for table in TABLES:
        shutil.copy(load_catalog().file(table), tmp_path / f"{table}.csv")
    return tmp_path


# ---- the files ------------------------------------------------------------------------------

def test_load_catalog_reads_every_table(catalog):
    for table in TABLES:
        frame = getattr(catalog, table)
        assert frame.height > 0, table
        assert catalog.file(table).is_file()
    assert {"seed-example", "azure-2023-70b-h100"} <= set(catalog.deployment_names)


def test_number_columns_keep_their_type_whatever_their_values(catalog):
    """The warehouse's catalog tables are these frames: a column's type must not depend on the
    values written in it (deployments' overheads hold only 0 or blanks, which alone read as
    integers; an operator's 0.0015 in one row would then change the table's schema)."""
    from pipelines.roofline.catalog import NUMBER_RANGES

    for table, rules in NUMBER_RANGES.items():
        frame = getattr(catalog, table)
        for column, rule in rules.items():
            if column in frame.columns:
                assert frame[column].dtype == (pl.Int64 if rule.whole else pl.Float64), (table, column)


@pytest.mark.parametrize("table", ["gpus", "models", "prices", "gpu_efficiency", "deployments"])
def test_every_row_has_a_source(catalog, table):
    frame = getattr(catalog, table)
    assert "source" in frame.columns
    missing = frame.filter(pl.col("source").is_null() | (pl.col("source").str.strip_chars() == ""))
    assert missing.height == 0, f"{table} rows without a source: {missing.head(3).to_dicts()}"


def test_b200_memory_bandwidth_is_the_hgx_b200_figure_its_source_gives(catalog):
    """The b200 row is the HGX B200 (1000 W, 180 GB) and cites NVIDIA's HGX page, whose HGX B200
    column gives 7.7 TB/s per GPU (62 TB/s per 8); 8 TB/s is the B200 as announced (192 GB) and
    GB200's. The driver agrees: a 7,680-bit bus at 3,996 MHz, 7.67 TB/s (pytorch/ao#4002)."""
    b200 = catalog.gpus.filter(pl.col("gpu") == "b200").row(0, named=True)
    assert (b200["memory_gb"], b200["board_power_w"]) == (180, 1000)
    assert b200["hbm_bandwidth_gbs"] == 7700
    assert "7.7TB/s" in b200["source"]


def test_the_documents_give_the_efficiency_factors_the_catalog_has(catalog):
    """docs/physics.md's table of efficiency factors and data/reference/README.md's account of
    the `current` rows give each family's compute and bandwidth efficiency as gpu_efficiency.csv
    has them (the README had kept blackwell's 0.55 when the row became 0.571, the same
    effective bandwidth against B200's corrected 7.7 TB/s)."""
    root = catalog.directory.parents[1]
    physics = (root / "docs" / "physics.md").read_text()
    readme = " ".join((root / "data" / "reference" / "README.md").read_text().split())
    for row in catalog.gpu_efficiency.iter_rows(named=True):
        factors = f"{row['compute_efficiency']:g} | {row['bandwidth_efficiency']:g}"
        assert re.search(rf"^\| {row['family']} \| {row['stack']} \| {factors} \|", physics,
                         re.MULTILINE), (row["family"], row["stack"])
    blackwell = catalog.gpu_efficiency.filter(
        (pl.col("family") == "blackwell") & (pl.col("stack") == "current")).row(0, named=True)
    compute, bandwidth = blackwell["compute_efficiency"], blackwell["bandwidth_efficiency"]
    assert f"blackwell bandwidth efficiency {bandwidth:g} (ESTIMATE" in readme
    assert f"blackwell {compute:.2f} / {bandwidth:g} from the TensorRT-LLM B200 FP4 rows" in readme


def test_each_gpu_has_exactly_one_default_price(catalog):
    defaults = (
        catalog.gpus.select("gpu")
        .join(catalog.prices.filter(pl.col("is_default")).group_by("gpu").len(), on="gpu", how="left")
        .with_columns(pl.col("len").fill_null(0))
    )
    assert defaults.filter(pl.col("len") != 1).height == 0, defaults.to_dicts()


def test_every_named_deployment_builds(catalog):
    for name in catalog.deployment_names:
        d = catalog.deployment(name)
        assert d.name == name
        assert d.kv_capacity_tokens > 0
        assert d.kv_capacity_tokens % d.scheduler.kv_block_tokens == 0
        assert catalog.usd_per_gpu_hour(d) > 0
        row = d.as_row()
        assert row["deployment"] == name and row["kv_capacity_tokens"] == d.kv_capacity_tokens


def test_named_deployment_takes_its_row(catalog):
    d = catalog.deployment("azure-2023-70b-h100")
    assert (d.model.model, d.gpu.gpu, d.tp, d.replicas) == ("llama-3.1-70b", "h100-sxm", 4, 3)
    assert d.scheduler.max_seqs == 256 and d.scheduler.max_batched_tokens == 8192
    seed = catalog.deployment("seed-example")
    # the row overrides the family's efficiency factors and overheads
    assert seed.efficiency.compute_efficiency == pytest.approx(0.45)
    assert seed.efficiency.bandwidth_efficiency == pytest.approx(0.85)
    assert seed.efficiency.step_overhead_s == 0 and seed.efficiency.layer_overhead_s == 0
    assert seed.network.one_way_s == pytest.approx(0.1)


def test_build_ad_hoc_and_fp8_halves_weights(catalog):
    bf16 = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    fp8 = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4, weights="fp8")
    gpus = catalog.gpus.filter(pl.col("gpu") == "h100-sxm").row(0, named=True)
    vocab = 2 * 128256 * 8192 / 4 * 2  # the embedding table and LM head, 16-bit in both
    assert bf16.weight_bytes_per_gpu == pytest.approx(70.6e9 * 2 / 4)
    assert fp8.weight_bytes_per_gpu - vocab == pytest.approx((bf16.weight_bytes_per_gpu - vocab) / 2)
    assert bf16.gpu.peak_tflops == gpus["bf16_tflops"]
    assert fp8.gpu.peak_tflops == gpus["fp8_tflops"]
    assert fp8.effective_flops == pytest.approx(2 * bf16.effective_flops, rel=1e-3)
    assert fp8.kv_dtype == "fp8"  # the KV cache follows the weights unless told otherwise
    assert fp8.kv_capacity_tokens > bf16.kv_capacity_tokens
    assert (bf16.price_provider, bf16.price_plan) == ("coreweave", "on-demand")


# ---- errors name the bad value ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"model": "llama-9-7b", "gpu": "h100-sxm"}, "llama-9-7b"),
        ({"model": "llama-3.1-8b", "gpu": "h900"}, "h900"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "fp7"}, "fp7"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "kv_cache": "int3"}, "int3"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 0}, "tp=0"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "max_batch": 64}, "max_batch"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "price_provider": "aws",
          "price_plan": "lifetime"}, "lifetime"),
        ({"model": "llama-3.1-8b", "gpu": "mi300x", "weights": "fp4"}, "fp4"),
        ({"model": "llama-3.1-405b", "gpu": "l4", "tp": 1}, "llama-3.1-405b"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "kv_memory_basis": "spare"}, "spare"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "kv_reservation": "half"}, "half"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 4.5},
         "tp=4.5: expected a whole number in [1, 8]"),
        ({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 64},   # was built, NVLink figures
         "tp=64: expected a whole number in [1, 8]"),                # across eight nodes
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "replicas": 0},
         "replicas=0: expected a whole number >= 1"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "kv_memory_fraction": 1.5},
         "kv_memory_fraction=1.5: expected a number in (0, 1]"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "step_overhead_s": -0.001},
         "step_overhead_s=-0.001: expected a number >= 0"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "network": Network(one_way_s=-5)},
         "net_one_way_s=-5: expected a number >= 0"),
        # deployments.csv's column names, which build() spells otherwise, were called unknown
        # scheduler options, listing only the scheduler's
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weight_dtype": "fp8", "kv_dtype": "fp8"},
         "unknown option(s) ['kv_dtype', 'weight_dtype'] (in build(), deployments.csv's kv_dtype is"
         " kv_cache=, weight_dtype is weights=)"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "replica": 2},
         "unknown option(s) ['replica'] (did you mean replicas=?): expected build()'s"),
        # a column name beside a misspelling: the misspelling kept its hint; deployments.csv's
        # key column is build()'s name=
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weight_dtype": "fp8", "replica": 2},
         "unknown option(s) ['replica', 'weight_dtype'] (in build(), deployments.csv's weight_dtype"
         " is weights=; did you mean replicas=?): expected"),
        ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "deployment": "mine"},
         "unknown option(s) ['deployment'] (in build(), deployments.csv's deployment is name=)"),
    ],
    ids=["model", "gpu", "dtype", "kv-dtype", "tp0", "scheduler-option", "price-plan",
         "no-fp4-on-mi300x", "too-large", "kv-memory-basis", "kv-reservation", "tp-fraction", "tp64",
         "replicas0", "kv-memory-fraction", "negative-overhead", "negative-latency", "csv-column-names",
         "misspelt-option", "column-and-misspelt", "deployment-column"],
)
def test_build_rejects_bad_requests(catalog, kwargs, named):
    with pytest.raises(CatalogError) as info:
        catalog.build(**kwargs)
    assert named in str(info.value)


def test_unknown_deployment_lists_the_choices(catalog):
    with pytest.raises(CatalogError, match="no-such-fleet") as info:
        catalog.deployment("no-such-fleet")
    assert "seed-example" in str(info.value)


def test_a_misspelt_name_is_answered_with_the_closest_choice_first(catalog):
    """A one-letter typo in a deployment (a sidecar's, FLEETSPEND_DEPLOYMENT) or a GPU (a
    scenario's) was answered with the file's every choice, the right one to be found among them."""
    with pytest.raises(CatalogError, match=r"^unknown deployment 'seed-exampel': did you mean"
                                           r" 'seed-example'\? .*deployments\.csv has "):
        catalog.deployment("seed-exampel")
    with pytest.raises(CatalogError, match=r"unknown gpu 'h100-sxn': did you mean 'h100-sxm'\? "):
        catalog.build(model="llama-3.1-8b", gpu="h100-sxn")
    with pytest.raises(CatalogError) as info:
        catalog.deployment("zzzzzz")
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"weights": "FP8"}, r"^weights='FP8': did you mean 'fp8'\? expected one of bf16, fp16, fp8, int8,"
                         r" fp4$"),
    ({"weights": "bfloat16"}, r"^weights='bfloat16': did you mean 'bf16'\? expected one of bf16, "),
    ({"kv_cache": "fp9"}, r"^kv_cache='fp9': did you mean 'fp8'\? expected one of "),
    ({"model": "LLAMA-3.1-8B"}, r"^unknown model 'LLAMA-3.1-8B': did you mean 'llama-3.1-8b'\? "),
    ({"price_provider": "coreweave", "price_plan": "on-demnd"},
     r"^no price for gpu 'h100-sxm' from provider 'coreweave' plan 'on-demnd' in .*prices\.csv;"
     r" did you mean 'coreweave on-demand'\? its prices: coreweave on-demand, lambda on-demand"),
    ({"price_provider": "AWS", "price_plan": "On-Demand"},
     r"did you mean 'aws on-demand'\? its prices: "),
], ids=["dtype-case", "dtype-spelt-out", "dtype-typo", "model-case", "plan-typo", "plan-case"])
def test_a_misspelt_dtype_or_price_plan_is_answered_with_the_closest_choice(catalog, kwargs, said):
    """The model, GPU, stack and deployment names had a near miss named (did_you_mean), the
    dtypes and price plans only the list of choices, and no name written in other capitals
    (FP8, a model as its Hugging Face repository spells it) was found close to its own."""
    with pytest.raises(CatalogError, match=said):
        catalog.build(**{"model": "llama-3.1-8b", "gpu": "h100-sxm", **kwargs})


@pytest.mark.parametrize(("call", "said"), [
    (lambda c: c.build(model=None, gpu="h100-sxm"), r"^unknown model None: .*models\.csv has deepseek"),
    (lambda c: c.build(model=["llama-3.1-8b"], gpu="h100-sxm"),
     r"^unknown model \['llama-3\.1-8b'\]: did you mean 'llama-3\.1-8b'\? .*models\.csv has deepseek"),
    (lambda c: c.build(model="llama-3.1-8b", gpu=3), r"^unknown gpu 3: .*gpus\.csv has a10, "),
    (lambda c: c.build(model="llama-3.1-8b", gpu="h100-sxm", stack=None),
     r"^unknown serving stack for hopper GPUs None: .*gpu_efficiency\.csv has current, "),
    (lambda c: c.deployment(5), r"^unknown deployment 5: .*deployments\.csv has aibrix"),
    (lambda c: c.build(model="llama-3.1-8b", gpu="h100-sxm", weights=["fp8"]),
     r"^weights=\['fp8'\]: did you mean 'fp8'\? expected one of bf16, fp16, fp8, int8, fp4$"),
    (lambda c: c.build(model="llama-3.1-8b", gpu="h100-sxm", kv_cache={"fp8"}),
     r"^kv_cache=\{'fp8'\}: did you mean 'fp8'\? expected one of bf16, fp16, fp8, int8, fp4$"),
    (lambda c: c.build(model="llama-3.1-8b", gpu="h100-sxm", price_provider=["coreweave"],
                       price_plan="on-demand"),
     r"^no price for gpu 'h100-sxm' from provider \['coreweave'\] plan 'on-demand' in .*prices\.csv;"
     r" did you mean 'coreweave on-demand'\? its prices: coreweave on-demand, "),
])
def test_a_name_that_is_not_text_is_an_unknown_name(catalog, call, said):
    """build(model=None) printed polars' 'Comparisons with None always result in null' before
    the CatalogError, and a list or a number for a name raised polars' InvalidOperationError or
    ComputeError: the filter compared the name column with it. Any such name is unknown, said
    as one, with the choices: a dtype in a list raised "unhashable type: 'list'" and a price
    provider in one polars' InvalidOperationError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CatalogError, match=said):
            call(catalog)


def test_kv_pool_of_free_memory_leaves_the_runtime_its_share(catalog):
    """TensorRT-LLM reads its fraction of the memory left after weights, activations, its
    runtime and NCCL buffers, less the block pool's 1.5%; vLLM reads it of the whole device."""
    from pipelines.roofline.deployment import (
        GIB, TRTLLM_BLOCK_POOL_OVERHEAD, TRTLLM_NCCL_BYTES_TP2, TRTLLM_RUNTIME_BYTES)

    free = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=2, weights="fp8",
                         kv_memory_basis="free")
    left = (free.gpu.memory_gib * GIB - free.weight_bytes_per_gpu - free.activation_bytes_per_gpu
            - TRTLLM_RUNTIME_BYTES - TRTLLM_NCCL_BYTES_TP2)
    pool = 0.9 * left * (1 - TRTLLM_BLOCK_POOL_OVERHEAD)
    assert free.kv_capacity_tokens == int(pool // free.kv_bytes_per_token) // 16 * 16
    # all of the memory: vLLM's reading gives the KV cache everything beyond weights and
    # activations, TensorRT-LLM's still leaves its runtime and NCCL buffers their share
    everything = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 2, "weights": "fp8",
                  "kv_memory_fraction": 1.0}
    of_free = catalog.build(**everything, kv_memory_basis="free").kv_capacity_tokens
    of_total = catalog.build(**everything).kv_capacity_tokens
    kept = (of_total - of_free) * free.kv_bytes_per_token
    assert kept > TRTLLM_RUNTIME_BYTES + TRTLLM_NCCL_BYTES_TP2
    assert catalog.deployment("seed-example").scheduler.kv_memory_basis == "total"


def test_tensorrt_llms_memory_basis_is_refused_on_a_gpu_it_does_not_run_on(catalog):
    """The free-memory basis is TensorRT-LLM's, with its CUDA runtime and NCCL buffers;
    TensorRT-LLM runs on NVIDIA GPUs only, so an MI300X read that way is no engine's."""
    with pytest.raises(CatalogError, match=r"kv_memory_basis='free' on mi300x: .*TensorRT-LLM.*"
                                           r" NVIDIA GPUs only.*expected kv_memory_basis='total'"):
        catalog.build(model="llama-3.1-70b", gpu="mi300x", kv_memory_basis="free")
    assert catalog.build(model="llama-3.1-70b", gpu="mi300x").scheduler.kv_memory_basis == "total"


@pytest.mark.parametrize("vendor", ["Nvidia", "nvidia", "NVIDIA Corporation"])
def test_tensorrt_llms_memory_basis_is_taken_on_an_nvidia_gpu_however_its_vendor_is_spelt(
        copied, vendor):
    """A gpus.csv row of vendor 'Nvidia' was refused the free basis as a GPU TensorRT-LLM does
    not run on ('runs on NVIDIA GPUs only, not Nvidia's')."""
    _set_gpu_cell(copied, "h100-sxm", "vendor", vendor)
    d = load_catalog(copied).build(model="llama-3.1-8b", gpu="h100-sxm", kv_memory_basis="free")
    assert d.scheduler.kv_memory_basis == "free"


def test_deployments_file_without_a_memory_basis_reads_fractions_as_vllm_does(copied):
    """kv_memory_basis is optional in deployments.csv (files written before it existed)."""
    pl.read_csv(copied / "deployments.csv").drop("kv_memory_basis").write_csv(
        copied / "deployments.csv")
    old = load_catalog(copied).deployment("seed-example")
    assert old.scheduler.kv_memory_basis == "total"
    assert old.kv_capacity_tokens == load_catalog().deployment("seed-example").kv_capacity_tokens


def _with_graph_sizes(copied, seed_cell: str) -> None:
    """deployments.csv with the optional graph_batch_sizes column: `seed_cell` on seed-example,
    empty on the other rows."""
    frame = pl.read_csv(copied / "deployments.csv")
    frame.with_columns(graph_batch_sizes=pl.when(pl.col("deployment") == "seed-example")
                       .then(pl.lit(seed_cell)).otherwise(pl.lit(""))).write_csv(
        copied / "deployments.csv")


def test_deployments_file_may_pad_decode_steps_to_cuda_graph_sizes(copied):
    """graph_batch_sizes is optional in deployments.csv: sizes separated by ';', empty for no
    padding (docs/physics.md section 1)."""
    _with_graph_sizes(copied, "1;2;4;8;16;32;64;128;256")
    catalog = load_catalog(copied)
    assert catalog.deployment("seed-example").scheduler.graph_batch_sizes == (
        1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert catalog.deployment("azure-2023-70b-h100").scheduler.graph_batch_sizes == ()
    assert load_catalog().deployment("seed-example").scheduler.graph_batch_sizes == ()


@pytest.mark.parametrize("cell", ["1;two;4", "8,16", "0;8"])
def test_deployments_file_graph_sizes_that_are_not_sizes_are_named(copied, cell):
    _with_graph_sizes(copied, cell)
    with pytest.raises(CatalogError, match=r"deployments\.csv, deployment 'seed-example':"
                                           r".*graph_batch_sizes.*CUDA-graph batch sizes"):
        load_catalog(copied).deployment("seed-example")


def test_a_line_with_more_fields_than_the_header_is_named(copied):
    """A price typed with a decimal comma (or prose with an unquoted comma) gives its line one
    field too many: the message names that line, not the CSV parser's option to truncate it."""
    with open(copied / "prices.csv", "a") as f:
        f.write("h100-sxm,nebius,reserved-1y,2,50,2026-10,false,our contract,\n")
    lines = (copied / "prices.csv").read_text().count("\n")
    with pytest.raises(CatalogError) as err:
        load_catalog(copied)
    assert str(err.value) == (
        f"catalog file {copied / 'prices.csv'} is not a readable CSV: line {lines} has 9 fields,"
        f" more than the 8 columns of the header (a value with a comma in it must be quoted, and"
        f" a decimal written with a point: 2.50, not 2,50)")


def test_a_catalog_file_cut_inside_a_quoted_value_is_one_line(copied):
    """A catalog file copied half-way (rsync cut off) ends inside a quoted source: the message
    was Polars' whole text, advice on infer_schema_length and ignore_errors included; it is one
    line with Polars' reason."""
    gpus = copied / "gpus.csv"
    text = gpus.read_text()
    gpus.write_text(text[: text.index('"', text.index("\n")) + 10])
    with pytest.raises(CatalogError) as err:
        load_catalog(copied)
    message = str(err.value)
    assert message.startswith(f"catalog file {gpus} is not a readable CSV: Field ")
    assert message.endswith("is not properly escaped.") and "\n" not in message


def test_a_file_saved_with_every_cell_quoted_and_cleared_rows_reads_as_written(copied):
    """A spreadsheet or script that quotes every cell writes an empty one as "" (an empty GPU
    peak, MLA rank or price plan) and may keep cleared rows (",,,,"): empty values, and no
    rows. They were 'fp8_tflops='': expected a number' and 'row 'None': gpu is empty'."""
    for table in TABLES:
        rows = list(csv.reader(open(copied / f"{table}.csv", newline="")))
        rows += [[""] * len(rows[0])] * 2
        with open(copied / f"{table}.csv", "w", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    assert '"a100-80gb-sxm","NVIDIA A100 80GB SXM4","NVIDIA","ampere","80","80.0","2039","312",""' \
        in (copied / "gpus.csv").read_text()
    quoted, shipped = load_catalog(copied), load_catalog()
    for name in shipped.deployment_names:
        assert quoted.deployment(name).as_row() == shipped.deployment(name).as_row()
    assert quoted.prices.height == shipped.prices.height


def test_missing_catalog_file_is_named(copied):
    assert load_catalog(copied).directory == copied
    (copied / "prices.csv").unlink()
    with pytest.raises(CatalogError, match="prices.csv"):
        load_catalog(copied)


def test_empty_catalog_folder_is_named(tmp_path):
    with pytest.raises(CatalogError) as info:
        load_catalog(tmp_path)
    assert str(tmp_path) in str(info.value)


# ---- physics sanity ----------------------------------------------------------------------------

def test_decode_step_grows_with_batch_and_context(catalog):
    d = catalog.deployment("azure-2023-70b-h100")
    by_batch = [d.decode_step_s(b, 1024 * b) for b in (1, 2, 8, 32, 128, 512)]
    assert all(a < b for a, b in zip(by_batch, by_batch[1:]))
    by_context = [d.decode_step_s(8, ctx) for ctx in (8, 1_000, 10_000, 100_000)]
    assert all(a < b for a, b in zip(by_context, by_context[1:]))
    # batching amortizes the weight read: 32 sequences cost far less than 32 lone steps
    assert d.decode_step_s(32, 32 * 1024) < 4 * d.decode_step_s(1, 1024)


@pytest.mark.parametrize(("call", "message"), [
    (lambda d: d.prefill_s(0), "prompt_tokens=0: expected a whole number >= 1"),
    (lambda d: d.prefill_s(-5), "prompt_tokens=-5: expected a whole number >= 1"),
    (lambda d: d.prefill_s(1.5), "prompt_tokens=1.5: expected a whole number >= 1"),
    (lambda d: d.prefill_s(True), "prompt_tokens=True: expected a whole number >= 1"),
    (lambda d: d.prefill_s(100, 100), "cached_tokens=100 with prompt_tokens=100: expected fewer cached"),
    (lambda d: d.prefill_s(100, -1), "cached_tokens=-1: expected a whole number >= 0"),
    (lambda d: d.prefill_batch_s(0, 100), "batch_size=0: expected a whole number >= 1"),
    (lambda d: d.decode_step_s(0, 100), "batch_size=0: expected a whole number >= 1"),
    (lambda d: d.decode_step_s(3.5, 100), "batch_size=3.5: expected a whole number >= 1"),
    (lambda d: d.decode_step_s(8, 7), "context_tokens=7: expected a whole number >= 8"),
    (lambda d: d.max_throughput_tok_s(128, 0), "output_tokens=0: expected a whole number >= 1"),
])
def test_the_api_refuses_counts_that_are_not_whole_or_too_small(catalog, call, message):
    """A negative, fractional or boolean count would otherwise come back as a plausible duration."""
    with pytest.raises(ValueError, match=re.escape(message)):
        call(catalog.deployment("seed-example"))


def test_a_prompt_the_kv_cache_cannot_hold_is_refused(catalog):
    """prefill_s(10**9) returned 1.87e9 s, and 10**30 never returned (one Python pass per
    chunk); the replay refuses such a request, and so does the API."""
    d = catalog.deployment("seed-example")
    assert d.prefill_s(d.kv_capacity_tokens) > 0
    with pytest.raises(ValueError, match=rf"prompt_tokens={10**30}: expected at most the"
                                         rf" {d.kv_capacity_tokens} tokens"):
        d.prefill_s(10**30)


def test_the_api_takes_whole_floats_and_numpy_integers(catalog):
    d = catalog.deployment("seed-example")
    assert d.prefill_s(1024.0) == d.prefill_s(np.int64(1024)) == d.prefill_s(1024)
    assert d.decode_step_s(np.int32(8), 8192.0) == d.decode_step_s(8, 8192)


def test_prefill_grows_about_linearly_for_short_prompts(catalog):
    d = catalog.deployment("seed-example")
    for n in (500, 1000):
        assert d.prefill_s(2 * n) / d.prefill_s(n) == pytest.approx(2.0, rel=0.1)
    # and faster than linearly once attention's quadratic term and chunking add up
    assert d.prefill_s(32_000) > 64 * d.prefill_s(500)


def test_gqa_kv_bytes_per_token(catalog):
    d = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    assert d.kv_bytes_per_token == 2 * 80 * 2 * 128 * 2
    # a KV head cannot be split: beyond tp = kv_heads every GPU still keeps one head
    d8 = catalog.build(model="llama-3.1-70b", gpu="h100-sxm", tp=8)
    assert d8.kv_bytes_per_token == 2 * 80 * 1 * 128 * 2


def test_mla_kv_bytes_per_token(catalog):
    d = catalog.build(model="deepseek-v3", gpu="h200-sxm", tp=8, weights="fp8", kv_cache="bf16")
    assert d.kv_bytes_per_token == 61 * (512 + 64) * 2
    d_fp8 = catalog.build(model="deepseek-v3", gpu="h200-sxm", tp=8, weights="fp8")
    assert d_fp8.kv_bytes_per_token == 61 * (512 + 64) * 1


def test_moe_step_reads_fewer_weights_for_fewer_tokens(catalog):
    d = catalog.build(model="mixtral-8x7b", gpu="h100-sxm", tp=2)
    coef = d.coefficients
    one, many = weight_bytes(coef, 1.0), weight_bytes(coef, 512.0)
    assert one < many
    # 512 tokens touch every expert; no step reads the embedding table whole (a lookup)
    assert many == pytest.approx(d.weight_bytes_per_gpu - d.embedding_bytes_per_gpu, rel=1e-6)
    # one token touches the shared weights and 2 of 8 experts: its active parameters but the
    # embedding table's
    assert one == pytest.approx((12.9e9 - 32000 * 4096) * 2 / 2, rel=1e-9)
    dense = catalog.build(model="llama-3.1-8b", gpu="h100-sxm")
    assert weight_bytes(dense.coefficients, 1.0) == weight_bytes(dense.coefficients, 512.0)


def test_decode_compute_bound_batch(catalog):
    dense = catalog.deployment("azure-2023-70b-h100")
    moe = catalog.build(model="mixtral-8x7b", gpu="h100-sxm", tp=2, weights="fp8")
    for d in (dense, moe):
        gpu = d.gpu
        ridge = (gpu.peak_tflops * 1e12 * d.efficiency.compute_efficiency) / (
            gpu.hbm_bandwidth_gbs * 1e9 * d.efficiency.bandwidth_efficiency)
        assert d.ridge_flops_per_byte == pytest.approx(ridge, rel=1e-12)
        assert math.isfinite(d.decode_compute_bound_batch) and d.decode_compute_bound_batch > 1
    # a decode token is a sequence: the blocks' FLOPs and one row of the LM head
    expected = dense.ridge_flops_per_byte * (
        dense.weight_bytes_per_gpu - dense.embedding_bytes_per_gpu) / (
        dense.flops_per_token + dense.flops_per_sequence)
    assert dense.decode_compute_bound_batch == pytest.approx(expected, rel=1e-12)
    # a mixture: where its routed experts, a kernel of their own, turn compute-bound (every
    # expert touched by then): their FLOPs per token against all their bytes
    expert_flops = 2 * (46.7e9 - 12.9e9) / (8 - 2) * 2 / 2   # k = 2 experts, tp = 2
    expected = moe.ridge_flops_per_byte * (46.7e9 - 12.9e9) / (8 - 2) * 8 / 2 / expert_flops
    assert moe.decode_compute_bound_batch == pytest.approx(expected, rel=1e-9)
    # dense bf16: W = 2 B x params and F = 2 FLOPs x params, so b* is the ridge point itself
    dense = catalog.deployment("azure-2023-70b-h100")
    assert dense.decode_compute_bound_batch == pytest.approx(dense.ridge_flops_per_byte, rel=1e-12)


@pytest.mark.parametrize("option", ["max_seqs", "max_batched_tokens", "kv_block_tokens"])
def test_scheduler_sizes_must_be_positive_whole_numbers(option):
    with pytest.raises(CatalogError, match=option):
        load_catalog().build(model="llama-2-7b", gpu="a100-80gb-sxm", **{option: 0})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_seqs": "32"}, "max_seqs='32': expected a whole number >= 1"),
    ({"kv_memory_fraction": "0.9"}, "kv_memory_fraction='0.9': expected a number in (0, 1]"),
    ({"replicas": "2"}, "replicas='2': expected a whole number >= 1"),
    ({"tp": True}, "tp=True: expected a whole number in [1, 8]"),
    ({"chunked_prefill": "false"}, "chunked_prefill='false': expected True or False"),
    ({"network": (0.01, 150, 1e7)}, "network=(0.01, 150, 10000000.0): expected a Network("),
], ids=["count-as-text", "fraction-as-text", "replicas-as-text", "tp-bool", "switch-as-text",
        "network-tuple"])
def test_build_refuses_text_and_booleans_where_numbers_belong(catalog, kwargs, message):
    """'32' used to pass the range check and fail later inside the physics or numba, and the
    text 'false' turned chunked prefill on."""
    with pytest.raises(CatalogError, match=re.escape(message)):
        catalog.build(model="llama-2-7b", gpu="a100-80gb-sxm", **kwargs)


def test_build_takes_whole_floats_and_numpy_numbers_and_the_replay_runs_on_them(catalog):
    """A notebook's sweep (np.arange, a float column) gives 32.0 or np.float64(16): the
    deployment holds them as the ints the compiled replay needs."""
    from pipelines.replay import replay
    plain = catalog.build(model="llama-2-7b", gpu="a100-80gb-sxm", tp=1, max_seqs=32,
                          kv_block_tokens=16)
    d = catalog.build(model="llama-2-7b", gpu="a100-80gb-sxm", tp=np.int64(1), replicas=1.0,
                      max_seqs=32.0, max_batched_tokens=np.float64(8192), kv_block_tokens=16.0)
    assert d.name == plain.name == "llama-2-7b@a100-80gb-sxm-tp1-bf16"
    assert d.scheduler == plain.scheduler
    assert type(d.scheduler.max_seqs) is int and type(d.tp) is int
    requests = pl.DataFrame({"arrival_s": [0.0, 0.1], "prompt_tokens": [500, 5000],
                             "output_tokens": [50, 20]})
    assert replay(requests, d)["e2e_s"].to_list() == replay(requests, plain)["e2e_s"].to_list()


def test_a_built_name_says_its_kv_cache_dtype_where_it_is_not_the_weights(catalog):
    """An fp8-KV build of Llama-3.1-8B on an L4 was named llama-3.1-8b@l4-tp1-bf16 like the
    bf16-KV one: where names key reports, what-if and calibration rows, the two collided."""
    same = catalog.build(model="llama-3.1-8b", gpu="l4")
    fp8_kv = catalog.build(model="llama-3.1-8b", gpu="l4", kv_cache="fp8")
    assert same.name == "llama-3.1-8b@l4-tp1-bf16"
    assert fp8_kv.name == "llama-3.1-8b@l4-tp1-bf16-kv-fp8"
    assert catalog.build(model="llama-3.1-8b", gpu="l4", weights="fp8").name == "llama-3.1-8b@l4-tp1-fp8"
    assert catalog.deployment("seed-example").name == "seed-example"


def test_catalog_file_without_a_needed_column_is_named(copied):
    efficiency = pl.read_csv(copied / "gpu_efficiency.csv").drop("stack")
    efficiency.write_csv(copied / "gpu_efficiency.csv")
    with pytest.raises(CatalogError, match=r"gpu_efficiency.csv lacks column\(s\) \['stack'\]"):
        load_catalog(copied)


def _set(folder, table: str, key: str, column: str, value: str | None) -> None:
    """Write `value` into `column` of the row `key` (first column) of `table` in `folder`."""
    frame = pl.read_csv(folder / f"{table}.csv", infer_schema_length=None)
    frame.with_columns(pl.when(pl.col(frame.columns[0]) == key).then(pl.lit(value))
                       .otherwise(pl.col(column).cast(pl.String)).alias(column)
                       ).write_csv(folder / f"{table}.csv")



def test_every_problem_of_the_catalog_is_one_line_of_one_error(copied):
    """Two wrong values of one column, a wrong value in another file and a wrong family each
    have their line: the first alone was named, one run per mistake."""
    _set(copied, "deployments", "seed-example", "replicas", "-1")
    _set(copied, "deployments", "azure-2023-70b-h100", "replicas", "0")
    _set(copied, "models", "llama-2-7b", "layers", "thirty-two")
    _set(copied, "gpus", "l4", "family", "lovelace")
    with pytest.raises(CatalogError) as info:
        load_catalog(copied)
    lines = str(info.value).splitlines()
    assert len(lines) == 4, lines
    assert "models.csv, row 'llama-2-7b': layers='thirty-two': expected a whole number >= 1" in lines[0]
    assert "deployments.csv, row 'azure-2023-70b-h100': replicas=0: expected a whole" in lines[1]
    assert "deployments.csv, row 'seed-example': replicas=-1: expected a whole" in lines[2]
    assert lines[3].startswith(f"family of l4 in {copied / 'gpus.csv'} is 'lovelace'")


@pytest.mark.parametrize(("table", "key", "column", "spelt", "named"), [
    ("models", "llama-2-7b", "model", "Llama-2-7B",
     "models.csv, rows 'llama-2-7b' and 'Llama-2-7B' differ only in letter case"),
    ("gpus", "l4", "gpu", "L4", "gpus.csv, rows 'l4' and 'L4' differ only in letter case or spaces around their gpu:"),
    ("deployments", "seed-example", "deployment", " seed-example",
     "deployments.csv, row ' seed-example': deployment=' seed-example' has spaces around it:"
     " expected the name alone"),
    ("prices", "l4", "provider", "RunPod",
     "prices.csv, rows 'l4 / runpod / on-demand' and 'l4 / RunPod / on-demand' differ only in"
     " letter case or spaces around their gpu / provider / plan: expected each gpu / provider /"
     " plan once"),
    ("gpu_efficiency", "hopper", "stack", "Current",
     "gpu_efficiency.csv, rows 'hopper / current' and 'hopper / Current' differ only in letter case"),
])
def test_keys_that_differ_only_in_case_or_spaces_are_refused(copied, table, key, column, spelt,
                                                             named):
    """`Qwen2.5-7B` beside `qwen2.5-7b`, or a gpu `h100-sxm ` with a trailing space, loaded as rows
    of their own: near twins that another file, a run config or a log name by mistake."""
    rows = pl.read_csv(copied / f"{table}.csv", infer_schema=False)
    twin = rows.filter(pl.col(rows.columns[0]) == key).head(1).with_columns(pl.lit(spelt).alias(column))
    pl.concat([rows, twin]).write_csv(copied / f"{table}.csv")
    with pytest.raises(CatalogError) as info:
        load_catalog(copied)
    assert named in str(info.value)
    if spelt != spelt.strip():   # the twin of the key spelt without its spaces is named too
        assert "differ only in letter case or spaces around their deployment" in str(info.value)

@pytest.mark.parametrize(("table", "key", "column", "expected"), [
    ("models", "deepseek-v3", "q_lora_rank", "a whole number >= 1"),
    ("gpus", "h100-sxm", "hbm_bandwidth_gbs", "a number > 0"),
    ("deployments", "seed-example", "max_seqs", "a whole number >= 1"),
    ("deployments", "seed-example", "replicas", "a whole number >= 1"),
    ("deployments", "seed-example", "net_one_way_s", "a number >= 0"),
    ("deployments", "seed-example", "compute_efficiency", r"a number in \(0, 1\]"),
])
def test_catalog_number_that_is_not_a_number_names_its_file_row_and_column(copied, table, key,
                                                                          column, expected):
    """With the range the column takes: replicas='five' was told "expected a number", as if
    '2.5' would do."""
    _set(copied, table, key, column, "five")
    with pytest.raises(CatalogError, match=rf"{table}.csv, row '{key}( / [^']+)?': {column}='five':"
                                           rf" expected {expected} \(see"):
        load_catalog(copied)


@pytest.mark.parametrize(("table", "key", "column", "value", "expected"), [
    ("models", "llama-3.1-70b", "kv_heads", "0", "0: expected a whole number >= 1"),
    ("models", "llama-3.1-8b", "layers", "32.5", "32.5: expected a whole number >= 1"),
    ("models", "deepseek-v3", "kv_lora_rank", "-512", "-512: expected a whole number >= 1"),
    ("models", "llama-3.1-8b", "total_params_b", "0", "0.0: expected a number > 0"),
    ("models", "mixtral-8x7b", "experts_per_token", "9", "9: expected at most the row's experts"),
    ("models", "mixtral-8x7b", "active_params_b", "50", "50.0: expected at most the row's"
                                                         " total_params_b"),
    ("gpus", "h100-sxm", "hbm_bandwidth_gbs", "0", "0: expected a number > 0"),
    ("gpus", "h100-sxm", "memory_gib", "nan", "nan: expected a number > 0"),
    # nvidia-smi's 81559 MiB pasted as GiB: a KV cache ~1000 times too large, accepted before
    ("gpus", "h100-sxm", "memory_gib", "81559", "81559.0: expected at most the row's memory_gb:"
                                                 r" the total the driver reports in GiB \(nvidia-smi"),
    ("gpus", "h100-sxm", "fp8_tflops", "-1978.9", "-1978.9: expected a number > 0"),
    ("gpus", "l4", "interconnect_gbs", "inf", "inf: expected a number > 0"),
    ("gpus", "mi300x", "interconnect_peer_links", "0", "0: expected a whole number >= 1"),
    ("gpus", "mi300x", "interconnect_peer_links", "3.5", "3.5: expected a whole number >= 1"),
    ("gpu_efficiency", "hopper", "allreduce_bus_efficiency", "1.2",
     r"1.2: expected a number in \(0, 1\]"),
    ("gpu_efficiency", "ampere", "step_overhead_s", "-0.001", "-0.001: expected a number >= 0"),
    ("prices", "a100-80gb-sxm", "usd_per_gpu_hour", "-2.7", "-2.7: expected a number > 0"),
    ("deployments", "seed-example", "net_one_way_s", "-5", "-5.0: expected a number >= 0"),
    ("deployments", "seed-example", "net_bandwidth_bytes_per_s", "0",
     "0: expected a number > 0"),
    ("deployments", "seed-example", "kv_memory_fraction", "1.5",
     r"1.5: expected a number in \(0, 1\]"),
    ("deployments", "seed-example", "kv_memory_fraction", "-0.5",
     r"-0.5: expected a number in \(0, 1\]"),
    ("deployments", "seed-example", "tp", "4.5", r"4.5: expected a whole number in \[1, 8\]"),
    ("deployments", "seed-example", "kv_block_tokens", "0", "0: expected a whole number >= 1"),
    ("deployments", "seed-example", "compute_efficiency", "0",
     r"0: expected a number in \(0, 1\]"),
])
def test_catalog_number_out_of_range_names_its_file_row_and_column(copied, table, key, column,
                                                                   value, expected):
    _set(copied, table, key, column, value)
    with pytest.raises(CatalogError, match=rf"{table}.csv, row '{key}( / [^']+)?': {column}={expected}"):
        load_catalog(copied)


@pytest.mark.parametrize(("active", "experts_per_token"), [
    ("46.7", "2"),   # active = total: no experts left to split, every one read at every step
    ("5.6", "2"),    # below 2/8 of 46.7: the shared weights would be negative
    ("2.9", "1"),    # below 1/8 of 46.7
])
def test_a_mixture_of_experts_whose_active_count_cannot_be_split_is_named(copied, active,
                                                                          experts_per_token):
    _set(copied, "models", "mixtral-8x7b", "active_params_b", active)
    _set(copied, "models", "mixtral-8x7b", "experts_per_token", experts_per_token)
    with pytest.raises(CatalogError, match=rf"models.csv, row 'mixtral-8x7b': active_params_b="
                                           rf"{active}: expected less than the row's"
                                           r" total_params_b and at least total_params_b \*"
                                           r" experts_per_token / experts"):
        load_catalog(copied)


def test_a_vocabulary_as_large_as_the_model_is_named(copied):
    """The transformer blocks are the parameters left once the embedding table and the LM
    head (vocab_size x hidden_size each) are taken out; a vocabulary that leaves none (a
    mistyped vocab_size) would price negative weights, without a word. Tied, the one matrix
    counts once."""
    _set(copied, "models", "llama-3.1-8b", "vocab_size", "1000000")
    with pytest.raises(CatalogError, match=r"models.csv, row 'llama-3.1-8b': vocab_size=1000000:"
                                           r" expected a vocabulary whose embedding table and LM"
                                           r" head"):
        load_catalog(copied)
    _set(copied, "models", "llama-3.1-8b", "tied_embeddings", "true")
    assert load_catalog(copied).build(model="llama-3.1-8b", gpu="h100-sxm").vocab_params == (
        0.0, 1000000 * 4096)


def test_a_mixtures_vocabulary_must_fit_its_shared_parameters(copied):
    """A mixture's vocabulary matrices are among the parameters every token uses: Mixtral's
    shared 1.63 B (46.7 total, 12.9 active, 8 experts, top 2). A vocabulary of 250,000 (2.05 B
    of matrices) passed the check against the active count and left the shared blocks, the
    attention every step reads, at -0.42 B parameters (gpt-oss-20b's catalog row would: 1.13 B
    shared, 1.16 B of vocabulary)."""
    _set(copied, "models", "mixtral-8x7b", "vocab_size", "250000")
    with pytest.raises(CatalogError, match=r"models.csv, row 'mixtral-8x7b': vocab_size=250000:"
                                           r" expected a vocabulary .* less than the row's shared"
                                           r" parameters"):
        load_catalog(copied)


def test_a_dense_model_whose_active_count_is_not_its_total_is_named(copied):
    """Llama-3.1-8B with active 7.5 (embeddings left out) read 8.03 B weights a step but priced
    its GEMMs for 7.5 B, without a word."""
    _set(copied, "models", "llama-3.1-8b", "active_params_b", "7.5")
    with pytest.raises(CatalogError, match=r"models.csv, row 'llama-3.1-8b': active_params_b=7.5:"
                                           r" expected the row's total_params_b for a dense model"):
        load_catalog(copied)


@pytest.mark.parametrize(("table", "key", "column"), [
    ("deployments", "seed-example", "chunked_prefill"),
    ("prices", "h200-sxm", "is_default"),
])
def test_catalog_switch_that_is_not_true_or_false_is_named(copied, table, key, column):
    _set(copied, table, key, column, "yes")
    with pytest.raises(CatalogError, match=rf"{table}.csv, row '{key}( / [^']+)?':"
                                           rf" {column}='yes': expected true or false"):
        load_catalog(copied)


def test_a_switch_in_capitals_is_read_as_the_switch(copied):
    """TRUE / False are read as text by the CSV reader; they are still the switches they say."""
    _set(copied, "deployments", "seed-example", "chunked_prefill", "FALSE")
    prices = copied / "prices.csv"
    prices.write_text(prices.read_text().replace(",true,", ",True,"))
    catalog = load_catalog(copied)
    assert catalog.deployments.schema["chunked_prefill"] == pl.Boolean
    assert catalog.deployment("seed-example").scheduler.chunked_prefill is False
    assert catalog.build(model="llama-3.1-8b", gpu="h200-sxm").price_provider == "coreweave"


@pytest.mark.parametrize(("table", "key", "column"), [
    ("deployments", "seed-example", "max_seqs"),
    ("prices", "a100-80gb-sxm", "source"),
])
def test_catalog_value_left_empty_is_named(copied, table, key, column):
    _set(copied, table, key, column, None)
    with pytest.raises(CatalogError, match=rf"{table}.csv, row '{key}( / [^']+)?': {column} is empty:"
                                           r" expected a value"):
        load_catalog(copied)


@pytest.mark.parametrize(("value", "count"), [("true", 4), ("false", 0)])
def test_each_gpu_with_prices_needs_exactly_one_default(copied, value, count):
    _set(copied, "prices", "h200-sxm", "is_default", value)
    with pytest.raises(CatalogError, match=rf"prices.csv, row 'h200-sxm': {count} default prices"
                                           r" for h200-sxm: expected exactly one"):
        load_catalog(copied)


def test_price_lookup_tells_no_row_from_several(catalog):
    doubled = replace(catalog, prices=pl.concat([catalog.prices, catalog.prices]))
    with pytest.raises(CatalogError, match=r"2 default prices for gpu 'h200-sxm' in .*prices.csv:"
                                           r" expected exactly one"):
        doubled.build(model="llama-3.1-8b", gpu="h200-sxm")
    with pytest.raises(CatalogError, match=r"no price for gpu 'h200-sxm' from provider 'aws' plan"
                                           r" 'spot' in .*; its prices: coreweave on-demand, aws"):
        catalog.build(model="llama-3.1-8b", gpu="h200-sxm", price_provider="aws",
                      price_plan="spot")


@pytest.mark.parametrize(("table", "key", "named"), [
    ("gpus", {"gpu": "h100-sxm"}, "'h100-sxm': 2 rows share this gpu"),
    ("models", {"model": "llama-3.1-8b"}, "'llama-3.1-8b': 2 rows share this model"),
    ("deployments", {"deployment": "seed-example"}, "'seed-example': 2 rows share this deployment"),
    ("gpu_efficiency", {"family": "hopper", "stack": "current"},
     "'hopper / current': 2 rows share this family / stack"),
    ("prices", {"gpu": "h100-sxm", "provider": "aws", "plan": "on-demand"},
     "'h100-sxm / aws / on-demand': 2 rows share this gpu / provider / plan"),
])
def test_catalog_key_used_twice_is_named(copied, table, key, named):
    frame = pl.read_csv(copied / f"{table}.csv", infer_schema_length=None)
    pl.concat([frame, frame.filter(**key)]).write_csv(copied / f"{table}.csv")
    with pytest.raises(CatalogError, match=rf"{table}.csv, row {named}: expected each once"):
        load_catalog(copied)


def test_deployment_without_its_client_path_is_named(copied):
    pl.read_csv(copied / "deployments.csv").drop("net_one_way_s").write_csv(
        copied / "deployments.csv")
    with pytest.raises(CatalogError, match=r"deployments.csv lacks column\(s\) \['net_one_way_s'\]"):
        load_catalog(copied)


def test_mla_ranks_may_be_left_empty_in_a_catalog_without_mla_models(copied):
    models = pl.read_csv(copied / "models.csv", infer_schema_length=None)
    models.filter(pl.col("attention") != "MLA").with_columns(
        pl.lit(None, dtype=pl.String).alias(c)
        for c in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim")
    ).write_csv(copied / "models.csv")
    deployment = load_catalog(copied).build(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    assert deployment.replicated_params == 0 and deployment.model.q_lora_rank is None


def test_unknown_allreduce_rounds_name_the_file_and_the_choices(copied):
    efficiency = pl.read_csv(copied / "gpu_efficiency.csv").with_columns(
        pl.when(pl.col("family") == "hopper").then(pl.lit("tree")).otherwise("allreduce_rounds")
        .alias("allreduce_rounds"))
    efficiency.write_csv(copied / "gpu_efficiency.csv")
    with pytest.raises(CatalogError, match=r"allreduce_rounds='tree' for hopper / current in .*"
                                           r"gpu_efficiency.csv: expected one of log2, ring"):
        load_catalog(copied)


@pytest.mark.parametrize("listed", ["fp8;fp9", "int8"], ids=["unknown-dtype", "has-tensor-cores"])
def test_weight_only_dtypes_must_be_dtypes_the_gpu_lacks(copied, listed):
    gpus = pl.read_csv(copied / "gpus.csv").with_columns(
        pl.when(pl.col("gpu") == "a100-80gb-sxm").then(pl.lit(listed))
        .otherwise("weight_only_dtypes").alias("weight_only_dtypes"))
    gpus.write_csv(copied / "gpus.csv")
    bad = listed.split(";")[-1]
    with pytest.raises(CatalogError, match=rf"weight_only_dtypes lists '{bad}' for a100-80gb-sxm in"
                                           r" .*gpus.csv: expected dtypes of .* that the GPU has no"):
        load_catalog(copied)


@pytest.mark.parametrize("gpu, kv_cache, stored", [
    ("h100-sxm", "fp4", "bf16, fp16, fp8, int8"),
    ("a100-80gb-sxm", "fp4", "bf16, fp16, fp8, int8"),
    ("l40s", "fp4", "bf16, fp16, fp8, int8"),
    ("mi300x", "fp4", "bf16, fp16, fp8"),
    ("mi300x", "int8", "bf16, fp16, fp8"),
])
def test_a_kv_cache_dtype_no_engine_stores_on_the_gpu_is_refused(catalog, gpu, kv_cache, stored):
    """An NVFP4 KV cache is read only by Blackwell's SM100 kernels, and no ROCm engine keeps an
    int8 one (gpus.csv kv_cache_source): such a deployment was built, its KV cache sized at
    4.5 bits a value, and a fleet costed that no engine can run."""
    with pytest.raises(CatalogError, match=rf"kv_cache='{kv_cache}': no serving engine stores the"
                                           rf" KV cache in {kv_cache} on {gpu}; expected one of"
                                           rf" {stored} \(.*gpus.csv kv_cache_dtypes"):
        catalog.build(model="llama-3.1-8b", gpu=gpu, weights="bf16", kv_cache=kv_cache)



@pytest.mark.parametrize("kv_cache", ["", "BF16"])
def test_a_kv_cache_dtype_that_is_no_dtype_is_refused_not_defaulted(catalog, kv_cache):
    """Only an absent kv_cache (None) takes the weights' dtype: an empty string had been read as
    absent too, so the deployment was built with a bf16 KV cache nobody asked for, where any
    other unknown name is refused with the dtypes there are."""
    hint = "did you mean 'bf16'\\? " if kv_cache else ""
    with pytest.raises(CatalogError, match=rf"kv_cache='{kv_cache}': {hint}expected one of bf16,"
                                           rf" fp16, fp8, int8, fp4"):
        catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="bf16", kv_cache=kv_cache)

def test_kv_cache_dtypes_engines_store_still_build(catalog):
    """vLLM stores an fp8 KV cache on Ampere too (converting it for attention); Blackwell keeps
    NVFP4."""
    for gpu, kv_cache in (("a100-80gb-sxm", "fp8"), ("a10", "fp8"), ("h100-sxm", "int8"),
                          ("b200", "fp4"), ("mi300x", "fp8")):
        assert catalog.build(model="llama-3.1-8b", gpu=gpu, kv_cache=kv_cache).kv_dtype == kv_cache


def test_fp4_weights_served_weight_only_do_not_imply_an_fp4_kv_cache(catalog):
    """fp4 weights run on an H100 (weight-only Marlin), but the default KV dtype, the weights',
    is one it cannot store: the error says the dtype was the default, and naming one builds."""
    with pytest.raises(CatalogError, match=r"kv_cache='fp4' \(by default the weights' dtype\)"):
        catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp4")
    d = catalog.build(model="llama-3.1-8b", gpu="h100-sxm", weights="fp4", kv_cache="fp8")
    assert (d.gpu.gemm_dtype, d.kv_dtype) == ("bf16", "fp8")


def _set_gpu_cell(copied, gpu: str, column: str, value: str | None) -> None:
    """Set one text cell of the copied catalog's gpus.csv (None empties it)."""
    gpus = pl.read_csv(copied / "gpus.csv")
    gpus.with_columns(pl.when(pl.col("gpu") == gpu).then(pl.lit(value, dtype=pl.String))
                      .otherwise(column).alias(column)).write_csv(copied / "gpus.csv")


@pytest.mark.parametrize(("listed", "said"), [("fp8;fp9", "'fp8;fp9'"), (None, "empty")],
                         ids=["unknown-dtype", "empty"])   # an empty cell was said to be None
def test_kv_cache_dtypes_must_name_dtypes(copied, listed, said):
    _set_gpu_cell(copied, "l4", "kv_cache_dtypes", listed)
    with pytest.raises(CatalogError, match=rf"kv_cache_dtypes of l4 in .*gpus.csv is {said}: expected"
                                           r" the `;`-separated dtypes of bf16, fp16, fp8, int8,"
                                           r" fp4 that serving engines"):
        load_catalog(copied)


def test_a_catalog_without_kv_cache_dtypes_limits_no_kv_dtype(copied):
    pl.read_csv(copied / "gpus.csv").drop("kv_cache_dtypes").write_csv(copied / "gpus.csv")
    d = load_catalog(copied).build(model="llama-3.1-8b", gpu="h100-sxm", kv_cache="fp4")
    assert d.kv_dtype == "fp4"


def test_an_allreduce_family_must_be_a_family_of_the_efficiency_file(copied):
    _set_gpu_cell(copied, "a10", "allreduce_family", "pcie")
    with pytest.raises(CatalogError, match=r"allreduce_family of a10 in .*gpus.csv is 'pcie':"
                                           r" expected a family of .*gpu_efficiency.csv \(ada,"
                                           r" ampere, blackwell, cdna3, hopper\)"):
        load_catalog(copied)


def test_a_tensor_parallel_group_larger_than_its_gpus_mesh_is_refused(copied):
    """A mesh of N peer links (gpus.csv interconnect_peer_links) joins N + 1 GPUs directly; a
    larger group would relay through a peer, which the all-reduce's link bandwidth, tp - 1 of
    the N links, does not price. A 4-GPU mesh (3 links) builds at tp 4 and refuses tp 8."""
    _set_gpu_cell(copied, "mi300x", "interconnect_peer_links", "3")
    catalog = load_catalog(copied)
    assert catalog.build(model="llama-3.1-70b", gpu="mi300x", tp=4).as_row()[
        "link_gbs_one_way"] == pytest.approx(448.0)
    with pytest.raises(CatalogError, match=r"tp=8: mi300x's interconnect is a mesh of 3 peer"
                                           r" links \(interconnect_peer_links in .*gpus.csv\),"
                                           r" which joins 4 GPUs directly; expected tp of at"
                                           r" most 4"):
        catalog.build(model="llama-3.1-70b", gpu="mi300x", tp=8)


def test_an_a10_is_built_on_the_2023_stack_at_tp_1_which_runs_no_all_reduce(catalog):
    """An A10's links take ada's all-reduce (allreduce_family), which has no vllm-2023 row, so
    even at tp 1, with no all-reduce to run, the build failed with "unknown serving stack for
    the all-reduce of a10". At tp 1 it is built; at tp 2 the missing PCIe row still refuses it."""
    d = catalog.build(model="deepseek-coder-6.7b", gpu="a10", stack="vllm-2023")
    assert d.stack == "vllm-2023" and d.coefficients[ALLREDUCE_LATENCY_S] == 0.0
    assert d.decode_step_s(1, 1024) > catalog.build(model="deepseek-coder-6.7b", gpu="a10").decode_step_s(1, 1024)
    with pytest.raises(CatalogError, match="unknown serving stack for the all-reduce of a10"):
        catalog.build(model="deepseek-coder-6.7b", gpu="a10", stack="vllm-2023", tp=2)


def test_a_deployment_moves_to_another_gpu_with_that_gpus_defaults(catalog):
    """Candidates for a log whose GPU is unknown: everything but the GPU is kept; factors and
    price are the new GPU's family defaults, not the old deployment's."""
    served = catalog.deployment("aibrix-deepseek-coder-a10")
    moved = catalog.on_gpu(served, "l40s")
    assert moved.gpu.gpu == "l40s" and moved.model == served.model
    assert (moved.tp, moved.weight_dtype, moved.kv_dtype, moved.replicas) == (
        served.tp, served.weight_dtype, served.kv_dtype, served.replicas)
    assert moved.scheduler == served.scheduler and moved.network == served.network
    fresh = catalog.build(model="deepseek-coder-6.7b", gpu="l40s")
    assert moved.efficiency == fresh.efficiency
    assert (moved.price_provider, moved.price_plan) == (fresh.price_provider, fresh.price_plan) != (
        served.price_provider, served.price_plan)


# ---- shape buckets ----------------------------------------------------------------------------

BUCKETS = """dimension,lower,upper,label,source
prompt,1,128,short prompt,s
prompt,128,,long prompt,s
output,1,64,short answer,s
output,64,,long answer,s
"""


def test_shape_buckets_tile_every_token_count():
    buckets = load_shape_buckets()
    for dimension in ("prompt", "output"):
        rows = buckets.filter(pl.col("dimension") == dimension).sort("lower")
        assert rows["lower"][0] == 1 and rows["upper"][-1] is None
        assert rows["upper"][:-1].to_list() == rows["lower"][1:].to_list()


@pytest.mark.parametrize(("edit", "named"), [
    (("prompt,128,,long prompt", "prompt,256,,long prompt"),
     r"prompt buckets: 'short prompt' ends at 128 but 'long prompt' starts at 256"),
    (("output,64,,long answer", "output,64,4096,long answer"),
     r"output buckets: the last, 'long answer', ends at 4096: expected it open-ended"),
    (("output,64,,long answer", "output,64,,short answer"),
     r"output buckets: label 'short answer' is used twice"),
    (("output,64,,long answer", "output,64,,Short Answer"),
     r"output buckets: labels 'short answer' and 'Short Answer' differ only in letter case"),
    (("output,64,,long answer", "output,64,,long answer "),
     r"output buckets: label 'long answer ' has spaces around it"),
    (("prompt,1,128", "prompt,16,128"), r"prompt buckets: the first starts at 16"),
    (("output,", "answer,"), r"dimension 'answer': expected one of prompt, output|output buckets: none"),
    (("prompt,1,128", "prompt,one,128"), r"not a readable CSV of whole-number edges"),
], ids=["gap", "closed", "duplicate", "case-twin", "spaced", "late-start", "unknown-dimension",
         "text-edge"])
def test_shape_buckets_that_do_not_tile_are_named(tmp_path, edit, named):
    (tmp_path / "shape_buckets.csv").write_text(BUCKETS.replace(*edit))
    with pytest.raises(CatalogError, match=rf"shape bucket file .*shape_buckets.csv.*({named})"):
        load_shape_buckets(tmp_path)


def test_missing_shape_buckets_are_named(tmp_path):
    with pytest.raises(CatalogError, match=r"shape_buckets.csv is missing"):
        load_shape_buckets(tmp_path)


@pytest.mark.parametrize(("key", "column", "value", "named"), [
    ("llama-3.1-8b", "attention", "gqa", r"attention='gqa': expected one of MHA, GQA, MLA"),
    ("llama-3.1-8b", "kv_heads", "7", r"kv_heads=7: expected a divisor of the row's q_heads"),
    ("deepseek-v3", "kv_lora_rank", None, r"kv_lora_rank is empty: expected a value for an MLA"),
], ids=["unknown-kind", "uneven-groups", "mla-without-latent"])
def test_attention_that_cannot_be_sized_is_named(copied, key, column, value, named):
    """The attention kind decides how the KV cache is sized: a kind spelled otherwise was sized
    as GQA without a word, and an MLA row without its ranks failed with a TypeError."""
    _set(copied, "models", key, column, value)
    with pytest.raises(CatalogError, match=rf"models.csv, row '{key}( / [^']+)?': {named}"):
        load_catalog(copied)


def test_a_deployment_without_a_price_plan_takes_its_gpus_default(copied):
    _set(copied, "deployments", "seed-example", "price_provider", None)
    _set(copied, "deployments", "seed-example", "price_plan", None)
    d = load_catalog(copied).deployment("seed-example")
    assert (d.price_provider, d.price_plan) == ("coreweave", "on-demand")


@pytest.mark.parametrize(("provider", "plan"), [("aws", None), (None, "on-demand")])
def test_a_price_provider_without_its_plan_is_named(catalog, provider, plan, recwarn):
    with pytest.raises(CatalogError, match=rf"price_provider={provider!r}, price_plan={plan!r}:"
                                           r" expected both .* or neither"):
        catalog.build(model="llama-3.1-8b", gpu="h100-sxm", price_provider=provider,
                      price_plan=plan)
    assert not recwarn.list   # was polars' "Comparisons with None" UserWarning, and 'plan None'


def test_a_price_row_is_named_by_its_whole_key(copied):
    """A GPU names several rows of prices.csv: the message names the provider and plan too."""
    prices = copied / "prices.csv"
    prices.write_text(prices.read_text().replace("a100-80gb-sxm,coreweave,on-demand,2.70",
                                                 "a100-80gb-sxm,coreweave,on-demand,-2.70"))
    with pytest.raises(CatalogError, match=r"prices.csv, row 'a100-80gb-sxm / coreweave /"
                                           r" on-demand': usd_per_gpu_hour=-2.7"):
        load_catalog(copied)


def test_trailing_empty_columns_of_a_spreadsheet_are_no_columns(copied):
    """Trailing separators a spreadsheet saves (",," on every line) add columns with no name and
    no value; they are dropped, not carried into the warehouse tables as '' and
    '_duplicated_0'."""
    prices = copied / "prices.csv"
    prices.write_text("".join(line.rstrip("\n") + ",,\n"
                              for line in prices.read_text().splitlines(keepends=True)))
    assert load_catalog(copied).prices.columns == load_catalog().prices.columns


def test_a_semicolon_separated_catalog_file_is_named_as_such(copied):
    gpus = copied / "gpus.csv"
    gpus.write_text(gpus.read_text().replace(",", ";"))
    with pytest.raises(CatalogError, match=r"gpus.csv lacks column.*separated by ';'"):
        load_catalog(copied)


def test_a_deployment_row_that_does_not_build_names_its_file_and_row(copied):
    """From Python, catalog.deployment(name) said only "kv_cache='bf61': expected one of ...",
    not where: the preflight added the file and row, the API did not."""
    deployments = copied / "deployments.csv"
    deployments.write_text(deployments.read_text().replace(
        "seed-example,llama-2-7b,a100-80gb-sxm,current,1,bf16,bf16",
        "seed-example,llama-2-7b,a100-80gb-sxm,current,1,bf16,bf61"))
    with pytest.raises(CatalogError, match=rf"^{re.escape(str(deployments))}, deployment"
                                           rf" 'seed-example': kv_dtype='bf61': did you mean"
                                           rf" 'bf16'\? expected one of"):
        load_catalog(copied).deployment("seed-example")


@pytest.mark.parametrize("gpu, weights, kv, says", [
    ("h100-sxm", "bf16", "fp4", ""), ("h100-sxm", "fp9", "bf16", ""),
    ("mi300x", "fp4", "fp8", "gpu 'mi300x' has no fp4 tensor throughput"),
])
def test_a_deployment_row_s_dtype_is_named_by_its_column(copied, gpu, weights, kv, says):
    """deployments.csv's dtype columns are weight_dtype and kv_dtype; the message named them
    kv_cache= and weights=, Catalog.build's arguments (and scenarios.csv's columns), so a user
    with an fp4 KV cache on an H100 looked for a column the file does not have. fp4 weights on
    an MI300X (no fp4 tensor cores, no Marlin) said "gpu 'mi300x' has no fp4 tensor throughput
    ..." without the column to fix."""
    deployments = copied / "deployments.csv"
    deployments.write_text(deployments.read_text().replace(
        "seed-example,llama-2-7b,a100-80gb-sxm,current,1,bf16,bf16",
        f"seed-example,llama-2-7b,{gpu},current,1,{weights},{kv}"))
    column, value = ("kv_dtype", kv) if weights == "bf16" else ("weight_dtype", weights)
    with pytest.raises(CatalogError, match=rf"deployment 'seed-example': {column}='{value}': "
                                           rf"{re.escape(says)}"):
        load_catalog(copied).deployment("seed-example")


def test_a_semicolon_file_with_decimal_commas_is_named_as_semicolon_separated(copied):
    """A spreadsheet in a locale whose decimal mark is the comma saves ';'-separated files with
    2,70 for 2.70: those commas overflow the one-column header, and the message blamed a comma
    on line 2 instead of naming the separator."""
    prices = copied / "prices.csv"
    rows = list(csv.reader(open(prices, newline="")))
    with open(prices, "w", newline="") as f:
        csv.writer(f, delimiter=";").writerows(
            [[re.sub(r"^(\d+)\.(\d+)$", r"\1,\2", cell) for cell in row] for row in rows])
    assert "coreweave;on-demand;2,70;" in prices.read_text()
    with pytest.raises(CatalogError, match=r"prices.csv is not a readable CSV: the file is"
                                           r" separated by ';': expected commas"):
        load_catalog(copied)


def test_a_file_saved_in_a_legacy_encoding_is_named_with_its_line_and_the_encoding_expected(copied):
    """deployments.csv holds non-ASCII text (a §, a user's µs or é); a spreadsheet's
    plain "CSV" export writes it in Windows-1252, and the message was Polars' bare 'invalid
    utf-8 sequence': no line, and nothing said what encoding the catalog expects."""
    deployments = copied / "deployments.csv"
    text = deployments.read_text(encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), start=1) if not row.isascii())
    deployments.write_bytes(text.encode("cp1252", errors="replace"))
    with pytest.raises(CatalogError) as info:
        load_catalog(copied)
    assert (f"catalog file {deployments} is not a readable CSV: not UTF-8 text (line {line}, byte "
            in str(info.value))
    assert "expected UTF-8 (a spreadsheet's \"CSV UTF-8\" format)" in str(info.value)


def test_shape_buckets_saved_by_a_spreadsheet_read_as_the_other_catalog_files(tmp_path):
    """shape_buckets.csv is a data/reference file written to the warehouse like the others:
    trailing separators, a cleared row and quoted-empty cells are no columns, no row and empty
    values there too (they reached the shape_buckets table as '', '_duplicated_0' and a row of
    nulls), and a line with too many fields is named by its line."""
    shipped = load_shape_buckets()
    rows = list(csv.reader(open(DEFAULT_REFERENCE_DIR / "shape_buckets.csv", newline="")))
    with open(tmp_path / "shape_buckets.csv", "w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(
            [[*row, "", ""] for row in rows] + [[""] * (len(rows[0]) + 2)])
    assert '"",""\n' in (tmp_path / "shape_buckets.csv").read_text()
    assert_frame_equal(load_shape_buckets(tmp_path), shipped)
    (tmp_path / "shape_buckets.csv").write_text(BUCKETS.replace("long answer,s", "long, answer,s"))
    with pytest.raises(CatalogError, match=r"shape_buckets.csv is not a readable CSV of"
                                           r" whole-number edges: line 5 has 6 fields"):
        load_shape_buckets(tmp_path)


def test_a_deployment_whose_weights_leave_no_kv_room_is_named_once(copied):
    """The file and row are named once, not "deployment 'x': deployment 'x': ..."."""
    deployments = copied / "deployments.csv"
    row = "azure-2023-70b-h100,llama-3.1-70b,h100-sxm,current,"
    deployments.write_text(deployments.read_text().replace(row + "4,", row + "1,"))
    with pytest.raises(CatalogError) as info:
        load_catalog(copied).deployment("azure-2023-70b-h100")
    text = str(info.value)
    assert text.startswith(f"{deployments}, deployment 'azure-2023-70b-h100': ")
    assert text.count("deployment 'azure-2023-70b-h100'") == 1


@pytest.mark.parametrize("name, model", [
    ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),      # LLMPerf's names of the model
    ("meta.llama2-70b-chat-v1", "llama-2-70b"),
    ("llama2-70b-4096", "llama-2-70b"),
    ("meta/llama-2-7b-chat:13c3cdee13ee059ab779f0291d29054dab00a47dad8261375654de5540165fb0", "llama-2-7b"),
    ("deepseek-ai/deepseek-coder-6.7b-instruct", "deepseek-coder-6.7b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ("accounts/fireworks/models/llama-v2-70b-chat", None),  # spelt otherwise: no guess
    ("meta-llama/Llama-3.3-70B-Instruct", None),            # not llama-3.1-70b by name
    ("meta-llama/Llama-3.2-11B-Vision", None),              # not llama-3.2-1b
    ("gpt-4", None),
])
def test_a_logs_model_name_names_a_catalog_model_only_for_sure(catalog, name, model):
    assert catalog.model_named(name) == model


def test_a_logs_model_name_takes_the_catalog_model_of_most_words_and_none_on_a_tie(copied):
    """Two rules of model_named no case above reached (the shipped catalog has no model whose
    words run inside another's): of several catalog models in a name the one of most words
    is named, and two of as many words name none, as a speculative-decoding log naming its
    target and its draft model does."""
    models = pl.read_csv(copied / "models.csv", infer_schema_length=0)
    pl.concat([models, models.filter(pl.col("model") == "llama-2-7b")
               .with_columns(model=pl.lit("llama-2-7b-32k"))]).write_csv(copied / "models.csv")
    catalog = load_catalog(copied)
    assert catalog.model_named("togethercomputer/LLaMA-2-7B-32K") == "llama-2-7b-32k"
    assert catalog.model_named("meta-llama/Llama-2-7b-chat-hf") == "llama-2-7b"
    assert catalog.model_named("Llama-2-70b-chat-hf with draft Llama-2-7b-chat-hf") is None


@pytest.mark.parametrize("gpu", ["a10", "mi300x"], ids=["used", "only-in-a-scenario-or-unused"])
def test_a_gpu_family_must_be_a_family_of_the_efficiency_file(copied, gpu):
    """A GPU whose family has no gpu_efficiency.csv row (a capitalised 'CDNA3') has no factors:
    only a deployment on it was refused, while a what-if swap to it was a preflight note and
    skipped, and an unused row passed; it is a row of the catalog, refused as allreduce_family is."""
    _set_gpu_cell(copied, gpu, "family", "CDNA3")
    with pytest.raises(CatalogError, match=rf"family of {gpu} in .*gpus.csv is 'CDNA3': expected"
                                           r" a family of .*gpu_efficiency.csv \(ada, ampere,"
                                           r" blackwell, cdna3, hopper\)"):
        load_catalog(copied)


@pytest.mark.parametrize("source", ["", "   "], ids=["empty", "spaces"])
def test_a_shape_bucket_without_a_source_is_named(tmp_path, source):
    """Every reference file's source is never empty (data/reference/README.md); the shape
    buckets' was not checked, and a bucket with none loaded into the warehouse."""
    (tmp_path / "shape_buckets.csv").write_text(
        BUCKETS.replace("output,64,,long answer,s", f"output,64,,long answer,{source}"))
    with pytest.raises(CatalogError, match=r"shape bucket file .*shape_buckets.csv, output bucket"
                                           r" 'long answer': source is empty"):
        load_shape_buckets(tmp_path)


def test_a_source_of_spaces_is_empty(copied):
    """A source of spaces alone (a spreadsheet's cleared cell) passed as a source."""
    _set(copied, "gpus", "l4", "source", "   ")
    with pytest.raises(CatalogError, match=r"gpus.csv, row 'l4': source is empty: expected a value"):
        load_catalog(copied)


def _readme_columns() -> dict[str, tuple[set[str], set[str]]]:
    """data/reference/README.md's table of required and optional columns, by table."""
    text = (DEFAULT_REFERENCE_DIR / "README.md").read_text()
    found = {}
    for file, required, optional in re.findall(r"^\| (\w+)\.csv \| ([^|]+) \| ([^|]+) \|$", text,
                                               re.MULTILINE):
        def names(cell: str) -> set[str]:
            return set(re.findall(r"\w+", re.sub(r"\([^)]*\)|:.*", "", cell))) - {"none"}
        found[file] = (names(required), names(optional))
    return found


def test_the_readme_says_which_columns_each_file_must_have():
    """A user adding rows (or a catalog of their own) reads which columns are required from the
    README: it must be what load_catalog, load_shape_buckets and load_scenarios require, and
    name every column the shipped files have."""
    from pipelines.reports.scenarios import COLUMNS as SCENARIO_COLUMNS
    from pipelines.roofline.catalog import REQUIRED_COLUMNS, SHAPE_BUCKET_COLUMNS

    documented = _readme_columns()
    required = {**REQUIRED_COLUMNS, "scenarios": tuple(SCENARIO_COLUMNS),
                "shape_buckets": SHAPE_BUCKET_COLUMNS}
    assert {table: documented[table][0] for table in documented} == {
        table: set(columns) for table, columns in required.items()}
    for table, (must, may) in documented.items():
        header = pl.read_csv(DEFAULT_REFERENCE_DIR / f"{table}.csv", n_rows=0).columns
        assert must <= set(header) <= must | may, table


@pytest.mark.parametrize("default", [False, True], ids=["other-plan", "its-own-default"])
def test_a_price_of_a_gpu_gpus_csv_does_not_have_is_named(copied, default):
    """A price row whose gpu is misspelt ('H100-SXM') was named as '0 default prices for
    H100-SXM', or, when it was that name's one default, loaded without a word."""
    prices = pl.read_csv(copied / "prices.csv")
    row = prices.filter((pl.col("gpu") == "h100-sxm") & (pl.col("is_default") == default)).head(1)
    prices.vstack(row.with_columns(gpu=pl.lit("H100-SXM"), provider=pl.lit("mine"))).write_csv(
        copied / "prices.csv")
    with pytest.raises(CatalogError, match=r"prices.csv, row 'H100-SXM / mine / [^']+':"
                                           r" gpu='H100-SXM': expected a gpu of .*gpus.csv \(a10,"):
        load_catalog(copied)


def test_an_empty_gpu_or_family_cell_is_a_problem_not_a_traceback(copied):
    """A gpus.csv row whose gpu cell is empty (a paste one column off), or a gpu_efficiency.csv
    row whose family is, crashed the load with TypeError sorting the names it lists (None among
    them), in the preflight and in every run, where deployments.csv's empty name is one line."""
    gpus, efficiency = copied / "gpus.csv", copied / "gpu_efficiency.csv"
    gpus.write_text(gpus.read_text().replace("\nh100-sxm,", "\n,", 1))
    with pytest.raises(CatalogError) as info:
        load_catalog(copied)
    assert "gpus.csv, row (no gpu): gpu is empty: expected a value" in str(info.value)
    assert "None" not in str(info.value)
    shutil.copy(load_catalog().file("gpus"), gpus)
    gpus.write_text(gpus.read_text().replace(",ada,", ",adaa,", 1))
    efficiency.write_text(efficiency.read_text().replace("\nampere,vllm-2023,", "\n,vllm-2023,", 1))
    with pytest.raises(CatalogError) as info:
        load_catalog(copied)
    assert "gpu_efficiency.csv, row (no family / stack 'vllm-2023'): family is empty" in str(info.value)
    assert "is 'adaa': expected a family of" in str(info.value) and "None" not in str(info.value)
