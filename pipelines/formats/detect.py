"""Which format a file is in, from its content (never its name): the first bytes and the first
non-blank line (a CSV header, a JSON object's keys, or the opening of a JSON array or of an
indented JSON document, whose keys are then looked for in the first 64 KiB)."""

from __future__ import annotations

from pathlib import Path

from pipelines.formats.common import UnknownFormatError
from pipelines.formats.csvlog import header_names
from pipelines.formats.source import PARQUET_MAGIC, head_text

EXPECTED = ("a request log in one of the known formats (Azure LLM, BurstGPT, Mooncake, Vidur, LLMPerf, "
            "AIBrix, OpenAI usage), or pass format= with a column mapping")


def detect(plain: Path, shown: Path) -> str:
    """The format name of a plain (decompressed) file; TraceFormatError naming it if unknown."""
    with plain.open("rb") as handle:
        if handle.read(4) == PARQUET_MAGIC:
            return "parquet"
    head = head_text(plain, shown, EXPECTED)
    first = next((line.strip() for line in head.splitlines() if line.strip()), "")
    if first.startswith("["):
        if '"number_input_tokens"' in head:
            return "llmperf"
    elif first.startswith("{"):
        # BurstGPT-vLLM's log is one JSON document: saved indented, its first line is "{" alone
        # and its keys follow (the JSONL formats below keep each object on its own line)
        if first == "{" and '"event_id"' in head:
            return "burstgpt-vllm"
        for key, name in (('"event_id"', "burstgpt-vllm"), ('"hash_ids"', "mooncake"), ('"input_length"', "mooncake"),
                          ('"usage"', "openai-usage"), ('"output_tokens"', "aibrix")):
            if key in first:
                return name
    else:
        header = set(header_names(first))
        if {"timestamp", "contexttokens", "generatedtokens"} <= header:
            return "azure-llm"
        if {"request tokens", "response tokens"} <= header:
            return "burstgpt"
        if "arrived_at" in header or "num_prefill_tokens" in header:
            return "vidur"
    raise UnknownFormatError(f"{shown}: cannot tell the log format from its first line {first[:100]!r}; "
                             f"expected {EXPECTED}")
