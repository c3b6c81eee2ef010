"""Trace formats: read one log file, return canonical `requests` rows plus rejected rows.

Every reader returns an `IngestResult` whose row counts satisfy read = accepted + rejected. A file
that is not a trace of the expected format raises `TraceFormatError`, whose message names the file
and what was expected.
"""

from pipelines.formats.azure import read_azure_csv
from pipelines.formats.common import IngestResult, TraceFormatError

__all__ = ["IngestResult", "TraceFormatError", "read_azure_csv"]
