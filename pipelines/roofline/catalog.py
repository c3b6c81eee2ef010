"""The reference catalog: GPUs, efficiency factors, models, prices and named deployments.

The catalog is a folder of CSV files (default `data/reference/`, documented in its README), each
value with its source. Keeping it as plain CSV means the same files load into the warehouse as
the `gpus`, `models`, `prices` and `deployments` tables and into the Python physics here: one
truth for SQL users and for the replay.
"""

from __future__ import annotations

import csv
import difflib
import inspect
import math
import numbers
import re
from collections.abc import Iterable
from dataclasses import asdict, astuple, dataclass, fields, replace
from pathlib import Path

import numpy as np
import polars as pl

from pipelines.roofline.deployment import (
    ALLREDUCE_ROUNDS,
    DTYPE_BYTES,
    KV_MEMORY_BASES,
    KV_RESERVATIONS,
    Deployment,
    Efficiency,
    GpuSpec,
    ModelSpec,
    Network,
    Scheduler,
)

DEFAULT_REFERENCE_DIR = Path(__file__).resolve().parents[2] / "data" / "reference"
TABLES = ("gpus", "gpu_efficiency", "models", "prices", "deployments")
# the names Polars gives header cells left empty: "" and "_duplicated_<n>" for the repeats
_UNNAMED = re.compile(r"^(|_duplicated_\d+)$")
DEFAULT_STACK = "current"
# Scheduler options that take one of a few named values (optional in deployments.csv, the
# Scheduler default when absent): their choices, and what the choice means, for the error.
SCHEDULER_CHOICES = {
    "kv_memory_basis": (KV_MEMORY_BASES, "the fraction of total memory, as vLLM and SGLang read"
                        " it, or of free memory, as TensorRT-LLM does"),
    "kv_reservation": (KV_RESERVATIONS, "a sequence's prompt, as vLLM and SGLang reserve, or its"
                       " whole length, as TensorRT-LLM does"),
}
# Columns the physics reads (deployments.csv may omit `stack` and the SCHEDULER_CHOICES options:
# the default stack and the Scheduler defaults, vLLM's, apply; gpus.csv may omit
# `weight_only_dtypes`, `kv_cache_dtypes`, `interconnect_peer_links` and `allreduce_family`).
REQUIRED_COLUMNS = {
    "gpus": ("gpu", "family", "memory_gb", "memory_gib", "hbm_bandwidth_gbs", "bf16_tflops",
             "fp8_tflops", "int8_tops", "fp4_tflops", "interconnect_gbs", "source"),
    "gpu_efficiency": ("family", "stack", "compute_efficiency", "bandwidth_efficiency",
                       "step_overhead_s", "layer_overhead_s", "sequence_overhead_s",
                       "allreduce_latency_s", "allreduce_rounds", "allreduce_bus_efficiency",
                       "source"),
    "models": ("model", "layers", "hidden_size", "q_heads", "kv_heads", "head_dim", "ffn_size",
               "total_params_b", "active_params_b", "experts", "experts_per_token", "attention",
               "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "source"),
    "prices": ("gpu", "provider", "plan", "usd_per_gpu_hour", "is_default", "source"),
    "deployments": ("deployment", "model", "gpu", "tp", "weight_dtype", "kv_dtype", "replicas",
                    "max_seqs", "max_batched_tokens", "chunked_prefill", "kv_memory_fraction",
                    "kv_block_tokens", "price_provider", "price_plan", "net_one_way_s",
                    "net_bytes_per_token", "net_bandwidth_bytes_per_s", "source"),
}
# The efficiency factors and overheads of gpu_efficiency.csv that carry the serving software, not
# the hardware: a deployment may set its own (deployments.csv columns of these names, Catalog.build
# arguments), a what-if on the same GPU keeps them, and calibration fits them (with the client
# path). The all-reduce's are the interconnect's and stay the family's.
SOFTWARE_FACTORS = ("compute_efficiency", "bandwidth_efficiency", "step_overhead_s",
                    "layer_overhead_s", "sequence_overhead_s")
# Catalog.build's dtype arguments -> the deployments.csv columns they are given from.
ROW_DTYPE_COLUMNS = {"weights": "weight_dtype", "kv_cache": "kv_dtype"}
# The columns that name a row: no two rows of a table may share them.
KEY_COLUMNS = {"gpus": ("gpu",), "gpu_efficiency": ("family", "stack"), "models": ("model",),
               "prices": ("gpu", "provider", "plan"), "deployments": ("deployment",)}
# The REQUIRED_COLUMNS that may be left empty in a row: peaks a GPU does not have, MLA ranks of
# models without MLA, a deployment's price plan (its GPU's default then). Every other required
# value must be there.
MAY_BE_EMPTY = {
    "gpus": ("fp8_tflops", "int8_tops", "fp4_tflops"),
    "models": ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim"),
    "deployments": ("price_provider", "price_plan"),  # empty: the GPU's default price
}


@dataclass(frozen=True)
class Range:
    """The values a number column allows: above `low` (or at it, where `low_inclusive`), at most
    `high`, whole where `whole`; never NaN or infinite."""

    low: float
    low_inclusive: bool = False
    high: float = math.inf
    whole: bool = False

    @property
    def expected(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        if math.isinf(self.high):
            return f"{kind} {'>=' if self.low_inclusive else '>'} {self.low:g}"
        return f"{kind} in {'[' if self.low_inclusive else '('}{self.low:g}, {self.high:g}]"

    def wrong(self, values: pl.Series) -> pl.Series:
        """True where a value is outside the range (null where it is empty)."""
        v = values.cast(pl.Float64, strict=False)
        below = v < self.low if self.low_inclusive else v <= self.low
        bad = ~v.is_finite() | below | (v > self.high)
        return bad | (v != v.floor()) if self.whole else bad

    def refuses(self, value) -> bool:
        """Whether a value given from Python is outside the range; text ('32') and booleans
        are refused, not read as the number they spell or stand for."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return True
        try:
            return bool(self.wrong(pl.Series([float(value)])).item())
        except (TypeError, ValueError):
            return True


POSITIVE = Range(0)
NON_NEGATIVE = Range(0, low_inclusive=True)
FRACTION = Range(0, high=1)  # of a peak or of memory: (0, 1]
COUNT = Range(1, low_inclusive=True, whole=True)
# One replica's tensor-parallel group is one node: the all-reduce is modelled on the GPUs' own
# links (NVLink / NVSwitch, Infinity Fabric, PCIe), not across nodes.
TENSOR_PARALLEL = Range(1, low_inclusive=True, high=8, whole=True)
# The number columns of each table and their ranges. Those of REQUIRED_COLUMNS must hold numbers
# (a column left entirely empty, such as the MLA ranks of a catalog without MLA models, reads as
# text with no value and passes); the others are optional number columns, checked where present:
# a deployment's own efficiency factors, which override its GPU family's. An empty value (a peak
# a GPU lacks, an MLA rank of a model without MLA) is not checked.
NUMBER_RANGES = {
    "gpus": {
        **dict.fromkeys(("memory_gb", "memory_gib", "hbm_bandwidth_gbs", "bf16_tflops",
                         "fp8_tflops", "int8_tops", "fp4_tflops", "interconnect_gbs"), POSITIVE),
        # optional: empty for a switch or PCIe (GpuSpec.interconnect_peer_links)
        "interconnect_peer_links": COUNT,
    },
    "gpu_efficiency": {
        **dict.fromkeys(("compute_efficiency", "bandwidth_efficiency",
                         "allreduce_bus_efficiency"), FRACTION),
        **dict.fromkeys(("step_overhead_s", "layer_overhead_s", "sequence_overhead_s",
                         "allreduce_latency_s"),
                        NON_NEGATIVE),
    },
    "models": {
        **dict.fromkeys(("layers", "hidden_size", "q_heads", "kv_heads", "head_dim", "ffn_size",
                         "experts", "experts_per_token", "q_lora_rank", "kv_lora_rank",
                         "qk_rope_head_dim", "max_context", "vocab_size"), COUNT),
        "total_params_b": POSITIVE, "active_params_b": POSITIVE,
    },
    "prices": {"usd_per_gpu_hour": POSITIVE},
    "deployments": {
        "tp": TENSOR_PARALLEL,
        **dict.fromkeys(("replicas", "max_seqs", "max_batched_tokens", "kv_block_tokens"), COUNT),
        "kv_memory_fraction": FRACTION, "compute_efficiency": FRACTION,
        "bandwidth_efficiency": FRACTION,
        **dict.fromkeys(("step_overhead_s", "layer_overhead_s", "sequence_overhead_s",
                         "net_one_way_s", "net_bytes_per_token"), NON_NEGATIVE),
        "net_bandwidth_bytes_per_s": POSITIVE,
    },
}
# Number columns that may not exceed another of the same row: (column, its upper bound, why).
# The driver's GiB are never more than the marketed GB (decimal GB, or GiB sold as GB: the
# A100's 80): a memory_gib above it is nvidia-smi's MiB (or bytes) pasted unconverted, which
# sized a KV cache a thousand times too large without a word.
AT_MOST = {
    "models": (("experts_per_token", "experts", ""), ("active_params_b", "total_params_b", "")),
    "gpus": (("memory_gib", "memory_gb", ": the total the driver reports in GiB (nvidia-smi's"
              " memory.total MiB / 1024), never more than the marketed GB"),),
}
# Columns that hold true / false.
# (models' tied_embeddings is optional: false where absent or empty)
BOOLEAN_COLUMNS = {"deployments": ("chunked_prefill",), "prices": ("is_default",),
                   "models": ("tied_embeddings",)}
# What a model without a vocab_size is taken as (deployment.vocab_params): a new row left
# without it changed Qwen2.5-7B's bf16 prefill on an H20 by 16% and its decode step by 6%.
VOCAB_UNKNOWN = ("its embedding table and LM head are taken as transformer-block weights: held"
                 " and read at the weight dtype, the embedding table read and multiplied at every"
                 " step (docs/physics.md section 2)")
# Optional columns the physics reads, which a catalog copied from an older release lacks: it
# loads, but models or checks less. Table -> column -> what its absence means, for the preflight
# to say (Catalog.absent_columns).
ABSENT_COLUMN_MEANS = {
    "gpus": {
        "kv_cache_dtypes": "any KV-cache dtype is taken on any GPU (an fp4 KV cache on an H100 too)",
        "allreduce_family": "every GPU takes its own family's all-reduce (a PCIe card of an NVLink"
                            " family, as the A10, gets NVSwitch's)",
        "interconnect_peer_links": "every GPU's interconnect_gbs is taken as a switch's, whole at"
                                   " any tp (an MI300X pair all-reduces over all seven Infinity"
                                   " Fabric links of its 8-GPU mesh, not the one between them)",
    },
    "models": {
        "tied_embeddings": "every model is taken as untied (one whose config.json sets"
                           " tie_word_embeddings, as Llama-3.2-1B, is modelled with an embedding"
                           " table it does not have)",
        "vocab_size": f"for every model {VOCAB_UNKNOWN}",
    },
}
# Optional values the physics reads, left empty in a row: table -> column -> what it means for
# that row, for the preflight to say (Catalog.empty_values).
EMPTY_VALUE_MEANS = {"models": {"vocab_size": VOCAB_UNKNOWN}}
PEAK_COLUMN = {"bf16": "bf16_tflops", "fp16": "bf16_tflops", "fp8": "fp8_tflops",
               "int8": "int8_tops", "fp4": "fp4_tflops"}


# The words of a model name, to match a log's (requests.model) with the catalog's: lower-case
# runs of letters, and numbers with their unit ("70b", "8x"), so that "Llama-2-70b-chat-hf",
# "llama2-70b-4096" and "meta.llama2-70b-chat-v1" all read llama, 2, 70b, ...
NAME_WORDS = re.compile(r"[a-z]+|[0-9]+[a-z]*")


def _words(name: str) -> tuple[str, ...]:
    return tuple(NAME_WORDS.findall(name.lower()))


def _holds(words: tuple[str, ...], part: tuple[str, ...]) -> bool:
    """Whether `part` is a run of consecutive `words`."""
    return any(words[i:i + len(part)] == part for i in range(len(words) - len(part) + 1))


def model_named(name: str, models: Iterable[str]) -> str | None:
    """The model of `models` (catalog names) a log's model name names, or None where it names
    none for sure. A catalog model is named when its words (NAME_WORDS) run consecutively in
    the log's name (a provider's prefix and a "-chat-hf" suffix around them change nothing); of
    several, the one of most words ("llama-2-7b-32k" over "llama-2-7b"), and none on a tie. A
    name that spells the model otherwise ("llama-v2-70b-chat") names none: a wrong match would
    call a right deployment wrong, a missed one only says nothing. A function of the names
    alone, so that the summary places a log's names on the warehouse's `models` table."""
    words = _words(name)
    named = sorted(((len(_words(model)), model) for model in models
                    if _words(model) and _holds(words, _words(model))), reverse=True)
    if not named or (len(named) > 1 and named[0][0] == named[1][0]):
        return None
    return named[0][1]


def another_model(name: str, requests: int, of: int, deployment: str, served: str,
                  models: Iterable[str]) -> str | None:
    """The sentence that a log naming model `name` on `requests` of its `of` requests names
    another catalog model than `served`, the model of `deployment`; None where the name is
    `served`'s or places on no catalog model (model_named). The calibration's implausible fits,
    the replay's check and the summary say it alike, each with what it means there."""
    model = model_named(name, models)
    if model is None or model == served:
        return None
    return (f"the log names model {name!r} ({model} in the catalog) on {requests:,} of its"
            f" {of:,} requests, and {deployment} serves {served}")


class CatalogError(ValueError):
    """A catalog file or a requested name is wrong; the message says which and what was expected
    (load_catalog's names every problem it found, one a line)."""


def _choices(frame: pl.DataFrame, column: str) -> str:
    return ", ".join(sorted(frame[column].to_list()))


def did_you_mean(value: str, choices: Iterable[str | None]) -> str:
    """"did you mean 'seed-example'? " where one of `choices` is close to `value`, else "": a
    one-letter typo in a name is found at once, not by reading a list of every choice. Letter
    case is not compared (a name differs from its own in capitals only, FP8 or a model as its
    Hugging Face repository spells it, where difflib's ratio was too low to name it; the catalog
    refuses keys that differ only in case, so no two choices fold to one)."""
    folded = {c.casefold(): c for c in choices if c is not None}
    close = difflib.get_close_matches(str(value).casefold(), list(folded), n=1)
    return f"did you mean {folded[close[0]]!r}? " if close else ""


def _one(frame: pl.DataFrame, column: str, value: str, what: str, file: Path) -> dict:
    """The row of `frame` whose `column` is `value`; an unknown name is a CatalogError naming
    the closest one first (a misspelt deployment in a sidecar or FLEETSPEND_DEPLOYMENT, a GPU in
    a scenario), then every choice the file has. A value that is not text (None, a list, a
    number) is unknown the same way: compared with the column, it had polars warn or raise its
    own error instead."""
    rows = frame.filter(pl.col(column) == value) if isinstance(value, str) else frame.head(0)
    if rows.height == 0:
        raise CatalogError(f"unknown {what} {value!r}: {did_you_mean(value, frame[column])}{file}"
                           f" has {_choices(frame, column)}")
    return rows.row(0, named=True)


@dataclass(frozen=True)
class Catalog:
    directory: Path
    gpus: pl.DataFrame
    gpu_efficiency: pl.DataFrame
    models: pl.DataFrame
    prices: pl.DataFrame
    deployments: pl.DataFrame

    def file(self, table: str) -> Path:
        return self.directory / f"{table}.csv"

    def absent_columns(self) -> list[str]:
        """One line per optional physics column (ABSENT_COLUMN_MEANS) these files lack, with
        what that means: a catalog of an older release runs without them, silently else."""
        return [f"{self.file(table)} has no {column} column: {means}; data/reference/README.md"
                f" says what it holds" for table, columns in ABSENT_COLUMN_MEANS.items()
                for column, means in columns.items() if column not in getattr(self, table).columns]

    def empty_values(self) -> list[str]:
        """One line per row whose optional physics value (EMPTY_VALUE_MEANS) is empty, with what
        that means: a new model row without its vocab_size is modelled otherwise, silently else."""
        lines = []
        for table, columns in EMPTY_VALUE_MEANS.items():
            frame = getattr(self, table)
            for column, means in columns.items():
                if column in frame.columns:
                    empty = frame.filter(pl.col(column).is_null())
                    lines += [f"{self.file(table)}, row {key!r}: {column} is empty: {means}"
                              for key in empty[KEY_COLUMNS[table][0]]]
        return lines

    @property
    def deployment_names(self) -> list[str]:
        return self.deployments["deployment"].to_list()

    def model_named(self, name: str) -> str | None:
        """The catalog model a log's model name names, or None (the module's model_named)."""
        return model_named(name, self.models["model"])

    def deployment(self, name: str) -> Deployment:
        """The named deployment of deployments.csv, with its physics resolved; a row that does
        not build is a CatalogError naming the file and the row."""
        row = _one(self.deployments, "deployment", name, "deployment", self.file("deployments"))
        overrides = {k: row.get(k) for k in SOFTWARE_FACTORS}
        try:
            return self.build(
                name=name,
                model=row["model"], gpu=row["gpu"], tp=row["tp"],
                weights=row["weight_dtype"], kv_cache=row["kv_dtype"], replicas=row["replicas"],
                max_seqs=row["max_seqs"], max_batched_tokens=row["max_batched_tokens"],
                chunked_prefill=row["chunked_prefill"], kv_memory_fraction=row["kv_memory_fraction"],
                kv_block_tokens=row["kv_block_tokens"],
                **{option: row[option] for option in SCHEDULER_CHOICES if row.get(option)},
                graph_batch_sizes=_graph_batch_sizes(row.get("graph_batch_sizes")),
                price_provider=row["price_provider"], price_plan=row["price_plan"],
                stack=row.get("stack") or DEFAULT_STACK,
                network=Network(row["net_one_way_s"], row["net_bytes_per_token"],
                                row["net_bandwidth_bytes_per_s"]),
                **{k: v for k, v in overrides.items() if v is not None},
            )
        except CatalogError as exc:
            raise CatalogError(f"{self.file('deployments')}, deployment {name!r}:"
                               f" {_in_row_columns(str(exc))}") from None

    def build(
        self,
        *,
        model: str,
        gpu: str,
        tp: int = 1,
        weights: str = "bf16",
        kv_cache: str | None = None,
        replicas: int = 1,
        name: str | None = None,
        price_provider: str | None = None,
        price_plan: str | None = None,
        network: Network | None = None,
        compute_efficiency: float | None = None,
        bandwidth_efficiency: float | None = None,
        step_overhead_s: float | None = None,
        layer_overhead_s: float | None = None,
        sequence_overhead_s: float | None = None,
        stack: str = DEFAULT_STACK,
        **scheduler_options,
    ) -> Deployment:
        """An ad-hoc deployment. Scheduler options are those of `Scheduler` (max_seqs,
        max_batched_tokens, chunked_prefill, kv_memory_fraction, kv_block_tokens,
        kv_memory_basis: "total" for vLLM / SGLang, "free" for TensorRT-LLM; kv_reservation:
        "prompt" for vLLM / SGLang, "full" for TensorRT-LLM; graph_batch_sizes: the CUDA-graph
        batch sizes decode steps are padded to, cut to the largest batch a decode step can
        have, `graph_sizes_within`); efficiency
        arguments override the defaults of the GPU family under the serving `stack`
        (gpu_efficiency.csv: `current` = today's engines with CUDA graphs and custom all-reduce,
        vLLM >= 0.6 / TensorRT-LLM / SGLang; `vllm-2023` = the 2023 stack SplitwiseSim profiled).
        Without a `name`, the deployment is named by what it is (`_built_name`)."""
        kv_defaulted = kv_cache is None   # only an absent one: "" is a dtype that does not exist
        kv_cache = weights if kv_defaulted else kv_cache
        for label, dtype in (("weights", weights), ("kv_cache", kv_cache)):
            if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:   # a list is unhashable
                raise CatalogError(f"{label}={dtype!r}: {did_you_mean(dtype, DTYPE_BYTES)}expected"
                                   f" one of {', '.join(DTYPE_BYTES)}")
        allowed = {f.name for f in fields(Scheduler)}
        unknown = set(scheduler_options) - allowed
        if unknown:
            raise CatalogError(f"unknown option(s) {sorted(unknown)}{_build_option_hint(unknown)}: expected"
                               f" build()'s own ({', '.join(_build_parameters())}) or a scheduler option"
                               f" ({', '.join(sorted(allowed))})")
        scheduler = Scheduler(**scheduler_options)
        network = network or Network()
        if not isinstance(network, Network):
            raise CatalogError(f"network={network!r}: expected a Network(one_way_s,"
                               f" bytes_per_token, bandwidth_bytes_per_s)")

        m = _one(self.models, "model", model, "model", self.file("models"))
        g = _one(self.gpus, "gpu", gpu, "gpu", self.file("gpus"))
        gemm_dtype = _gemm_dtype(g, weights)
        if gemm_dtype is None:
            served = [d for d in DTYPE_BYTES if _gemm_dtype(g, d) is not None]
            raise CatalogError(f"weights={weights!r}: gpu {gpu!r} has no {weights} tensor"
                               f" throughput and no weight-only {weights} kernel in"
                               f" {self.file('gpus')}; expected weights of {', '.join(served)}")
        stored = _kv_cache_dtypes(g)
        if kv_cache not in stored:
            given = " (by default the weights' dtype)" if kv_defaulted else ""
            raise CatalogError(f"kv_cache={kv_cache!r}{given}: no serving engine stores the KV cache"
                               f" in {kv_cache} on {gpu}; expected one of {', '.join(stored)}"
                               f" ({self.file('gpus')} kv_cache_dtypes, sources in kv_cache_source)")
        family_rows = self.gpu_efficiency.filter(pl.col("family") == g["family"])
        if family_rows.height == 0:
            raise CatalogError(f"gpu family {g['family']!r} of {gpu!r} has no row in"
                               f" {self.file('gpu_efficiency')}")
        eff = _one(family_rows, "stack", stack, f"serving stack for {g['family']} GPUs",
                   self.file("gpu_efficiency"))
        link = self._allreduce_row(g, stack, tp, eff)
        given = dict(zip(SOFTWARE_FACTORS, (compute_efficiency, bandwidth_efficiency,
                                            step_overhead_s, layer_overhead_s,
                                            sequence_overhead_s), strict=True))
        efficiency = Efficiency(
            **{k: eff[k] if given[k] is None else given[k] for k in SOFTWARE_FACTORS},
            allreduce_latency_s=link["allreduce_latency_s"],
            allreduce_rounds=link["allreduce_rounds"],
            allreduce_bus_efficiency=link["allreduce_bus_efficiency"],
        )
        # the ranges deployments.csv columns are held to, for a caller that is not the file
        values = {"tp": tp, "replicas": replicas, **asdict(scheduler), **asdict(efficiency),
                  **{f"net_{k}": v for k, v in asdict(network).items()}}
        for column, rule in NUMBER_RANGES["deployments"].items():
            if rule.refuses(values[column]):
                # a tp out of range also names the degrees that split this model, as an uneven
                # one's message does, so that the next try is not refused in turn
                valid = (f"; valid tp for {model}: {', '.join(map(str, valid_tensor_parallel(m)))}"
                         if column == "tp" else "")
                raise CatalogError(f"{column}={values[column]!r}: expected {rule.expected}{valid}")
        if not isinstance(scheduler.chunked_prefill, (bool, np.bool_)):
            raise CatalogError(f"chunked_prefill={scheduler.chunked_prefill!r}: expected True or False")
        sizes = scheduler.graph_batch_sizes
        if isinstance(sizes, (str, bytes)) or not all(
                isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 1
                for x in (sizes if isinstance(sizes, Iterable) else [None])):
            raise CatalogError(f"graph_batch_sizes={sizes!r}: expected the CUDA-graph batch sizes"
                               f" a decode step is padded to, whole numbers of at least 1"
                               f" (empty: no padding)")
        # the checked numbers as the physics and the compiled replay take them (32.0 and
        # np.int64(32) are 32; a float count would fail numba's typing deep in the replay)
        tp, replicas = int(tp), int(replicas)
        scheduler = replace(scheduler, chunked_prefill=bool(scheduler.chunked_prefill),
                            kv_memory_fraction=float(scheduler.kv_memory_fraction),
                            graph_batch_sizes=graph_sizes_within(
                                sorted({int(x) for x in sizes}),
                                min(int(scheduler.max_seqs), int(scheduler.max_batched_tokens))),
                            **{k: int(getattr(scheduler, k))
                               for k in ("max_seqs", "max_batched_tokens", "kv_block_tokens")})
        efficiency = replace(efficiency,
                             **{k: float(getattr(efficiency, k)) for k in SOFTWARE_FACTORS})
        network = Network(*(float(v) for v in astuple(network)))
        for option, (choices, meaning) in SCHEDULER_CHOICES.items():
            value = getattr(scheduler, option)
            if value not in choices:
                raise CatalogError(f"{option}={value!r}: expected one of {', '.join(choices)}"
                                   f" ({meaning})")
        _check_memory_basis(g, scheduler.kv_memory_basis)
        _check_tensor_parallel(m, tp)
        links = g.get("interconnect_peer_links")
        if links is not None and tp - 1 > links:
            raise CatalogError(f"tp={tp}: {gpu}'s interconnect is a mesh of {links} peer links"
                               f" (interconnect_peer_links in {self.file('gpus')}), which joins"
                               f" {links + 1} GPUs directly; expected tp of at most {links + 1}"
                               f" (a larger group relays through peers, which is not modelled)")
        provider, plan = self._price_key(gpu, price_provider, price_plan)
        deployment = Deployment(
            name=name or _built_name(model, gpu, tp, weights, kv_cache),
            model=ModelSpec(**{f.name: m.get(f.name) for f in fields(ModelSpec)}),
            gpu=GpuSpec(gpu=gpu, family=g["family"], memory_gb=g["memory_gb"],
                        memory_gib=g["memory_gib"],
                        hbm_bandwidth_gbs=g["hbm_bandwidth_gbs"],
                        peak_tflops=g[PEAK_COLUMN[gemm_dtype]], gemm_dtype=gemm_dtype,
                        bf16_peak_tflops=g["bf16_tflops"],
                        attention_peak_tflops=_attention_peak(g, kv_cache),
                        interconnect_gbs=g["interconnect_gbs"],
                        interconnect_peer_links=links),
            tp=tp, weight_dtype=weights, kv_dtype=kv_cache, replicas=replicas,
            scheduler=scheduler, efficiency=efficiency,
            network=network, price_provider=provider, price_plan=plan,
            stack=stack,
        )
        if deployment.kv_capacity_tokens <= 0:
            fitting = self._fitting_choices(deployment, m)
            raise CatalogError(
                f"{model} weights ({deployment.weight_bytes_per_gpu / 2**30:.1f} GiB"
                f" per GPU at tp={tp}, {weights}) and activations"
                f" ({deployment.activation_bytes_per_gpu / 2**30:.1f} GiB for"
                f" max_batched_tokens={deployment.scheduler.max_batched_tokens})"
                f" leave no room for a KV cache in"
                f" {deployment.scheduler.kv_memory_fraction:.0%} of {g['memory_gib']} GiB on {gpu}"
                f" ({deployment.scheduler.kv_memory_basis} memory basis);"
                f" choices that fit: {fitting or 'none on this GPU'}"
            )
        return deployment

    def _allreduce_row(self, gpu_row: dict, stack: str, tp: int, own_row: dict) -> dict:
        """The gpu_efficiency.csv row whose all-reduce parameters (latency per round, rounds,
        bus efficiency) fit this GPU's links: its gpus.csv `allreduce_family`'s where it names one,
        else its own family's (`own_row`, this stack's). They follow the link, not the chip: an
        A10 is an Ampere chip on PCIe, whose all-reduce is the PCIe Ada cards' ring, not the
        NVSwitch A100's. At tp 1 there is no all-reduce: where the links' family has no row for
        the stack (an A10 on `vllm-2023`), `own_row` stands in, its all-reduce unused, rather
        than refusing a deployment for an all-reduce it does not run."""
        family = gpu_row.get("allreduce_family") or gpu_row["family"]
        rows = self.gpu_efficiency.filter(pl.col("family") == family)
        if tp == 1 and rows.filter(pl.col("stack") == stack).height == 0:
            return own_row
        if family == gpu_row["family"]:
            what = f"serving stack for {family} GPUs"
        else:
            what = (f"serving stack for the all-reduce of {gpu_row['gpu']} (its links are"
                    f" {family} GPUs': allreduce_family in {self.file('gpus')})")
        return _one(rows, "stack", stack, what, self.file("gpu_efficiency"))

    def on_gpu(self, d: Deployment, gpu: str) -> Deployment:
        """`d` (model, parallelism, dtypes, replicas, scheduler, client path) on another GPU,
        with that GPU family's default factors and price: a candidate for a log that names its
        model but not the hardware that served it (calibration.calibrate_candidates)."""
        return self.build(model=d.model.model, gpu=gpu, tp=d.tp, weights=d.weight_dtype,
                          kv_cache=d.kv_dtype, replicas=d.replicas, network=d.network,
                          stack=d.stack, **asdict(d.scheduler))

    def _fitting_choices(self, deployment: Deployment, model_row: dict) -> str:
        """`tp=N weights=D` pairs (valid tensor parallelism, a weight dtype this GPU serves) that
        leave room for a KV cache on the deployment's GPU: the KV cache in the weights' dtype,
        build's default, or where the GPU stores none in it, in the deployment's own (named)."""
        g = self.gpus.filter(pl.col("gpu") == deployment.gpu.gpu).row(0, named=True)
        found = []
        for dtype in ("bf16", "fp8", "fp4"):
            if _gemm_dtype(g, dtype) is None:
                continue
            kv = dtype if dtype in _kv_cache_dtypes(g) else deployment.kv_dtype
            for tp in valid_tensor_parallel(model_row):
                candidate = replace(deployment, tp=tp, weight_dtype=dtype, kv_dtype=kv)
                if candidate.kv_capacity_tokens > 0:
                    found.append(f"tp={tp} weights={dtype}" + (f" kv_cache={kv}" if kv != dtype else ""))
                    break
        return ", ".join(found)

    def _price_key(self, gpu: str, provider: str | None, plan: str | None) -> tuple[str, str]:
        """(provider, plan) of the price row chosen: the GPU's default where neither is given."""
        listed = self.prices.filter(pl.col("gpu") == gpu)
        if (provider is None) != (plan is None):
            raise CatalogError(f"price_provider={provider!r}, price_plan={plan!r}: expected both"
                               f" (a row of {self.file('prices')} for gpu {gpu!r}), or neither"
                               f" for the GPU's default price")
        if provider is None and plan is None:
            label, which, prices = "default price", "", listed.filter(pl.col("is_default"))
        else:
            label, which = "price", f" from provider {provider!r} plan {plan!r}"
            # a provider or plan that is not text is no row's (compared with the column, a list
            # raised polars' InvalidOperationError), as _one takes a name
            texts = isinstance(provider, str) and isinstance(plan, str)
            prices = (listed.filter((pl.col("provider") == provider) & (pl.col("plan") == plan))
                      if texts else listed.head(0))
        if prices.height == 0:
            plans = [f"{a} {b}" for a, b in listed.select("provider", "plan").iter_rows()]
            hint = did_you_mean(f"{provider} {plan}", plans) if which else ""
            raise CatalogError(f"no {label} for gpu {gpu!r}{which} in {self.file('prices')};"
                               f" {hint}its prices: {', '.join(plans) or 'none'}")
        if prices.height > 1:
            raise CatalogError(f"{prices.height} {label}s for gpu {gpu!r}{which} in"
                               f" {self.file('prices')}: expected exactly one")
        return prices["provider"][0], prices["plan"][0]

    def _price_rows(self, gpu: str, provider: str | None, plan: str | None) -> pl.DataFrame:
        return self.prices.filter((pl.col("gpu") == gpu) & (pl.col("provider") == provider)
                                  & (pl.col("plan") == plan))

    def lists_price(self, gpu: str, provider: str | None, plan: str | None) -> bool:
        """Whether prices.csv has a row for `gpu` from `provider` on `plan`."""
        return self._price_rows(gpu, provider, plan).height > 0

    def usd_per_gpu_hour(self, deployment: Deployment) -> float:
        d = deployment
        return float(self._price_rows(d.gpu.gpu, d.price_provider, d.price_plan)["usd_per_gpu_hour"][0])


def _built_name(model: str, gpu: str, tp: int, weights: str, kv_cache: str) -> str:
    """An ad-hoc deployment's name, e.g. `llama-3.1-8b@l4-tp1-bf16`, with `-kv-fp8` where the KV
    cache's dtype is not the weights': names key reports, what-if and calibration rows, so two
    deployments that differ only in their KV cache must not share one."""
    kv = f"-kv-{kv_cache}" if kv_cache != weights else ""
    return f"{model}@{gpu}-tp{tp}-{weights}{kv}"


def _has_peak(gpu_row: dict, dtype: str) -> bool:
    peak = gpu_row[PEAK_COLUMN[dtype]]
    return peak is not None and not (isinstance(peak, float) and math.isnan(peak))


def _listed(gpu_row: dict, column: str) -> list[str]:
    """The `;`-separated dtypes of a gpus.csv cell (none where it is empty or absent)."""
    listed = gpu_row.get(column)
    return [d.strip() for d in listed.split(";") if d.strip()] if isinstance(listed, str) else []


def _weight_only(gpu_row: dict) -> list[str]:
    """The weight dtypes this GPU serves weight-only (gpus.csv `weight_only_dtypes`, optional)."""
    return _listed(gpu_row, "weight_only_dtypes")


def _kv_cache_dtypes(gpu_row: dict) -> list[str]:
    """The KV-cache dtypes serving engines store on this GPU (gpus.csv `kv_cache_dtypes`, each
    with its source in `kv_cache_source`): an NVFP4 KV cache, say, only on Blackwell. A catalog
    without the column states no limit: every dtype."""
    return _listed(gpu_row, "kv_cache_dtypes") if "kv_cache_dtypes" in gpu_row else list(DTYPE_BYTES)


def _gemm_dtype(gpu_row: dict, weights: str) -> str | None:
    """The dtype the weight GEMMs compute in: the weights' own where the GPU has tensor
    throughput for it; bf16 where it serves them weight-only (W8A16 / W4A16 Marlin on NVIDIA
    GPUs without fp8 / fp4 tensor cores: the weights are read at their own size and converted to
    bf16 in registers, so the bytes drop, to a half for fp8 and 0.28 for NVFP4, but the peak stays
    bf16's); None where it has neither."""
    if _has_peak(gpu_row, weights):
        return weights
    return "bf16" if weights in _weight_only(gpu_row) else None


def _attention_peak(gpu_row: dict, kv_dtype: str) -> float:
    """Attention runs in fp8 when the KV cache is fp8 (or fp4, dequantized to fp8) and the GPU
    has fp8 tensor cores; otherwise in bf16."""
    if kv_dtype in ("fp8", "fp4") and _has_peak(gpu_row, "fp8"):
        return gpu_row["fp8_tflops"]
    return gpu_row["bf16_tflops"]


def graph_sizes_within(sizes: list[int], largest_batch: int) -> tuple[int, ...]:
    """The captured sizes an engine pads decode steps to, given the largest batch a decode step
    can have (min(max_seqs, max_batched_tokens): a decode is one token a sequence): the sizes up
    to it, and the largest batch itself where a size was listed above it, since a batch is
    never padded past what the engine runs. TensorRT-LLM's rule
    (tensorrt_llm/_torch/pyexecutor/model_engine.py `_filter_cuda_graph_batch_sizes`, with
    padding on); a list within the limit is kept as it is."""
    kept = [size for size in sizes if size <= largest_batch]
    if len(kept) < len(sizes) and (not kept or kept[-1] != largest_batch):
        kept.append(largest_batch)
    return tuple(kept)


def _graph_batch_sizes(cell) -> tuple[int, ...]:
    """deployments.csv's optional graph_batch_sizes: CUDA-graph batch sizes separated by ';'
    (a single size reads as a number), empty or absent for no padding."""
    if cell is None or (isinstance(cell, str) and not cell.strip()):
        return ()
    parts = str(cell).split(";")
    if not all(part.strip().isdigit() for part in parts):
        raise CatalogError(f"graph_batch_sizes={cell!r}: expected the CUDA-graph batch sizes a"
                           f" decode step is padded to, whole numbers separated by ';' (e.g."
                           f" 1;2;4;8;16), empty for none")
    return tuple(int(part) for part in parts)


def _check_memory_basis(gpu_row: dict, basis: str) -> None:
    """The "free" basis is TensorRT-LLM's reading of its memory fraction, with its CUDA runtime
    and NCCL buffers (deployment.py, KV capacity); TensorRT-LLM runs on NVIDIA GPUs only
    (nvidia.github.io/TensorRT-LLM, supported hardware), so on another vendor's (gpus.csv
    `vendor`) it would size the KV cache of an engine that is not there."""
    vendor = gpu_row.get("vendor")   # spelt as a user writes it: "Nvidia", "NVIDIA Corporation"
    if basis == "free" and vendor is not None and "nvidia" not in vendor.casefold():
        raise CatalogError(f"kv_memory_basis='free' on {gpu_row['gpu']}: the free-memory basis"
                           f" is TensorRT-LLM's, which runs on NVIDIA GPUs only, not {vendor}'s;"
                           f" expected kv_memory_basis='total' (vLLM's and SGLang's reading)")


def _splits(model_row: dict, tp: int) -> bool:
    """Whether tp GPUs split the model evenly, as engines require: query heads divisible by tp,
    KV heads divisible by tp or tp a multiple of them (each GPU then keeps one replicated KV
    head), and the FFN (a mixture's per-expert FFN) divisible by tp, which vLLM's column-parallel
    layers assert (MergedColumnParallelLinear: every output size % tp == 0)."""
    q, kv = model_row["q_heads"], model_row["kv_heads"]
    return q % tp == 0 and (kv % tp == 0 or tp % kv == 0) and model_row["ffn_size"] % tp == 0


def valid_tensor_parallel(model_row: dict, largest: int = int(TENSOR_PARALLEL.high)) -> list[int]:
    """Tensor-parallel degrees up to `largest` (one 8-GPU node) that split the model evenly."""
    return [tp for tp in range(1, largest + 1) if _splits(model_row, tp)]


def _check_tensor_parallel(model_row: dict, tp: int) -> None:
    if not _splits(model_row, tp):
        raise CatalogError(
            f"tp={tp} cannot split {model_row['model']} ({model_row['q_heads']} query heads,"
            f" {model_row['kv_heads']} KV heads, FFN {model_row['ffn_size']}) evenly;"
            f" valid tp: {', '.join(map(str, valid_tensor_parallel(model_row)))}"
        )


SHAPE_DIMENSIONS = ("prompt", "output")
SHAPE_BUCKET_COLUMNS = ("dimension", "lower", "upper", "label", "source")


def _in_row_columns(message: str) -> str:
    """A `Catalog.build` message in the words of a deployments.csv row: its `weights=` and
    `kv_cache=` (build's arguments, and scenarios.csv's columns) are the row's weight_dtype and
    kv_dtype, the columns a user has to find and fix."""
    for argument, column in ROW_DTYPE_COLUMNS.items():
        if message.startswith(f"{argument}="):
            return column + message[len(argument):]
    return message


def load_shape_buckets(path: str | Path | None = None) -> pl.DataFrame:
    """shape_buckets.csv of the reference folder `path` (default data/reference/): the prompt and
    output length buckets whose cross product is a request *shape*. Each dimension's buckets must
    tile the token counts a request can have (from 1 up, each bucket's upper edge the next one's
    lower, the last open-ended) with distinct labels: the reports' SQL drops a request no bucket
    holds, and the calibration files it under the bucket below, so a gap would make them
    disagree. Problems raise one CatalogError naming the file and the bucket of each, one a
    line (a dimension's tiling is checked whatever the other's)."""
    file = (Path(path) if path is not None else DEFAULT_REFERENCE_DIR) / "shape_buckets.csv"
    if not file.is_file():
        raise CatalogError(f"shape bucket file {file} is missing: expected the prompt and output"
                           f" length buckets as CSV ({', '.join(SHAPE_BUCKET_COLUMNS)})")
    try:
        buckets = pl.read_csv(file, schema_overrides={"lower": pl.Int64, "upper": pl.Int64})
    except pl.exceptions.PolarsError as exc:
        raise CatalogError(f"shape bucket file {file} is not a readable CSV of whole-number"
                           f" edges: {csv_problem(file, exc)}") from None
    buckets = as_meant(buckets)   # they would reach the warehouse's shape_buckets table
    missing = [c for c in SHAPE_BUCKET_COLUMNS if c not in buckets.columns]
    if missing:
        raise CatalogError(f"shape bucket file {file} lacks column(s) {missing}")
    # the README's rule for every reference file, unchecked here before
    unsourced = buckets.filter(pl.col("source").is_null())
    problems = [f"shape bucket file {file}, {dimension} bucket {label!r}: source is empty:"
                f" expected where its edges come from, or that they are a choice (see"
                f" data/reference/README.md)"
                for dimension, label in unsourced.select("dimension", "label").iter_rows()]
    for dimension in SHAPE_DIMENSIONS:   # each dimension's tiling, whatever the other's
        rows = buckets.filter(pl.col("dimension") == dimension).sort("lower")
        problem = _bucket_problem(rows)
        if problem:
            problems.append(f"shape bucket file {file}, {dimension} buckets: {problem}")
    unknown = buckets.filter(~pl.col("dimension").is_in(SHAPE_DIMENSIONS))
    problems += [f"shape bucket file {file}: dimension {dimension!r}: expected one of"
                 f" {', '.join(SHAPE_DIMENSIONS)}" for dimension in unknown["dimension"].unique(
                     maintain_order=True)]
    if problems:
        raise CatalogError("\n".join(problems))
    return buckets


def _bucket_problem(rows: pl.DataFrame) -> str | None:
    """Why one dimension's buckets (sorted by lower edge) do not tile 1 .. infinity, or None."""
    if rows.height == 0:
        return "none; expected at least one, from 1 token up"
    if rows["lower"].null_count() or rows["label"].null_count():
        return "a bucket without a lower edge or a label"
    if rows["label"].n_unique() < rows.height:
        return f"label {rows.filter(pl.col('label').is_duplicated())['label'][0]!r} is used twice"
    spaced = rows.filter(pl.col("label") != pl.col("label").str.strip_chars())
    if spaced.height:
        return f"label {spaced['label'][0]!r} has spaces around it: expected the label alone"
    twins = rows.filter(pl.col("label").str.to_lowercase().is_duplicated())
    if twins.height:   # two shapes the report would name alike
        return (f"labels {' and '.join(map(repr, twins['label']))} differ only in letter case:"
                f" expected each label once, spelt one way")
    if rows["lower"][0] > 1:
        return f"the first starts at {rows['lower'][0]}: expected 1 or less (a request has 1 token or more)"
    for bucket, following in zip(rows.iter_rows(named=True), rows[1:].iter_rows(named=True)):
        if bucket["upper"] != following["lower"]:
            return (f"{bucket['label']!r} ends at {bucket['upper']} but {following['label']!r}"
                    f" starts at {following['lower']}: expected each upper edge to be the next"
                    f" lower edge")
    if rows["upper"][-1] is not None:
        return f"the last, {rows['label'][-1]!r}, ends at {rows['upper'][-1]}: expected it open-ended (empty upper)"
    return None


ATTENTION_KINDS = ("MHA", "GQA", "MLA")


def _check_attention(models: pl.DataFrame, file: Path, problems: list[str]) -> None:
    """The attention kind decides the KV sizing (deployment.kv_bytes_per_token): a kind it does
    not know would be sized as grouped-query attention without a word, MHA / GQA query heads
    must split evenly over the KV heads, and MLA needs the ranks its latent is made of."""
    kind = pl.col("attention")
    _reject_values(models, "attention", file, f"one of {', '.join(ATTENTION_KINDS)}",
                   ~models["attention"].is_in(ATTENTION_KINDS), problems)
    grouped = models.filter(kind != "MLA")
    _reject_values(grouped, "kv_heads", file, "a divisor of the row's q_heads (MHA / GQA)",
                   grouped["q_heads"] % grouped["kv_heads"] != 0, problems)
    for column in ("kv_lora_rank", "qk_rope_head_dim"):
        empty = models.filter((kind == "MLA") & pl.col(column).is_null())
        problems += [f"catalog file {file}, row {model!r}: {column} is empty: expected a value"
                     f" for an MLA model (its KV latent is kv_lora_rank + qk_rope_head_dim wide)"
                     for model in empty["model"]]


def _check_expert_split(models: pl.DataFrame, file: Path, problems: list[str]) -> None:
    """A mixture of experts (experts > experts_per_token) is split into shared and per-expert
    parameters from its total and active counts (deployment._expert_split_params): active =
    shared + k * per_expert and total = shared + E * per_expert, so k / E * total <= active <
    total. Outside that the split has no experts (active = total: every expert read at every
    step, as if dense) or negative shared weights, and the step times are wrong without a word.
    A dense model's active count is its total."""
    moe = models.filter(pl.col("experts") > pl.col("experts_per_token"))
    floor = moe["total_params_b"] * moe["experts_per_token"] / moe["experts"]
    _reject_values(moe, "active_params_b", file,
                   "less than the row's total_params_b and at least total_params_b *"
                   " experts_per_token / experts for a mixture of experts (experts >"
                   " experts_per_token): the active count is the shared parameters plus"
                   " experts_per_token experts'",
                   (moe["active_params_b"] >= moe["total_params_b"])
                   | (moe["active_params_b"] < floor * (1 - 1e-9)), problems)
    # A dense model (every expert used by every token) reads its total and multiplies its active
    # parameters: an active count below the total (say, embeddings left out) would price its
    # GEMMs for fewer parameters than its weight reads, without a word.
    dense = models.filter(pl.col("experts") <= pl.col("experts_per_token"))
    _reject_values(dense, "active_params_b", file,
                   "the row's total_params_b for a dense model (experts <= experts_per_token:"
                   " every parameter is used by every token)",
                   (dense["active_params_b"] - dense["total_params_b"]).abs()
                   > 1e-9 * dense["total_params_b"], problems)


def _check_vocabulary(models: pl.DataFrame, file: Path, problems: list[str]) -> None:
    """The embedding table and the LM head (vocab_size x hidden_size each, one matrix where
    tied) are inside the shared parameters, those every token uses (a dense model's active
    count; a mixture's total less its experts, as deployment._expert_split_params derives
    them); the shared transformer blocks are what is left (deployment.vocab_params), which must
    be more than nothing. Checked against the active count alone, a mixture such as
    gpt-oss-20b (20.9 B total, 3.6 B active, 32 experts, top 4: 1.13 B shared, 1.16 B of
    vocabulary) passed with negative attention weights."""
    if "vocab_size" not in models.columns:
        return
    tied = (models["tied_embeddings"].fill_null(False) if "tied_embeddings" in models.columns
            else pl.Series([False] * models.height))
    vocab = models["vocab_size"] * models["hidden_size"] * pl.Series(
        [1 if t else 2 for t in tied]) / 1e9
    total, active = models["total_params_b"], models["active_params_b"]
    experts, chosen = models["experts"], models["experts_per_token"]
    moe = (experts > chosen).fill_null(False)
    shared = (total - experts * (total - active) / (experts - chosen)).zip_with(moe, active)
    _reject_values(models, "vocab_size", file,
                   "a vocabulary whose embedding table and LM head (vocab_size x hidden_size"
                   " each, one matrix where tied_embeddings) are less than the row's shared"
                   " parameters (active_params_b; for a mixture of experts, total_params_b less"
                   " the experts' share derived from the total and active counts)",
                   vocab >= shared, problems)


def _reject_values(frame: pl.DataFrame, column: str, file: Path, expected: str,
                   wrong: pl.Series, problems: list[str]) -> None:
    """Add to `problems` one line per non-empty value of `column` that `wrong` marks, naming the
    file, the row's key and the value."""
    bad = frame.filter(frame[column].is_not_null() & wrong)
    problems += [f"catalog file {file}, row {_row_key(bad, file, i)}: {column}={bad[column][i]!r}:"
                 f" expected {expected} (see data/reference/README.md)" for i in range(bad.height)]


# deployments.csv's columns that Catalog.build spells otherwise.
BUILD_SPELLINGS = {"deployment": "name", "weight_dtype": "weights", "kv_dtype": "kv_cache",
                   "net_one_way_s": "network", "net_bytes_per_token": "network",
                   "net_bandwidth_bytes_per_s": "network"}


def _build_option_hint(unknown: set[str]) -> str:
    """For Catalog.build's unknown keywords: the parameter a deployments.csv column name is
    spelt as (weight_dtype is weights=), and for the others the closest parameter or scheduler
    option, both where a call has both. They were all called unknown scheduler options, listing
    the scheduler's alone."""
    spelt = [f"{key} is {BUILD_SPELLINGS[key]}=" for key in sorted(unknown) if key in BUILD_SPELLINGS]
    choices = [*_build_parameters(), *(f.name for f in fields(Scheduler))]
    close = [match for key in sorted(unknown - set(BUILD_SPELLINGS))
             for match in difflib.get_close_matches(key, choices, n=1)]
    hints = ([f"in build(), deployments.csv's {', '.join(spelt)}"] if spelt else []) + (
        [f"did you mean {', '.join(f'{name}=' for name in close)}?"] if close else [])
    return f" ({'; '.join(hints)})" if hints else ""


def _build_parameters() -> list[str]:
    """Catalog.build's own keyword parameters (its scheduler options aside), as its signature
    has them."""
    return [name for name in inspect.signature(Catalog.build).parameters
            if name not in ("self", "scheduler_options")]


def _row_key(rows: pl.DataFrame, file: Path, index: int = 0) -> str:
    """The key of row `index` as KEY_COLUMNS names it for the file's table, quoted as a message
    shows it ("'h100-sxm / aws / on-demand'" in prices.csv, where the GPU alone names several
    rows); a key cell left empty is "(no deployment)", not a row named 'None'."""
    columns = KEY_COLUMNS.get(file.stem, rows.columns[:1])
    values = [rows[c][index] for c in columns]
    if any(value is None for value in values):
        return "(" + " / ".join(f"no {c}" if v is None else f"{c} {v!r}" for c, v in zip(columns, values)) + ")"
    return repr(" / ".join(str(value) for value in values))


def as_meant(frame: pl.DataFrame) -> pl.DataFrame:
    """A reference CSV as its author meant it, whatever the spreadsheet that saved it added: a
    value saved quoted empty ("") is empty, a row of empty cells (a cleared row, ",,,,") is no
    row, and a column with neither a name nor a value (trailing ",,") is no column; they would
    otherwise be checked as values, or reach the warehouse tables. A value of spaces alone is
    empty too: a source of " " is no source."""
    blank = pl.col(pl.String).str.strip_chars() == ""   # "" or spaces: no value either way
    frame = drop_unnamed_empty_columns(frame.with_columns(
        pl.when(~blank).then(pl.col(pl.String)).name.keep()))
    return frame.filter(~pl.all_horizontal(pl.all().is_null()))


def drop_unnamed_empty_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` without the columns a spreadsheet adds by saving trailing separators (",,"): no
    header name and no value. A named column, or one with a value, stays (and is checked)."""
    return frame.drop(c for c in frame.columns
                      if _UNNAMED.match(c) and frame[c].null_count() == frame.height)


def separator_hint(frame: pl.DataFrame) -> str:
    """Why every column seems missing when a file is separated by semicolons (a spreadsheet
    saved in a locale whose decimal mark is the comma): one column whose name holds them."""
    if frame.width == 1 and ";" in frame.columns[0]:
        return "; the file is separated by ';': expected commas, with a point as the decimal mark"
    return ""


def ragged_line(file: Path) -> str | None:
    """Which line of a CSV file has more fields than its header (an unquoted comma in a value,
    `2,50` for 2.50 or prose, is the usual cause), or None if none has. (A shorter line is read
    with its last values empty, and those are checked as such.) A file separated by semicolons
    is named as such: its decimal commas and prose commas are what overflow its one-column
    header."""
    try:
        with open(file, newline="", encoding="utf-8-sig") as handle:
            rows = csv.reader(handle)
            header = next(rows, [])
            if len(header) == 1 and ";" in header[0]:
                return separator_hint(pl.DataFrame(schema=header)).removeprefix("; ")
            for row in rows:
                if len(row) > len(header):
                    return (f"line {rows.line_num} has {len(row)} fields, more than the"
                            f" {len(header)} columns of the header (a value with a comma in it"
                            f" must be quoted, and a decimal written with a point: 2.50, not"
                            f" 2,50)")
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return None


def _not_utf8(file: Path) -> str | None:
    """Where a catalog file stops being UTF-8, or None. The shipped files hold non-ASCII text
    (the § of a docs reference) and users add their own (µs, é), which a spreadsheet's plain
    "CSV" export writes in a legacy encoding (Windows-1252), where Polars says only 'invalid
    utf-8 sequence'. The trace readers' scan (invalid_utf8_at) finds the place; imported here,
    on a file that failed to read, not with the catalog (it loads every trace reader)."""
    from pipelines.formats.source import invalid_utf8_at
    try:
        at = invalid_utf8_at(file)
    except OSError:
        return None
    if at is None:
        return None
    byte, line = at
    return (f"not UTF-8 text (line {line}, byte {byte}): expected UTF-8 (a spreadsheet's"
            f' "CSV UTF-8" format)')


def csv_problem(file: Path, exc: Exception) -> str:
    """Why Polars could not read the CSV `file`, in one line: its ragged line when it has one,
    else Polars' own reason. Polars ends its message with the "Original error" (e.g. a quote
    that never closes, in a file cut short) after lines of advice on schema inference (raise
    infer_schema_length, ignore_errors, ...), which do not apply to a catalog file."""
    ragged = ragged_line(file)
    if ragged is not None:
        return ragged
    not_utf8 = _not_utf8(file)
    if not_utf8 is not None:
        return not_utf8
    lines = [line.strip(" `") for line in str(exc).splitlines() if line.strip(" `")]
    return lines[-1] if "Original error" in str(exc) else lines[0]


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Read every catalog CSV in `path` (default data/reference/); a missing or unreadable file,
    and every problem `check_catalog` finds, raises CatalogError naming each, one a line."""
    catalog, problems = check_catalog(path)
    if problems:
        raise CatalogError("\n".join(problems))
    return catalog


def check_catalog(path: str | Path | None = None) -> tuple[Catalog | None, list[str]]:
    """The catalog in `path` (default data/reference/) and every problem of its files, one line
    each naming the file, the row and the column; the catalog is None where a file is missing,
    unreadable or lacks a column. Every check runs whatever the others found, so that one run
    names every problem rather than the first (the preflight lists them all): a file's own
    checks, and those across files, except the ones that need a file that did not read."""
    directory = Path(path) if path is not None else DEFAULT_REFERENCE_DIR
    problems: list[str] = []
    frames = {}
    for table in TABLES:
        file = directory / f"{table}.csv"
        frame = _read_table(file, table, problems)
        if frame is not None:
            frames[table] = _checked_table(frame, table, file, problems)
    _check_across_files(frames, directory, problems)
    catalog = Catalog(directory=directory, **frames) if len(frames) == len(TABLES) else None
    return catalog, problems


def _read_table(file: Path, table: str, problems: list[str]) -> pl.DataFrame | None:
    """The catalog file as its author meant it (as_meant), or None and the problem where it is
    missing, is not a readable CSV or lacks a required column: then it is checked no further."""
    if not file.is_file():
        problems.append(f"catalog file {file} is missing: expected the {table} table as CSV")
        return None
    try:
        frame = as_meant(pl.read_csv(file, infer_schema_length=None))
    except pl.exceptions.PolarsError as exc:
        problems.append(f"catalog file {file} is not a readable CSV: {csv_problem(file, exc)}")
        return None
    missing = [c for c in REQUIRED_COLUMNS[table] if c not in frame.columns]
    if missing:
        problems.append(f"catalog file {file} lacks column(s) {missing}"
                        f" (see data/reference/README.md){separator_hint(frame)}")
        return None
    return frame


def _checked_table(frame: pl.DataFrame, table: str, file: Path, problems: list[str]) -> pl.DataFrame:
    """`frame` with its number and true / false columns typed, after adding every problem of its
    own rows to `problems`: empty values, shared keys, numbers out of range, switches. A value
    found wrong is left empty, so that a later check does not name it again."""
    for column in REQUIRED_COLUMNS[table]:
        if column not in MAY_BE_EMPTY.get(table, ()):
            empty = frame.filter(pl.col(column).is_null())
            problems += [f"catalog file {file}, row {_row_key(empty, file, i)}: {column} is"
                         f" empty: expected a value (see data/reference/README.md)"
                         for i in range(empty.height)]
    keys = KEY_COLUMNS[table]
    shared = frame.group_by(keys, maintain_order=True).len().filter(pl.col("len") > 1)
    problems += [f"catalog file {file}, row {_row_key(shared, file, i)}: {shared['len'][i]}"
                 f" rows share this {' / '.join(keys)}: expected each once"
                 for i in range(shared.height)]
    problems += _key_spelling_problems(frame, file)
    for column, rule in NUMBER_RANGES[table].items():
        if column not in frame.columns:
            continue  # an optional column (a required one is there: checked above)
        if not frame[column].dtype.is_numeric():
            numbers = frame[column].cast(pl.Float64, strict=False)
            # the range too: replicas='five' was told "expected a number", replicas=2.5 "a whole
            # number >= 1"
            _reject_values(frame, column, file, rule.expected, numbers.is_null(), problems)
            frame = frame.with_columns(numbers.alias(column))
        values = frame[column]
        wrong = rule.wrong(values).fill_null(False)
        _reject_values(frame, column, file, rule.expected, wrong, problems)
        # a column's type is its rule's, not what its values happen to look like: an
        # overhead written 0 everywhere is still a float column in the warehouse
        kept = values.zip_with(~wrong, pl.Series([None] * frame.height, dtype=values.dtype))
        frame = frame.with_columns(kept.cast(pl.Int64 if rule.whole else pl.Float64).alias(column))
    for column, bound, why in AT_MOST.get(table, ()):
        _reject_values(frame, column, file, f"at most the row's {bound}{why}",
                       frame[column] > frame[bound], problems)
    if table == "models":
        _check_expert_split(frame, file, problems)
        _check_vocabulary(frame, file, problems)
        _check_attention(frame, file, problems)
    if table == "gpu_efficiency":
        unknown = frame.filter(~pl.col("allreduce_rounds").is_in(list(ALLREDUCE_ROUNDS)))
        problems += [f"allreduce_rounds={row['allreduce_rounds']!r} for {row['family']} /"
                     f" {row['stack']} in {file}: expected one of {', '.join(ALLREDUCE_ROUNDS)}"
                     for row in unknown.iter_rows(named=True)]
    for column in BOOLEAN_COLUMNS.get(table, ()):
        if column not in frame.columns:
            continue  # an optional one (a required one is there: checked above)
        if frame[column].dtype != pl.Boolean:  # e.g. TRUE: read as text, meant as a switch
            text = frame[column].cast(pl.String).str.to_lowercase()
            known = text.is_in(["true", "false"])
            _reject_values(frame, column, file, "true or false", ~known, problems)
            frame = frame.with_columns(text.eq("true").zip_with(
                known, pl.Series([None] * frame.height, dtype=pl.Boolean)).alias(column))
    return frame


def _key_spelling_problems(frame: pl.DataFrame, file: Path) -> list[str]:
    """A key (KEY_COLUMNS) with spaces around it, and keys that differ only in letter case or
    such spaces ('Qwen2.5-7B' beside 'qwen2.5-7b', 'h100-sxm ' beside 'h100-sxm'): each loaded as
    a row of its own, a near twin that another file, a run config or a what-if scenario names
    by mistake, and that a log's model name cannot tell apart (model_named). One line each."""
    keys = KEY_COLUMNS[file.stem]
    problems = []
    for column in keys:
        text = frame[column].cast(pl.String)
        spaced = frame.filter(text != text.str.strip_chars())
        problems += [f"catalog file {file}, row {_row_key(spaced, file, i)}: {column}="
                     f"{spaced[column][i]!r} has spaces around it: expected the name alone"
                     for i in range(spaced.height)]
    folded = [pl.col(c).cast(pl.String).str.strip_chars().str.to_lowercase().alias(f"folded {c}")
              for c in keys]
    rows = (frame.filter(pl.all_horizontal(pl.col(keys).is_not_null()))
            .unique(subset=keys, maintain_order=True)   # a key written twice is named above
            .select(*keys, *folded))
    twins = rows.filter(pl.len().over([f"folded {c}" for c in keys]) > 1)
    for _, group in twins.group_by([f"folded {c}" for c in keys], maintain_order=True):
        spellings = " and ".join(_row_key(group, file, i) for i in range(group.height))
        problems.append(f"catalog file {file}, rows {spellings} differ only in letter case or"
                        f" spaces around their {' / '.join(keys)}: expected each {' / '.join(keys)}"
                        f" once, spelt one way")
    return problems


def _names_listed(names: Iterable) -> str:
    """The names of a key column, sorted, each once, for a message listing the choices; an empty
    cell (None) is left out: it is a problem of its own, and None does not sort among strings
    (a TypeError traceback instead of the problems)."""
    return ", ".join(sorted({name for name in names if name is not None}))


def _check_across_files(frames: dict[str, pl.DataFrame], directory: Path,
                        problems: list[str]) -> None:
    """Add to `problems` what the rows of one file get wrong about another's (a price's GPU, a
    GPU's family) and the GPUs' dtype lists; a check whose file did not read is not run."""
    gpus, prices = frames.get("gpus"), frames.get("prices")
    if gpus is not None and prices is not None:
        _reject_values(prices, "gpu", directory / "prices.csv",
                       f"a gpu of {directory / 'gpus.csv'} ({_names_listed(gpus['gpu'])})",
                       ~prices["gpu"].is_in(gpus["gpu"].implode()), problems)
    if prices is not None:   # a GPU whose is_default is empty or wrong is named for that alone
        defaults = prices.group_by("gpu", maintain_order=True).agg(
            pl.col("is_default").sum(), pl.col("is_default").null_count().alias("unread"))
        for gpu, count, _ in defaults.filter((pl.col("is_default") != 1)
                                             & (pl.col("unread") == 0)).iter_rows():
            problems.append(f"catalog file {directory / 'prices.csv'}, row {gpu!r}: {count}"
                            f" default prices for {gpu}: expected exactly one row with"
                            f" is_default=true")
    if gpus is None:
        return
    efficiency = frames.get("gpu_efficiency")
    families = None if efficiency is None else efficiency["family"].to_list()
    for gpu_row in gpus.iter_rows(named=True):
        for dtype in _weight_only(gpu_row):
            if dtype not in DTYPE_BYTES or _has_peak(gpu_row, dtype) or not _has_peak(gpu_row, "bf16"):
                problems.append(
                    f"weight_only_dtypes lists {dtype!r} for {gpu_row['gpu']} in"
                    f" {directory / 'gpus.csv'}: expected dtypes of {', '.join(DTYPE_BYTES)}"
                    f" that the GPU has no tensor throughput for, on a GPU with a bf16 peak"
                    f" to compute them at")
        if families is not None and gpu_row["family"] is not None and gpu_row["family"] not in families:
            # else only a deployment on it said so, and a what-if swap to it was a note, skipped
            problems.append(
                f"family of {gpu_row['gpu']} in {directory / 'gpus.csv'} is"
                f" {gpu_row['family']!r}: expected a family of"
                f" {directory / 'gpu_efficiency.csv'} ({_names_listed(families)}), whose"
                f" row holds its efficiency factors")
        if (families is not None and gpu_row.get("allreduce_family")
                and gpu_row["allreduce_family"] not in families):
            problems.append(
                f"allreduce_family of {gpu_row['gpu']} in {directory / 'gpus.csv'} is"
                f" {gpu_row['allreduce_family']!r}: expected a family of"
                f" {directory / 'gpu_efficiency.csv'} ({_names_listed(families)}), or"
                f" empty for the GPU's own")
        stored = _kv_cache_dtypes(gpu_row)
        wrong = [d for d in stored if d not in DTYPE_BYTES]
        if wrong or not stored:
            cell = gpu_row["kv_cache_dtypes"]
            said = repr(cell) if isinstance(cell, str) and cell.strip() else "empty"
            problems.append(
                f"kv_cache_dtypes of {gpu_row['gpu']} in {directory / 'gpus.csv'} is"
                f" {said}: expected the `;`-separated dtypes of"
                f" {', '.join(DTYPE_BYTES)} that serving engines store a KV cache in on it")
