"""Calibration: fit each observed log's deployment to its latencies -> calibration, calibration_errors."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.defs.replay.assets import DEFAULT_DEPLOYMENT
from pipelines.replay import ReplayError
from pipelines.roofline import CatalogError, load_catalog
from pipelines.roofline.calibration import (
    REQUEST_METRICS,
    CalibrationError,
    calibrate_requests,
    format_table,
)
from pipelines.warehouse import read_table, write_table

PARAMETER_SCHEMA = {"trace": pl.String, "deployment": pl.String, "parameter": pl.String,
                    "before": pl.Float64, "after": pl.Float64}
ERROR_SCHEMA = {"trace": pl.String, "deployment": pl.String, "shape": pl.String,
                "split": pl.String, "metric": pl.String, "observations": pl.Int64,
                "median_observed_s": pl.Float64, "error_before": pl.Float64,
                "error_after": pl.Float64, "shape_error_before": pl.Float64,
                "shape_error_after": pl.Float64}


class CalibrationConfig(dg.Config):
    deployment: str = DEFAULT_DEPLOYMENT
    # trace -> the deployment (deployments.csv) that served it; others use `deployment`
    deployments: dict[str, str] = {}
    # the observed metrics the fit uses (ttft, e2e); all observed ones are reported
    fit_metrics: list[str] = list(REQUEST_METRICS)


@dg.multi_asset(
    specs=[
        dg.AssetSpec("calibration", group_name="calibration",
                     deps=["requests", "roofline", "shape_buckets"],
                     description="Per observed trace: efficiency factors and overheads before / after fitting"),
        dg.AssetSpec("calibration_errors", group_name="calibration",
                     deps=["requests", "roofline", "shape_buckets"],
                     description="Model-vs-observed error per request shape, fit / held-out half, before / after"),
    ],
)
def calibrated(context: dg.AssetExecutionContext, config: CalibrationConfig, duckdb: DuckDBResource):
    """Every trace whose requests carry observed TTFT or end-to-end latency is replayed on the
    deployment that served it and that deployment's factors are fitted (robust least squares,
    pipelines/roofline/calibration.py); traces without observations are skipped."""
    catalog = load_catalog(settings.reference_dir())
    with duckdb.get_connection() as conn:
        requests = conn.sql(
            "SELECT * FROM requests WHERE observed_ttft_s IS NOT NULL OR observed_e2e_s IS NOT NULL"
        ).pl()
        buckets = read_table(conn, "shape_buckets")
    parameters, errors, summary = [], [], {}
    for (trace,), frame in requests.partition_by("trace", as_dict=True, maintain_order=True).items():
        name = config.deployments.get(trace, config.deployment)
        try:
            result = calibrate_requests(catalog.deployment(name), frame, buckets,
                                        tuple(config.fit_metrics))
        except (CatalogError, CalibrationError, ReplayError) as exc:
            raise dg.Failure(f"calibration of trace {trace} on {name}: {exc}") from None
        labels = {"trace": pl.lit(trace), "deployment": pl.lit(name)}
        parameters.append(pl.DataFrame(
            [(trace, name, p, float(b), float(a)) for p, (b, a) in result.parameters().items()],
            schema=PARAMETER_SCHEMA, orient="row"))
        errors.append(result.errors.select(**labels, **{c: c for c in result.errors.columns}))
        summary[trace] = result
        context.log.info(f"{trace}: calibrated {name} on {frame.height} requests")
    with duckdb.get_connection() as conn:
        write_table(conn, "calibration", pl.concat(parameters) if parameters
                    else pl.DataFrame(schema=PARAMETER_SCHEMA))
        write_table(conn, "calibration_errors", pl.concat(errors).cast(ERROR_SCHEMA) if errors
                    else pl.DataFrame(schema=ERROR_SCHEMA))
        yield dg.MaterializeResult(asset_key="calibration", metadata={
            **table_metadata(conn, "calibration"), **_fit_metadata(summary)})
        yield dg.MaterializeResult(asset_key="calibration_errors", metadata={
            **table_metadata(conn, "calibration_errors"), **_error_metadata(summary)})


def _fit_metadata(summary: dict) -> dict:
    if not summary:
        return {"calibrated_traces": dg.MetadataValue.text("none: no request carries observed latencies")}
    lines = ["| trace | parameter | before | after |", "|---|---|---:|---:|"]
    for trace, result in summary.items():
        for p, (before, after) in result.parameters().items():
            lines.append(f"| {trace} | {p} | {before:.4g} | {after:.4g} |")
    return {"calibrated_traces": dg.MetadataValue.int(len(summary)),
            "parameters": dg.MetadataValue.md("\n".join(lines))}


def _error_metadata(summary: dict) -> dict:
    metadata = {}
    for trace, result in summary.items():
        for metric in result.errors.filter(pl.col("split") == "held_out")["metric"].unique().sort():
            for column in ("error", "shape_error"):
                before, after = result.held_out_error(metric, column)
                metadata[f"{trace} held-out {metric} {column} before"] = dg.MetadataValue.float(before)
                metadata[f"{trace} held-out {metric} {column} after"] = dg.MetadataValue.float(after)
        metadata[f"{trace} errors by shape"] = dg.MetadataValue.md(format_table(result.errors))
    return metadata
