"""The source chapter's worked example, reproduced by the `seed-example` deployment (DESIGN.md):

500 prompt tokens prefill in ~50 ms, 8 ms per output token, ~100 ms of queue + network, so a
500-in/500-out request takes ~4,150 ms and is ~96% decode; a 5,000-in/20-out request is
prefill-dominated (~500 ms prefill, ~160 ms decode).
"""

from __future__ import annotations

import polars as pl
import pytest

from pipelines.replay import replay
from pipelines.roofline import load_catalog


@pytest.fixture(scope="module")
def seed():
    return load_catalog().deployment("seed-example")


def _alone(deployment, prompt: int, output: int) -> dict:
    requests = pl.DataFrame({"arrival_s": [0.0], "prompt_tokens": [prompt], "output_tokens": [output]})
    stages = replay(requests, deployment)
    assert stages.height == 1
    return stages.row(0, named=True)


def test_api_500_in_500_out(seed):
    assert seed.prefill_s(500) == pytest.approx(0.050, rel=0.10)
    decode_s = sum(seed.decode_step_s(1, ctx) for ctx in range(500, 999))
    assert decode_s == pytest.approx(4.0, rel=0.10)
    assert seed.decode_step_s(1, 500) == pytest.approx(0.008, rel=0.10)


def test_replay_500_in_500_out(seed):
    row = _alone(seed, 500, 500)
    assert row["prefill_s"] == pytest.approx(0.050, rel=0.10)
    assert row["decode_s"] == pytest.approx(4.000, rel=0.10)
    assert row["queue_s"] + row["network_s"] == pytest.approx(0.100, rel=0.10)
    assert row["e2e_s"] == pytest.approx(4.150, rel=0.10)
    assert row["decode_s"] / row["e2e_s"] >= 0.95
    assert row["preemptions"] == 0


def test_api_5000_in_20_out(seed):
    assert seed.prefill_s(5000) == pytest.approx(0.500, rel=0.15)
    decode_s = sum(seed.decode_step_s(1, ctx) for ctx in range(5000, 5019))
    assert decode_s == pytest.approx(0.160, rel=0.15)


def test_replay_5000_in_20_out_is_prefill_dominated(seed):
    row = _alone(seed, 5000, 20)
    assert row["prefill_s"] == pytest.approx(0.500, rel=0.15)
    assert row["decode_s"] == pytest.approx(0.160, rel=0.15)
    assert row["prefill_s"] > row["decode_s"]
    assert row["prefill_gpu_s"] > row["decode_gpu_s"]
