"""Trace formats: read one log file, return canonical `requests` rows plus rejected rows.

    read_trace(path, format=None, *, duplicates="keep", zero_output="reject", failed="keep",
               model=None, **format_options) -> IngestResult

`format` is detected from the content when not given (detect.py); `FORMATS` maps each name to
its reader. `.gz` and `.zst` files are decompressed first, whatever the format. Every result
satisfies read = accepted + rejected; a file that is not a trace of the expected format raises
`TraceFormatError`, whose message names the file and what was expected. The three policies are
documented on `Policies`; format options (start_time, time_unit, block_tokens, concurrency,
columns, out_len_per_token) on each reader. `model` names the served model for every request
whose record names none: LLMPerf, AIBrix, Azure, Mooncake and Vidur logs carry no model, and
without it the checks that compare a log's model with the deployment's (the replay's
`replayed_model_is_the_logged_one`, the calibration's candidates) cannot say that a 13B log was
offered a 7B deployment. A model the records name is kept.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from pathlib import Path

import polars as pl

from pipelines.formats import aibrix, azure, burstgpt, burstgpt_vllm, generic, llmperf, mooncake, openai_usage, vidur
from pipelines.formats.common import IngestResult, Policies, TraceFormatError, is_one_of, sha256_of
from pipelines.formats.detect import detect
from pipelines.formats.source import head_text, invalid_utf8_at, nul_byte_at, plain_file

FORMATS = {
    azure.FORMAT: azure.read,
    burstgpt.FORMAT: burstgpt.read,
    burstgpt_vllm.FORMAT: burstgpt_vllm.read,
    mooncake.FORMAT: mooncake.read,
    vidur.FORMAT: vidur.read,
    llmperf.FORMAT: llmperf.read,
    aibrix.FORMAT: aibrix.read,
    openai_usage.FORMAT: openai_usage.read,
    "csv": functools.partial(generic.read, fmt="csv"),
    "jsonl": functools.partial(generic.read, fmt="jsonl"),
    "parquet": functools.partial(generic.read, fmt="parquet"),
}
_FIXED = {"plain", "shown", "sha256", "policies", "fmt"}
POLICY_OPTIONS = ("duplicates", "zero_output", "failed")
# The options every format takes besides its own (a sidecar may hold them for any log).
COMMON_OPTIONS = (*POLICY_OPTIONS, "model")
_EXPECTED = {module.FORMAT: module.EXPECTED for module in (azure, burstgpt, burstgpt_vllm, mooncake, vidur,
                                                           llmperf, aibrix, openai_usage)}


def read_trace(path: str | Path, format: str | None = None, *, duplicates: str = "keep",
               zero_output: str = "reject", failed: str = "keep", model: str | None = None,
               **options) -> IngestResult:
    """Read one trace file (any supported format, plain, .gz or .zst)."""
    path = Path(path)
    policies = Policies(duplicates=duplicates, zero_output=zero_output, failed=failed)
    if model is not None and not (isinstance(model, str) and model.strip()):
        raise ValueError(f"{path}: model={model!r}: expected the served model's name as text,"
                         f" e.g. \"meta-llama/Llama-2-13b-chat-hf\"")
    if format is not None and not is_one_of(format, FORMATS):
        raise ValueError(f"format={format!r}: expected one of {sorted(FORMATS)}")
    with plain_file(path) as plain:
        if format is None:
            name = detect(plain, path)
        else:
            name = format
            if name != "parquet":  # refuse empty, binary and non-UTF-8 files before parsing
                head_text(plain, path, _EXPECTED.get(name, f"a {name} request log"))
        reader = FORMATS[name]
        accepted = reader_options(name)
        unknown = set(options) - accepted
        if unknown:
            raise ValueError(f"option(s) {sorted(unknown)} do not apply to format {name!r}"
                             f" (it takes {sorted(accepted) or 'none'})")
        if name != "parquet" and (at := nul_byte_at(plain)) is not None:
            raise TraceFormatError(f"{path}: binary data, not a text log: a NUL byte at byte {at[0]},"
                                   f" line {at[1]} (a crash or a log rotation can leave a run of"
                                   f" them); expected {_EXPECTED.get(name, f'a {name} request log')}")
        try:
            return _with_model(reader(plain, path, sha256_of(path), policies, **options), model)
        # ComputeError is raised while scanning, e.g. where the text is not UTF-8; the other two
        # where a value is of a type no check expects (a list or an object where a number
        # belongs), which would otherwise fail the whole folder's ingest with a traceback. Not
        # every PolarsError: a ColumnNotFoundError is a reader's own bug, not the file's, and
        # propagates as one.
        except (pl.exceptions.ComputeError, pl.exceptions.SchemaError,
                pl.exceptions.InvalidOperationError) as exc:
            expected = _EXPECTED.get(name, f"a {name} request log")
            if (at := invalid_utf8_at(plain)) is not None:
                raise TraceFormatError(f"{path}: not UTF-8 text (byte {at[0]}, line {at[1]});"
                                       f" expected {expected}") from None
            raise TraceFormatError(f"{path}: could not be read ({str(exc).splitlines()[0][:120]});"
                                   f" expected {expected}") from None


def _with_model(result: IngestResult, model: str | None) -> IngestResult:
    """`result` with `model` on every accepted row whose record names none."""
    if model is None:
        return result
    named = pl.col("model").fill_null(model) if "model" in result.rows.columns else pl.lit(model)
    return dataclasses.replace(result, rows=result.rows.with_columns(named.alias("model")))


def reader_options(name: str) -> set[str]:
    """The format options (beyond format= and the policies) that format `name` takes."""
    return set(inspect.signature(FORMATS[name]).parameters) - _FIXED


def read_azure_csv(path: str | Path) -> IngestResult:
    """An Azure LLM trace, format forced (kept for callers of the first release)."""
    return read_trace(path, format=azure.FORMAT)


__all__ = ["COMMON_OPTIONS", "FORMATS", "POLICY_OPTIONS", "IngestResult", "TraceFormatError", "read_azure_csv", "read_trace",
           "reader_options"]
