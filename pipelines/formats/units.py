"""Time units a user (or a format) names for a relative clock."""

from __future__ import annotations

from pipelines.formats.common import is_one_of

PER_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def per_second(unit: str) -> float:
    if not is_one_of(unit, PER_SECOND):
        raise ValueError(f"time_unit={unit!r}: expected one of {sorted(PER_SECOND)}")
    return PER_SECOND[unit]
