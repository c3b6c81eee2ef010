"""Replay engine: continuous batching over a fleet of replicas, and cost attribution."""

from pipelines.replay.api import ReplayError, ReplayResult, replay, replay_fleet

__all__ = ["ReplayError", "ReplayResult", "replay", "replay_fleet"]
