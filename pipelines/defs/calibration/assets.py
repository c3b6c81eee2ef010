"""Calibration: fit each observed log's deployment to its latencies -> calibration, calibration_errors."""

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource
from pydantic import Field, ValidationInfo, field_validator

from pipelines import settings
from pipelines.defs.metadata import table_metadata
from pipelines.defs.preflight import CALIBRATION_OP, calibration_choices
from pipelines.defs.replay.assets import replay_options, sidecar_choices
from pipelines.replay import by_trace
from pipelines.replay.api import set_aside_unservable
from pipelines.replay.engine import ROUTERS
from pipelines.roofline import CatalogError, load_catalog
from pipelines.roofline.calibration import (
    DEFAULT_FIT_METRICS,
    REQUEST_METRICS,
    CalibrationError,
    calibrate_candidates,
    format_table,
)
from pipelines.ingest_store import replace_calibrated_traces
from pipelines.warehouse import read_table, run_sql

# The two tables' columns, typed as sql/calibration_table.sql and sql/calibration_errors_table.sql
# declare them (the ingest creates them empty, before calibration first runs).
PARAMETER_SCHEMA = {"trace": pl.String, "deployment": pl.String, "parameter": pl.String,
                    "before": pl.Float64, "after": pl.Float64, "at_bound": pl.Boolean,
                    "implausible": pl.String, "outliers": pl.String}
ERROR_SCHEMA = {"trace": pl.String, "deployment": pl.String, "shape": pl.String,
                "split": pl.String, "metric": pl.String, "observations": pl.Int64,
                "median_observed_s": pl.Float64, "error_before": pl.Float64,
                "error_after": pl.Float64, "shape_error_before": pl.Float64,
                "shape_error_after": pl.Float64, "error_baseline": pl.Float64,
                "fitted": pl.Boolean}


class CalibrationConfig(dg.Config):
    """The descriptions are what the UI's launchpad shows beside each field (README "Your own
    logs" has the examples)."""

    traces: list[str] = Field(default=[], description=(
        "The traces this run calibrates; empty: every trace with observed latencies. Only their"
        " rows of the calibration tables are replaced: the other traces' fits stay"))
    deployment: str | None = Field(default=None, description=(
        "The deployment of the traces not named in deployments or candidates whose log's"
        " sidecar names none; none: the"
        f" FLEETSPEND_DEPLOYMENT setting, else {settings.DEFAULT_DEPLOYMENT}"))
    deployments: dict[str, str] = Field(default={}, description=(
        "Trace -> the deployment (deployments.csv) that served it; others use their log's"
        " sidecar's, else deployment"))
    candidates: dict[str, list[str]] = Field(default={}, description=(
        "Trace -> candidate deployments, for a log whose hardware is unknown (a hosted API's):"
        " each is calibrated, and of the plausible ones the one whose catalog factors explain"
        " the fit half best (only the client latency fitted) is kept"))
    fit_metrics: list[str] | None = Field(default=None, description=(
        f"The observed metrics the fit uses, some of {', '.join(REQUEST_METRICS)} (tpot:"
        " (e2e - ttft) / (output tokens - 1), the decode alone); none: those of"
        f" {' and '.join(DEFAULT_FIT_METRICS)} each log observes. Every observed one is reported"))
    fit_metrics_by_trace: dict[str, list[str]] = Field(default={}, description=(
        "Trace -> its own fit metrics, for a log whose other metrics are not usable (BurstGPT-"
        "vLLM's end-to-end times, and so its tpot, rest on estimated output tokens); others use"
        " fit_metrics"))
    # set on its own (calibration runs on demand, apart from the replay)
    router: str = Field(default="least_outstanding", description=(
        f"The router of the fit's replays, one of {', '.join(ROUTERS)} as the replay's: a run"
        " that changed the replay's router sets this one too"))

    @field_validator("traces", "deployments", "candidates", "fit_metrics_by_trace", mode="before")
    @classmethod
    def _null_is_none(cls, value, info: ValidationInfo):
        """An empty YAML key (`deployments:` with every entry commented out) is null, which the
        preflight takes as none named: so does the step, instead of a pydantic traceback."""
        if value is None:
            return cls.model_fields[info.field_name].get_default(call_default_factory=True)
        return value


@dg.multi_asset(
    specs=[
        dg.AssetSpec("calibration", group_name="calibration",
                     deps=["requests", "trace_files", "roofline", "shape_buckets"],
                     description="Per observed trace: efficiency factors and overheads before / after fitting"),
        dg.AssetSpec("calibration_errors", group_name="calibration",
                     deps=["requests", "trace_files", "roofline", "shape_buckets"],
                     description="Model-vs-observed error per request shape, fit / held-out half, before / after"),
    ],
)
def calibrated(context: dg.AssetExecutionContext, config: CalibrationConfig, duckdb: DuckDBResource):
    """Every trace with observed TTFT or end-to-end latency on some request (or those the config's
    `traces` names) is replayed whole on the deployment that served it and that deployment's
    factors are fitted (robust least squares, pipelines/roofline/calibration.py); traces without
    observations are left out (and named in the metadata, `unobserved_traces`). The rows of the
    traces calibrated replace theirs in the tables; other traces' rows, a skipped trace's too,
    stay as earlier runs left them (`traces_from_earlier_runs`). Requests no offered deployment can serve are left out,
    as the replay sets them aside (`set_aside_requests`). A trace that cannot be calibrated
    (too few observations) is skipped, logged and listed with its reason in the metadata; only
    a configuration error
    (unknown deployment, router or metric, a trace named in the config that no ingested file
    holds or that has no observed latencies) fails the asset."""
    # the preflight's checks (every run through the warehouse resource has passed them), again
    # for a materialization with a plain DuckDBResource
    problems: list[str] = []
    calibration_choices(config.model_dump(), problems)
    replay_options(config.model_dump(), f"ops.{CALIBRATION_OP}.config", problems)
    if problems:
        raise dg.Failure("; ".join(problems))
    catalog = load_catalog(settings.reference_dir())
    with duckdb.get_connection() as conn:
        run_sql(conn, "calibration_requests")
        requests = read_table(conn, "calibration_requests")
        buckets = read_table(conn, "shape_buckets")
        ingested = read_table(conn, "trace_files")["trace"]
        sidecars = sidecar_choices(conn)
    traces = by_trace(requests)
    observed = sorted(traces)
    # named in the metadata: a log whose latencies were not read (a generic CSV without an
    # observed_ttft_s column mapping) was otherwise left out without a word
    unobserved = sorted(set(ingested) - set(observed))
    unknown = _unknown_traces(config, set(ingested), observed)
    if unknown:  # a typo would silently calibrate that trace on the default deployment or metrics
        raise dg.Failure("\n".join(unknown))
    if config.traces:
        traces = {trace: traces[trace] for trace in config.traces}
    default, default_source = settings.deployment_choice(config.deployment, "calibration config")
    deployments = {}
    for trace in traces:
        # the config's choice, else the one the log's sidecar names, else the run's default
        named = trace in config.candidates or trace in config.deployments
        origin, served_by = sidecars.get(trace, (default_source, default))
        names = config.candidates.get(trace) or [config.deployments.get(trace) or served_by]
        try:
            deployments[trace] = [catalog.deployment(name) for name in names]
        except CatalogError as exc:
            source = "calibration config" if named else origin
            raise dg.Failure(f"{source}: trace {trace}: {exc}") from None
    parameters, errors, summary, skipped, choices, set_aside = [], [], {}, {}, {}, {}
    for trace, frame in traces.items():
        offered = deployments[trace]
        hash_tokens = frame["prefix_block_tokens"][0]
        frame, unserved = _servable(trace, frame, offered)
        if unserved.height:
            first = unserved.row(0, named=True)
            set_aside[trace] = (f"{unserved.height:,} request(s) set aside, not replayed, e.g."
                                f" {first['request_id']}, which {first['reason']}")
            context.log.warning(f"{trace}: {set_aside[trace]}")
        if not frame.height:
            skipped[trace] = "not calibrated: no request of it can be served"
            continue
        metrics = config.fit_metrics_by_trace.get(trace, config.fit_metrics)
        try:
            choice = calibrate_candidates(offered, frame.drop("prefix_block_tokens"), buckets,
                                          None if metrics is None else tuple(metrics),
                                          router=config.router,
                                          hash_tokens=hash_tokens,
                                          catalog_models=catalog.models["model"])
        except CalibrationError as exc:
            skipped[trace] = f"not calibrated: {exc}"
            context.log.warning(f"{trace}: {skipped[trace]}")
            continue
        if trace in config.candidates:
            choices[trace] = choice
        result = choice.kept
        name = result.before.name
        labels = {"trace": pl.lit(trace), "deployment": pl.lit(name)}
        bounded = result.at_bound()
        # why the deployment cannot have served the log, in the table too: a reader of the
        # table alone saw every at_bound false on a fit the metadata calls implausible
        implausible = "\n".join(result.warnings) or None
        # the rows the robust fit discounted without a word, in the table too (the summary's)
        outliers = "\n".join(result.outliers) or None
        parameters.append(pl.DataFrame(
            [(trace, name, p, float(b), float(a), p in bounded, implausible, outliers)
             for p, (b, a) in result.parameters().items()],
            schema=PARAMETER_SCHEMA, orient="row"))
        # which metrics the fit saw: the summary judges a fit against the baseline on those only
        errors.append(result.errors.select(**labels, **{c: c for c in result.errors.columns},
                                           fitted=pl.col("metric").is_in(list(result.fit_metrics))))
        summary[trace] = result
        context.log.info(f"{trace}: calibrated {name} on {frame.height} requests, fitted on"
                         f" {', '.join(result.fit_metrics)}")
        for warning in (*result.warnings, *result.outliers):
            context.log.warning(f"{trace}: {warning}")
    with duckdb.get_connection() as conn:
        replace_calibrated_traces(conn, {
            "calibration": pl.concat(parameters) if parameters else pl.DataFrame(schema=PARAMETER_SCHEMA),
            "calibration_errors": pl.concat(errors).cast(ERROR_SCHEMA) if errors
            else pl.DataFrame(schema=ERROR_SCHEMA)}, list(summary))
        # fits of earlier runs the table holds beside this run's: their traces were not
        # calibrated now (left out of `traces`, or skipped)
        earlier = sorted(set(read_table(conn, "calibration")["trace"]) - set(summary))
        yield dg.MaterializeResult(asset_key="calibration", metadata={
            **table_metadata(conn, "calibration"), **_fit_metadata(summary, skipped),
            "traces_from_earlier_runs": dg.MetadataValue.json(earlier),
            **{f"{trace} candidates": dg.MetadataValue.md(_candidates_table(choice))
               for trace, choice in choices.items()},
            "skipped_traces": dg.MetadataValue.json(skipped),
            "set_aside_requests": dg.MetadataValue.json(set_aside),
            "unobserved_traces": dg.MetadataValue.json(unobserved)})
        yield dg.MaterializeResult(asset_key="calibration_errors", metadata={
            **table_metadata(conn, "calibration_errors"), **_error_metadata(summary)})


def _unknown_traces(config: CalibrationConfig, ingested: set[str], observed: list[str]) -> list[str]:
    """One line per trace the config names that cannot be calibrated, naming the setting(s) that
    name it and why: no ingested file has that name (a typo, or the file's name with its suffix)
    or its requests carry no observed latency. One message for both, naming four settings, told
    a user who wrote `fireworks-7b` that the trace had no observed latencies."""
    settings_naming = {"traces": config.traces, "deployments": config.deployments,
                       "candidates": config.candidates,
                       "fit_metrics_by_trace": config.fit_metrics_by_trace}
    expected = (f"expected one of the traces with observed latencies: {', '.join(observed)}"
                if observed else "no ingested trace carries observed latencies: there is none to"
                                 " calibrate")
    lines = []
    for trace in sorted(set().union(*settings_naming.values()) - set(observed)):
        fields = " and ".join(f"ops.{CALIBRATION_OP}.config.{field}"
                              for field, names in settings_naming.items() if trace in names)
        why = ("its requests carry no observed latency (an observed 0 s counts as not measured)"
               if trace in ingested else
               "no ingested file has that trace name (a file's name less its format and"
               " compression suffixes: log.json.gz is trace log)")
        lines.append(f"calibration config {fields}: trace {trace!r}: {why}; {expected}")
    return lines


def _servable(trace: str, frame: pl.DataFrame, offered: list) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the requests of `frame` one of the `offered` deployments can serve, the others with the
    first deployment's reason): as the replay sets aside a request longer than the model's
    context or one replica's KV cache (set_aside_unservable), the fit leaves it out, instead of
    skipping the whole trace for one oversized row or replaying a request no engine takes. A
    request only some candidates can hold stays: those that cannot are ruled out, as before."""
    unserved = set_aside_unservable({trace: frame}, offered[0])[1]
    for d in offered[1:]:
        refused = set_aside_unservable({trace: frame}, d)[1]
        unserved = unserved.join(refused.select("request_id"), on="request_id", how="semi",
                                 maintain_order="left")
    kept = frame.join(unserved.select("request_id"), on="request_id", how="anti", maintain_order="left")
    return kept, unserved


def _fit_metadata(summary: dict, skipped: dict) -> dict:
    if not summary:
        # a run of `traces` skips only those: "every observed trace was skipped" said the
        # others, left out of it, were skipped too
        why = ("every trace this run calibrates was skipped (skipped_traces says why)" if skipped
               else "no request carries observed latencies")
        # the count stays a number (the UI plots a number over runs; text broke the series)
        return {"calibrated_traces": dg.MetadataValue.int(0),
                "none_calibrated_because": dg.MetadataValue.text(why),
                "implausible_fits": dg.MetadataValue.md("none"),
                "outlying_observations": dg.MetadataValue.md("none")}
    # the deployment each trace was fitted on: the config's, the default's or the kept candidate
    lines = ["| trace | deployment | parameter | before | after |", "|---|---|---|---:|---:|"]
    for trace, result in summary.items():
        for p, (before, after) in result.parameters().items():
            lines.append(f"| {trace} | {result.before.name} | {p} | {before:.4g} | {after:.4g} |")
    warnings = [f"- {trace}: {w}" for trace, result in summary.items() for w in result.warnings]
    outliers = [f"- {trace}: {o}" for trace, result in summary.items() for o in result.outliers]
    return {"calibrated_traces": dg.MetadataValue.int(len(summary)),
            "parameters": dg.MetadataValue.md("\n".join(lines)),
            # what each trace was fitted on (fit_metrics, or its own fit_metrics_by_trace)
            "fit_metrics": dg.MetadataValue.json({t: list(r.fit_metrics) for t, r in summary.items()}),
            "implausible_fits": dg.MetadataValue.md("\n".join(warnings) or "none"),
            # observations the model misses by more than 10 x (Calibration.outliers): bad rows
            # the robust fit absorbed, which a plausible fit does not rule out
            "outlying_observations": dg.MetadataValue.md("\n".join(outliers) or "none")}


def _candidates_table(choice) -> str:
    """Every candidate: the fit-half error with its catalog factors (client latency fitted: what
    the choice compares) and after the full fit, and why it was not kept: ruled out, or, for a
    plausible one, the catalog error it lost on (its 'why not' was empty, beside a fitted error
    as low as the kept one's)."""
    def percent(value):
        return "n/a" if value is None else f"{100 * value:.1f}%"

    kept = choice.candidates.filter(pl.col("kept")).row(0, named=True)
    lines = ["| deployment | plausible | fit-half error, catalog factors | fit-half error, fitted "
             "| kept | why not |", "|---|---|---:|---:|---|---|"]
    for r in choice.candidates.iter_rows(named=True):
        why = r["why_not"] or ""
        if r["plausible"] and not r["kept"]:
            why = (f"its catalog factors miss the fit half by {percent(r['catalog_error'])},"
                   f" {kept['deployment']}'s by {percent(kept['catalog_error'])}: the choice"
                   f" compares those, not the fitted errors (five free factors can make a wrong GPU fit)")
        lines.append(f"| {r['deployment']} | {'yes' if r['plausible'] else 'no'} | "
                     f"{percent(r['catalog_error'])} | {percent(r['fit_error'])} | "
                     f"{'kept' if r['kept'] else ''} | {why} |")
    return "\n".join(lines)


def _error_metadata(summary: dict) -> dict:
    metadata = {}
    for trace, result in summary.items():
        for metric in result.errors.filter(pl.col("split") == "held_out")["metric"].unique().sort():
            for column in ("error", "shape_error"):
                for when, error in zip(("before", "after"), result.held_out_error(metric, column)):
                    # 4 significant digits, as the parameters table: the UI shows a float as
                    # stored, 0.06506899202139887 beside the table's 6.5%
                    metadata[f"{trace} held-out {metric} {column} {when}"] = dg.MetadataValue.float(
                        float(f"{error:.4g}"))
        metadata[f"{trace} errors by shape"] = dg.MetadataValue.md(format_table(result.errors))
    return metadata
