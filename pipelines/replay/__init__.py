"""Replay engine: continuous batching over a fleet of replicas, and cost attribution."""

from pipelines.replay.api import (
    ReplayError,
    ReplayResult,
    by_trace,
    replay,
    replay_fleet,
    replay_traces,
)

__all__ = ["ReplayError", "ReplayResult", "by_trace", "replay", "replay_fleet", "replay_traces"]
