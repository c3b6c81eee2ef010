"""Vidur / Splitwise processed traces: arrived_at,num_prefill_tokens,num_decode_tokens.

`arrived_at` is relative seconds (float, first = 0.0); give `start_time` for wall-clock
arrivals. The length-statistics files of the same projects (num_prefill_tokens,
num_decode_tokens, num_total_tokens, pd_ratio) have no arrival times: they are distributions,
not request logs, and are refused with that message.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.formats.common import IngestResult, Policies, TraceFormatError
from pipelines.formats.csvlog import header_and_rows, seconds, split_fields, whole
from pipelines.formats.rows import Labels, finish

FORMAT = "vidur"
COLUMNS = {"arrived_at": "arrival_text", "num_prefill_tokens": "prompt_text", "num_decode_tokens": "output_text"}
EXPECTED = "a Vidur/Splitwise processed trace CSV with a header arrived_at,num_prefill_tokens,num_decode_tokens"
LABELS = Labels("arrived_at", "num_prefill_tokens", "num_decode_tokens", clock="a number of seconds")


def read(plain: Path, shown: Path, sha256: str, policies: Policies, start_time=None) -> IngestResult:
    header, rows, written = header_and_rows(plain, shown, EXPECTED)
    if not set(COLUMNS) <= set(header):
        raise TraceFormatError(f"{shown}: header {written!r} is not {EXPECTED}{_hint(header)}")
    parsed = split_fields(rows, header, COLUMNS).with_columns(
        arrival=seconds("arrival_text"),
        prompt_tokens=whole("prompt_text"),
        output_tokens=whole("output_text"),
    )
    return finish(parsed, path=shown, fmt=FORMAT, sha256=sha256, labels=LABELS, policies=policies,
                  start_time=start_time)


def _hint(header: list[str]) -> str:
    """Why a header is not a Vidur trace: a length-statistics file (its num_total_tokens or
    pd_ratio columns) is a distribution, not a log; any other header lacks columns, named, so a
    renamed arrived_at is not taken for a distribution."""
    if "arrived_at" not in header and {"num_total_tokens", "pd_ratio"} & set(header):
        return " (this is a token-length distribution with no arrival times, not a request log)"
    return f" (it lacks {', '.join(column for column in COLUMNS if column not in header)})"
