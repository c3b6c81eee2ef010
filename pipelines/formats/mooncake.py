"""Mooncake (Kimi) FAST'25 JSONL: {"timestamp", "input_length", "output_length", "hash_ids"}.

`timestamp` is relative **milliseconds** (integer); `hash_ids` are remapped prefix-cache block
hashes, `block_tokens` (default 512, Mooncake's block size) tokens per block. The hashes go to
`prefix_hashes` and the block size to `trace_files.prefix_block_tokens`; it must be a multiple of
the replay's 16-token KV block (KV_BLOCK_TOKENS), checked here. Other releases use the
same field names with other units (Bailian: float seconds, 16-token blocks): pass
`time_unit="s"` and `block_tokens=16` for those; units are never guessed from names.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.formats.common import IngestResult, Policies, is_count
from pipelines.formats.jsonlog import count, number, object_rows, text
from pipelines.formats.rows import Labels, finish
from pipelines.formats.units import per_second

FORMAT = "mooncake"
INTEGER_LIST = r"^\[\s*(-?\d{1,18}\s*(,\s*-?\d{1,18}\s*)*)?\]$"
# The KV block size of every deployment in data/reference/deployments.csv (kv_block_tokens, vLLM's
# default). The replay's prefix cache matches whole KV blocks, so it refuses a hash that covers
# anything but a multiple of the block size (replay/api.py, hash_tokens): check it at ingest,
# where the message can name the file and the option.
KV_BLOCK_TOKENS = 16
EXPECTED = 'a Mooncake JSONL trace (objects with "timestamp", "input_length", "output_length", "hash_ids")'


def read(plain: Path, shown: Path, sha256: str, policies: Policies, start_time=None,
         time_unit: str = "ms", block_tokens: int = 512) -> IngestResult:
    if not is_count(block_tokens) or block_tokens % KV_BLOCK_TOKENS:
        raise ValueError(f"{shown}: block_tokens={block_tokens!r}: expected the tokens per hash_ids block, a positive "
                         f"whole multiple of {KV_BLOCK_TOKENS} (Mooncake: 512): the replay's prefix cache matches "
                         f"whole KV blocks of {KV_BLOCK_TOKENS} tokens, so a hash must cover whole blocks")
    block_tokens = int(block_tokens)
    rows = object_rows(plain, shown, EXPECTED)
    hashes = pl.col("raw").str.json_path_match("$.hash_ids")
    parsed = rows.with_columns(
        arrival=number("timestamp") / per_second(time_unit), arrival_text=text("timestamp"),
        prompt_tokens=count("input_length"), prompt_text=text("input_length"),
        output_tokens=count("output_length"), output_text=text("output_length"),
        prefix_hashes=pl.when(hashes.str.contains(INTEGER_LIST)).then(hashes).str.json_decode(pl.List(pl.Int64)),
    ).with_columns(
        bad=pl.coalesce(pl.col("bad"), pl.when(hashes.is_not_null() & pl.col("prefix_hashes").is_null())
                        .then(pl.format("hash_ids is not a list of integers: '{}'", hashes))),
    )
    # A prompt of n tokens fills ceil(n / block_tokens) blocks: more hashes than that is a log of
    # smaller blocks (Bailian's 16) read at Mooncake's 512, whose every hash would be credited as
    # 512 cached tokens. Refused per row, naming the option, rather than guessing the block size.
    blocks = pl.col("prefix_hashes").list.len()
    fills = (pl.col("prompt_tokens") + block_tokens - 1) // block_tokens
    parsed = parsed.with_columns(
        bad=pl.coalesce(pl.col("bad"), pl.when(blocks > fills).then(pl.format(
            "hash_ids holds {} blocks, more than the {} that input_length {} fills at"
            f" block_tokens={block_tokens}: is block_tokens right? (Mooncake: 512; logs of"
            " 16-token blocks need block_tokens=16)", blocks, fills, pl.col("prompt_tokens")))),
    )
    labels = Labels("timestamp", "input_length", "output_length", clock=f"a number of {time_unit}",
                    unit=time_unit)
    return finish(parsed, path=shown, fmt=FORMAT, sha256=sha256, labels=labels, policies=policies,
                  start_time=start_time, prefix_block_tokens=int(block_tokens))
