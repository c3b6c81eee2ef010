"""Ingest: every trace file in the trace folder -> requests, rejected_requests, trace_files."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.formats import TraceFormatError, read_azure_csv
from pipelines.formats.common import REJECTED_SCHEMA, REQUESTS_SCHEMA
from pipelines.warehouse import write_table

INGEST_TABLES = ("requests", "rejected_requests", "trace_files")


@dg.multi_asset(
    specs=[
        dg.AssetSpec("requests", group_name="ingest",
                     description="Canonical request rows (DESIGN.md), one trace per file"),
        dg.AssetSpec("rejected_requests", group_name="ingest",
                     description="Rows that could not be used: file, line, raw text, reason"),
        dg.AssetSpec("trace_files", group_name="ingest",
                     description="One row per file: format, sha256, rows read / accepted / rejected"),
    ],
)
def ingested_traces(context: dg.AssetExecutionContext, duckdb: DuckDBResource):
    """Read every *.csv in FLEETSPEND_TRACE_DIR (default data/samples) as an Azure LLM trace."""
    folder = settings.trace_dir()
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise dg.Failure(f"no trace files (*.csv) in {folder}; set FLEETSPEND_TRACE_DIR to your logs")
    results = []
    for file in files:
        try:
            results.append(read_azure_csv(file))
        except TraceFormatError as exc:
            raise dg.Failure(str(exc)) from None
        context.log.info(f"{file.name}: {results[-1].rows_read} rows read, "
                         f"{results[-1].rejected.height} rejected")
    names = [r.requests["trace"][0] for r in results if r.requests.height]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise dg.Failure(f"{folder}: several files would make trace(s) {clashes}; rename them so "
                         f"each file has its own name")
    frames = {
        "requests": pl.concat([r.requests for r in results]) if results else pl.DataFrame(schema=REQUESTS_SCHEMA),
        "rejected_requests": pl.concat([r.rejected for r in results]) if results else pl.DataFrame(schema=REJECTED_SCHEMA),
        "trace_files": pl.DataFrame([r.file_row() for r in results]),
    }
    with duckdb.get_connection() as conn:
        for table in INGEST_TABLES:
            write_table(conn, table, frames[table])
            yield dg.MaterializeResult(asset_key=table, metadata=table_metadata(conn, table))
