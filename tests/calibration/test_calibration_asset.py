"""The `calibration` / `calibration_errors` assets on a warehouse whose requests carry observed
latencies (the BurstGPT-on-vLLM log excerpts of tests/fixtures/observed/)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from dagster_duckdb import DuckDBResource

from pipelines.defs.calibration.assets import calibrated
from pipelines.warehouse import write_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "observed"
BUCKETS = Path(__file__).resolve().parents[2] / "data" / "reference" / "shape_buckets.csv"
DEPLOYMENT = "burstgpt-vllm-1b-4090"


def _requests(with_observations: bool) -> pl.DataFrame:
    frames = []
    for scale in (100, 1000):
        frame = pl.read_csv(FIXTURES / f"burstgpt_vllm_llama32_1b_scale{scale}.csv",
                            schema_overrides={"request_id": pl.String})
        frames.append(frame.with_columns(trace=pl.lit(f"burstgpt-scale{scale}"),
                                         cached_tokens=pl.lit(0, pl.Int64)))
    requests = pl.concat(frames)
    if not with_observations:
        requests = requests.with_columns(observed_ttft_s=pl.lit(None, pl.Float64),
                                         observed_e2e_s=pl.lit(None, pl.Float64))
    return requests


def _materialize(tmp_path: Path, requests: pl.DataFrame, config: dict) -> tuple[dg.ExecuteInProcessResult, Path]:
    warehouse = tmp_path / "w.duckdb"
    with duckdb.connect(str(warehouse)) as conn:
        write_table(conn, "requests", requests)
        write_table(conn, "shape_buckets", pl.read_csv(BUCKETS))
    result = dg.materialize(
        [calibrated], resources={"duckdb": DuckDBResource(database=str(warehouse))},
        run_config={"ops": {"calibrated": {"config": config}}},
    )
    return result, warehouse


def test_calibration_asset_fits_each_observed_trace(tmp_path):
    config = {"deployments": {"burstgpt-scale100": DEPLOYMENT, "burstgpt-scale1000": DEPLOYMENT},
              "fit_metrics": ["ttft"]}
    result, warehouse = _materialize(tmp_path, _requests(True), config)
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        params = conn.sql("FROM calibration").pl()
        errors = conn.sql("FROM calibration_errors").pl()
    assert params.height == 2 * 4 and set(params["deployment"]) == {DEPLOYMENT}
    held = errors.filter((pl.col("shape") == "all") & (pl.col("split") == "held_out")
                         & (pl.col("metric") == "ttft"))
    assert held.height == 2
    assert (held["shape_error_after"] < held["shape_error_before"]).all()
    metadata = result.asset_materializations_for_node("calibrated")
    by_key = {m.asset_key.to_user_string(): m.metadata for m in metadata}
    assert by_key["calibration"]["calibrated_traces"].value == 2
    assert "burstgpt-scale100 held-out ttft shape_error after" in by_key["calibration_errors"]
    assert "| held_out | ttft |" in by_key["calibration_errors"]["burstgpt-scale100 errors by shape"].value


def test_calibration_asset_without_observations_writes_empty_tables(tmp_path):
    result, warehouse = _materialize(tmp_path, _requests(False), {})
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.sql("SELECT count(*) FROM calibration").fetchall()[0][0] == 0
        assert "shape_error_after" in conn.sql("FROM calibration_errors").pl().columns


def test_unknown_deployment_fails_with_its_name(tmp_path):
    with pytest.raises(dg.Failure, match="no-such-fleet"):
        _materialize(tmp_path, _requests(True), {"deployment": "no-such-fleet"})
