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
        for name, _, columns in HEADERS:
            if {column.lower() for column in columns} <= header:
                return name
        if "arrived_at" in header or "num_prefill_tokens" in header:
            return "vidur"
    hint = "" if first.startswith(("[", "{")) else _near_miss(first)
    raise UnknownFormatError(f"{shown}: cannot tell the log format from its first line {first[:100]!r}"
                             f"{hint}; expected {EXPECTED}")


# CSV formats recognised by a header holding all of these columns (any case, any order)
HEADERS = (("azure-llm", "an Azure LLM trace", ("TIMESTAMP", "ContextTokens", "GeneratedTokens")),
           ("burstgpt", "a BurstGPT log", ("Request tokens", "Response tokens")))


def _near_miss(first: str) -> str:
    """What is wrong with a header that is nearly a known format's: all its columns but one (a
    column renamed or dropped by an export), or separated by tabs or semicolons (a spreadsheet's
    export) instead of commas. 'cannot tell the log format' alone sends the user looking for
    another format when one name, or the separator, is what is wrong."""
    if "," not in first and ("\t" in first or ";" in first):
        return " (no comma in it: a CSV log is comma-separated, not by tabs or semicolons)"
    header = set(header_names(first))
    for _, label, columns in HEADERS:
        missing = [column for column in columns if column.lower() not in header]
        if len(missing) == 1:
            return f" (it has the other columns of {label} but lacks {missing[0]})"
    return ""
