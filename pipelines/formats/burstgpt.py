"""BurstGPT (v1.x): Timestamp,[Session ID,Elapsed time,]Model,Request tokens,Response tokens,Total tokens,Log Type.

`Timestamp` is integer seconds from 00:00 of the trace's first day (a relative clock; give
`start_time` for wall-clock arrivals). `Response tokens` 0 is BurstGPT's only failure marker:
such a row is a *failed* request (policy `failed`; with no answer it then also meets
`zero_output`). `Elapsed time` (newer files) is an observed end-to-end latency in seconds;
`Session ID` is empty for API-log rows and is not kept. `Model` -> model, `Log Type`
(Conversation log / API log) -> tenant.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import OTHER_COLUMNS, IngestResult, Policies, UnknownFormatError
from pipelines.formats.csvlog import header_and_rows, seconds, split_fields, whole
from pipelines.formats.rows import Labels, finish

FORMAT = "burstgpt"
REQUIRED = {"timestamp": "arrival_text", "model": "model", "request tokens": "prompt_text",
            "response tokens": "output_text", "log type": "tenant"}
OPTIONAL = {"total tokens", "session id", "elapsed time"}
EXPECTED = ("a BurstGPT CSV with a header Timestamp,Model,Request tokens,Response tokens,"
            "Total tokens,Log Type (optionally Session ID, Elapsed time)")
LABELS = Labels("Timestamp", "Request tokens", "Response tokens", clock="a number of seconds",
                e2e="Elapsed time")


def read(plain: Path, shown: Path, sha256: str, policies: Policies, start_time=None) -> IngestResult:
    header, rows, written = header_and_rows(plain, shown, EXPECTED)
    if not set(REQUIRED) <= set(header) or not set(header) <= set(REQUIRED) | OPTIONAL:
        raise UnknownFormatError(f"{shown}: header {written!r} is not {EXPECTED}; {OTHER_COLUMNS}")
    elapsed = "elapsed time" in header
    parsed = split_fields(rows, header, REQUIRED | ({"elapsed time": "e2e_text"} if elapsed else {}))
    parsed = parsed.with_columns(
        arrival=seconds("arrival_text"),
        prompt_tokens=whole("prompt_text"),
        output_tokens=whole("output_text"),
        failed=whole("output_text") == 0,
        failure=pl.lit("Response tokens 0"),
        **({"observed_e2e_s": seconds("e2e_text")} if elapsed else {}),
    )
    return finish(parsed, path=shown, fmt=FORMAT, sha256=sha256, labels=LABELS, policies=policies,
                  start_time=start_time)
