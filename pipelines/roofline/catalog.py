"""The reference catalog: GPUs, efficiency factors, models, prices and named deployments.

The catalog is a folder of CSV files (default `data/reference/`, documented in its README), each
value with its source. Keeping it as plain CSV means the same files load into the warehouse as
the `gpus`, `models`, `prices` and `deployments` tables and into the Python physics here: one
truth for SQL users and for the replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from pipelines.roofline.deployment import (
    DTYPE_BYTES,
    Deployment,
    Efficiency,
    GpuSpec,
    ModelSpec,
    Network,
    Scheduler,
)

DEFAULT_REFERENCE_DIR = Path(__file__).resolve().parents[2] / "data" / "reference"
TABLES = ("gpus", "gpu_efficiency", "models", "prices", "deployments")
PEAK_COLUMN = {"bf16": "bf16_tflops", "fp16": "bf16_tflops", "fp8": "fp8_tflops",
               "int8": "int8_tops", "fp4": "fp4_tflops"}


class CatalogError(ValueError):
    """A catalog file or a requested name is wrong; the message says which and what was expected."""


def _choices(frame: pl.DataFrame, column: str) -> str:
    return ", ".join(sorted(frame[column].to_list()))


def _one(frame: pl.DataFrame, column: str, value: str, what: str, file: Path) -> dict:
    rows = frame.filter(pl.col(column) == value)
    if rows.height == 0:
        raise CatalogError(
            f"unknown {what} {value!r}: {file} has {_choices(frame, column)}"
        )
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

    @property
    def deployment_names(self) -> list[str]:
        return self.deployments["deployment"].to_list()

    def deployment(self, name: str) -> Deployment:
        """The named deployment of deployments.csv, with its physics resolved."""
        row = _one(self.deployments, "deployment", name, "deployment", self.file("deployments"))
        overrides = {k: row.get(k) for k in ("compute_efficiency", "bandwidth_efficiency",
                                              "step_overhead_s", "layer_overhead_s")}
        return self.build(
            name=name,
            model=row["model"], gpu=row["gpu"], tp=row["tp"],
            weights=row["weight_dtype"], kv_cache=row["kv_dtype"], replicas=row["replicas"],
            max_seqs=row["max_seqs"], max_batched_tokens=row["max_batched_tokens"],
            chunked_prefill=row["chunked_prefill"], kv_memory_fraction=row["kv_memory_fraction"],
            kv_block_tokens=row["kv_block_tokens"],
            price_provider=row["price_provider"], price_plan=row["price_plan"],
            network=Network(row["net_one_way_s"], row["net_bytes_per_token"],
                            row["net_bandwidth_bytes_per_s"]),
            **{k: v for k, v in overrides.items() if v is not None},
        )

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
        **scheduler_options,
    ) -> Deployment:
        """An ad-hoc deployment. Scheduler options are those of `Scheduler` (max_seqs,
        max_batched_tokens, chunked_prefill, kv_memory_fraction, kv_block_tokens); efficiency
        arguments override the GPU family's defaults."""
        kv_cache = kv_cache or weights
        for label, dtype in (("weights", weights), ("kv_cache", kv_cache)):
            if dtype not in DTYPE_BYTES:
                raise CatalogError(f"{label}={dtype!r}: expected one of {', '.join(DTYPE_BYTES)}")
        if int(tp) < 1 or int(replicas) < 1:
            raise CatalogError(f"tp={tp}, replicas={replicas}: both must be whole numbers >= 1")
        allowed = {f.name for f in fields(Scheduler)}
        unknown = set(scheduler_options) - allowed
        if unknown:
            raise CatalogError(
                f"unknown scheduler option(s) {sorted(unknown)}: expected {sorted(allowed)}"
            )

        m = _one(self.models, "model", model, "model", self.file("models"))
        g = _one(self.gpus, "gpu", gpu, "gpu", self.file("gpus"))
        peak = g[PEAK_COLUMN[weights]]
        if peak is None or (isinstance(peak, float) and math.isnan(peak)):
            raise CatalogError(f"gpu {gpu!r} has no {weights} tensor throughput in {self.file('gpus')}")
        eff = _one(self.gpu_efficiency, "family", g["family"], "gpu family",
                   self.file("gpu_efficiency"))
        efficiency = Efficiency(
            compute_efficiency=eff["compute_efficiency"] if compute_efficiency is None else compute_efficiency,
            bandwidth_efficiency=eff["bandwidth_efficiency"] if bandwidth_efficiency is None else bandwidth_efficiency,
            step_overhead_s=eff["step_overhead_s"] if step_overhead_s is None else step_overhead_s,
            layer_overhead_s=eff["layer_overhead_s"] if layer_overhead_s is None else layer_overhead_s,
            allreduce_latency_s=eff["allreduce_latency_s"],
        )
        for option in ("max_seqs", "max_batched_tokens", "kv_block_tokens"):
            value = scheduler_options.get(option, 1)
            if int(value) != value or value < 1:
                raise CatalogError(f"{option}={value}: expected a whole number >= 1")
        for label in ("compute_efficiency", "bandwidth_efficiency"):
            value = getattr(efficiency, label)
            if not 0.0 < value <= 1.0:
                raise CatalogError(f"{label}={value}: expected a fraction of peak in (0, 1]")
        provider, plan = self._price_key(gpu, price_provider, price_plan)
        deployment = Deployment(
            name=name or f"{model}@{gpu}-tp{tp}-{weights}",
            model=ModelSpec(**{f.name: m[f.name] for f in fields(ModelSpec)}),
            gpu=GpuSpec(gpu=gpu, family=g["family"], memory_gb=g["memory_gb"],
                        hbm_bandwidth_gbs=g["hbm_bandwidth_gbs"], peak_tflops=peak,
                        interconnect_gbs=g["interconnect_gbs"]),
            tp=int(tp), weight_dtype=weights, kv_dtype=kv_cache, replicas=int(replicas),
            scheduler=Scheduler(**scheduler_options), efficiency=efficiency,
            network=network or Network(), price_provider=provider, price_plan=plan,
        )
        if deployment.kv_capacity_tokens <= 0:
            raise CatalogError(
                f"deployment {deployment.name!r}: {model} weights ({deployment.weight_bytes_per_gpu / 1e9:.0f} GB"
                f" per GPU at tp={tp}) leave no room for a KV cache on {gpu}; raise tp or lower precision"
            )
        return deployment

    def _price_key(self, gpu: str, provider: str | None, plan: str | None) -> tuple[str, str]:
        prices = self.prices.filter(pl.col("gpu") == gpu)
        if provider is None and plan is None:
            prices = prices.filter(pl.col("is_default"))
        else:
            prices = prices.filter((pl.col("provider") == provider) & (pl.col("plan") == plan))
        if prices.height != 1:
            raise CatalogError(
                f"no price for gpu {gpu!r} provider {provider!r} plan {plan!r} in {self.file('prices')}"
            )
        return prices["provider"][0], prices["plan"][0]

    def usd_per_gpu_hour(self, deployment: Deployment) -> float:
        d = deployment
        row = self.prices.filter((pl.col("gpu") == d.gpu.gpu) & (pl.col("provider") == d.price_provider)
                                 & (pl.col("plan") == d.price_plan))
        return float(row["usd_per_gpu_hour"][0])


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Read every catalog CSV in `path` (default data/reference/); a missing or unreadable file
    raises CatalogError naming it."""
    directory = Path(path) if path is not None else DEFAULT_REFERENCE_DIR
    frames = {}
    for table in TABLES:
        file = directory / f"{table}.csv"
        if not file.is_file():
            raise CatalogError(f"catalog file {file} is missing: expected the {table} table as CSV")
        try:
            frames[table] = pl.read_csv(file, infer_schema_length=None)
        except pl.exceptions.PolarsError as exc:
            raise CatalogError(f"catalog file {file} is not a readable CSV: {exc}") from None
    return Catalog(directory=directory, **frames)
