"""Reference data (catalog CSVs) as warehouse tables, and the per-deployment roofline."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.roofline import load_catalog
from pipelines.roofline.catalog import TABLES, load_shape_buckets
from pipelines.warehouse import write_table

REFERENCE_TABLES = (*TABLES, "shape_buckets")


@dg.multi_asset(
    specs=[dg.AssetSpec(t, group_name="reference", description=f"data/reference/{t}.csv, with sources")
           for t in REFERENCE_TABLES],
)
def reference_tables(duckdb: DuckDBResource):
    """Load the catalog files; the same files the Python physics reads, so SQL and replay agree."""
    catalog = load_catalog(settings.reference_dir())
    frames = {t: getattr(catalog, t) for t in TABLES}
    frames["shape_buckets"] = load_shape_buckets(settings.reference_dir())
    with duckdb.get_connection() as conn:
        for table, frame in frames.items():
            write_table(conn, table, frame)
            yield dg.MaterializeResult(asset_key=table, metadata=table_metadata(conn, table))


@dg.asset(group_name="reference", deps=["gpus", "gpu_efficiency", "models", "prices", "deployments"])
def roofline(duckdb: DuckDBResource) -> dg.MaterializeResult:
    """Per deployment: the coefficients the replay uses (bytes, FLOPs, effective peaks, overheads,
    KV capacity, ridge point), so SQL users can see why a step costs what it costs."""
    catalog = load_catalog(settings.reference_dir())
    frame = pl.DataFrame([catalog.deployment(name).as_row() for name in catalog.deployment_names])
    with duckdb.get_connection() as conn:
        write_table(conn, "roofline", frame)
        return dg.MaterializeResult(metadata=table_metadata(conn, "roofline"))
