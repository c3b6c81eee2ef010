"""What every trace reader returns, and the canonical schema it returns it in."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

REQUESTS_SCHEMA = {
    "request_id": pl.String,
    "trace": pl.String,
    "arrival_ts": pl.Datetime("us", "UTC"),
    "arrival_s": pl.Float64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cached_tokens": pl.Int64,
    "prefix_hashes": pl.List(pl.Int64),
    "model": pl.String,
    "tenant": pl.String,
    "observed_ttft_s": pl.Float64,
    "observed_e2e_s": pl.Float64,
}
REJECTED_SCHEMA = {
    "source_file": pl.String,
    "line": pl.Int64,
    "raw": pl.String,
    "reason": pl.String,
}
# A prompt or answer beyond this many tokens is not a real request (no model has such a context).
MAX_SANE_TOKENS = 10_000_000


class TraceFormatError(ValueError):
    """The file is not a trace of the expected format; the message names it and what was expected."""


@dataclass(frozen=True)
class IngestResult:
    file: Path
    format: str
    sha256: str
    rows_read: int
    requests: pl.DataFrame   # REQUESTS_SCHEMA
    rejected: pl.DataFrame   # REJECTED_SCHEMA

    def __post_init__(self) -> None:
        if self.rows_read != self.requests.height + self.rejected.height:
            raise AssertionError(
                f"{self.file}: read {self.rows_read} rows but accepted {self.requests.height}"
                f" + rejected {self.rejected.height}"
            )

    def file_row(self) -> dict:
        """The `trace_files` row of this file."""
        return {
            "file": str(self.file),
            "trace": trace_name(self.file),
            "format": self.format,
            "sha256": self.sha256,
            "rows_read": self.rows_read,
            "rows_accepted": self.requests.height,
            "rows_rejected": self.rejected.height,
        }


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trace_name(path: Path) -> str:
    """A trace is named after its file, less the format and compression suffixes:
    AzureLLMInferenceTrace_conv.csv -> AzureLLMInferenceTrace_conv, conv.2024-01-01.csv.gz ->
    conv.2024-01-01."""
    name = path.name
    for suffix in (".gz", ".zst"):
        name = name.removesuffix(suffix)
    return name.rsplit(".", 1)[0] if "." in name else name
