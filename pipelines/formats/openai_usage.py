"""OpenAI-style usage logs (JSONL), one object per API call:
{"created": <Unix s>, "model", "user", "usage": {"prompt_tokens", "completion_tokens",
"prompt_tokens_details": {"cached_tokens"}}, optional "ttft_s", "e2e_s"}.

`created` is Unix epoch seconds (the API's own unit): arrival_ts is absolute. `user` -> tenant,
`cached_tokens` (absent = 0) -> cached_tokens; measured latencies, when the logger added them as
`ttft_s` / `e2e_s` (seconds), -> observed_ttft_s / observed_e2e_s.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import IngestResult, Policies, known_count
from pipelines.formats.jsonlog import count, number, object_rows, text, value
from pipelines.formats.rows import Labels, finish

FORMAT = "openai-usage"
EXPECTED = 'an OpenAI-style usage JSONL log (objects with "created" and "usage": {"prompt_tokens", "completion_tokens"})'
LABELS = Labels("created", "usage.prompt_tokens", "usage.completion_tokens",
                cached="usage.prompt_tokens_details.cached_tokens", clock="Unix seconds",
                ttft="ttft_s", e2e="e2e_s")
CACHED = "usage.prompt_tokens_details.cached_tokens"


def read(plain: Path, shown: Path, sha256: str, policies: Policies) -> IngestResult:
    rows = object_rows(plain, shown, EXPECTED)
    cached_raw = pl.col("raw").str.json_path_match(f"$.{CACHED}")
    created_us = (number("created") * 1e6).round()
    parsed = rows.with_columns(
        arrival=pl.when(created_us.abs() < 2**62).then(created_us).cast(pl.Int64)
        .cast(pl.Datetime("us", "UTC")),
        arrival_text=text("created"),
        prompt_tokens=count("usage.prompt_tokens"), prompt_text=text("usage.prompt_tokens"),
        output_tokens=count("usage.completion_tokens"), output_text=text("usage.completion_tokens"),
        cached_tokens=known_count(cached_raw),
        cached_text=text(CACHED),
        model=pl.col("raw").str.json_path_match("$.model"),
        tenant=pl.col("raw").str.json_path_match("$.user"),
        observed_ttft_s=number("ttft_s"), ttft_text=value("ttft_s"),
        observed_e2e_s=number("e2e_s"), e2e_text=value("e2e_s"),
    )
    return finish(parsed, path=shown, fmt=FORMAT, sha256=sha256, labels=LABELS, policies=policies)
