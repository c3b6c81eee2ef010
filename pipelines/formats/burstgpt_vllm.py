"""BurstGPT replayed on vLLM (liao4s/BurstGPT_test `detail_log_*.json`): one JSON **object**
keyed by event id, one entry per request, keys in completion order.

Fields used: `in_len` (prompt tokens actually sent), `out_len`, `first_chunk_time` (TTFT, s),
`total_chunk_time` (end-to-end, s), `record_time` (a **monotonic** clock, s, taken at
completion). arrival = record_time - total_chunk_time, from the first request (give
`start_time=` for wall-clock arrivals). `out_len` is **not a token count** (it exceeds the
1,024-token cap in most rows; about 6.5 per generated token, judging by the engine log's
throughput), so the user must say how many out_len units make a token: `out_len_per_token=`
(required, no default); output_tokens = round(out_len / out_len_per_token).
A row is entry number `line` of the object (1-based, file order); `raw` is the entry as JSON.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import IngestResult, Policies, is_positive_number, whole_count
from pipelines.formats.jsonlog import json_records
from pipelines.formats.rows import Labels, field_text, finish

FORMAT = "burstgpt-vllm"
EXPECTED = ('a BurstGPT vLLM replay detail log (a JSON object of {"event_id", "in_len", "out_len", '
            '"first_chunk_time", "total_chunk_time", "record_time"} entries)')
LABELS = Labels("record_time - total_chunk_time", "in_len", "out_len / out_len_per_token",
                clock="a number of seconds", ttft="first_chunk_time", e2e="total_chunk_time")
CLOCKS = ("first_chunk_time", "total_chunk_time", "record_time")
NEEDED = ("in_len", "out_len", *CLOCKS)


def read(plain: Path, shown: Path, sha256: str, policies: Policies, out_len_per_token: float | None = None,
         start_time=None) -> IngestResult:
    if not is_positive_number(out_len_per_token):
        raise ValueError(f"{shown}: format {FORMAT!r} needs out_len_per_token= (a finite number > 0, got "
                         f"{out_len_per_token!r}): its out_len is not a token count, and the unit is never guessed")
    entries = json_records(plain, shown, EXPECTED, NEEDED, "one JSON object of same-shaped entries",
                           lambda frame, keys: frame.unpivot(on=keys, variable_name="key").unnest("value"))
    number = {name: pl.col(name).cast(pl.Float64, strict=False) for name in CLOCKS}
    text = {name: field_text(pl.col(name)) for name in NEEDED}
    parsed = entries.select(
        line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64),
        raw=pl.struct(pl.all().exclude("key")).struct.json_encode(),
        arrival=number["record_time"] - number["total_chunk_time"],
        arrival_text=pl.format("{} - {}", text["record_time"], text["total_chunk_time"]),
        prompt_tokens=whole_count(pl.col("in_len")),
        prompt_text=text["in_len"],
        output_tokens=(whole_count(pl.col("out_len")) / out_len_per_token).round().cast(pl.Int64, strict=False),
        output_text=text["out_len"],
        observed_ttft_s=number["first_chunk_time"], ttft_text=pl.col("first_chunk_time").cast(pl.String),
        observed_e2e_s=number["total_chunk_time"], e2e_text=pl.col("total_chunk_time").cast(pl.String),
    ).lazy()
    return finish(parsed, path=shown, fmt=FORMAT, sha256=sha256, labels=LABELS, policies=policies,
                  start_time=start_time)
