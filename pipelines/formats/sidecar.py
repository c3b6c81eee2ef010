"""Per-file options for folder ingest: a sidecar `<file>.fleetspend.json` beside a log file.

Folder ingest (the Dagster asset, the inbox) calls read_trace with no arguments, so a file that
needs some — a BurstGPT vLLM log (`out_len_per_token`), a generic CSV / JSONL / Parquet log
(`format`, `columns`, `time_unit`), an LLMPerf file (`concurrency`), a forced format, a policy
other than the default, a `start_time` for a relative clock, the `model` a log's records do not
name — carries them in a JSON object next to it, under the log's full name plus
`.fleetspend.json`:

    detail_log_scale100_prompt500.json.fleetspend.json
    {"format": "burstgpt-vllm", "out_len_per_token": 6.56}

The keys are read_trace's keyword arguments; `start_time` is an ISO 8601 text. One more key is
not a reading option but a fact about the log: `deployment`, the deployments.csv row that served
it, on which the replay, the what-if replays and the calibration take its trace (a fleet of
several models or GPUs keeps each log on its own hardware; a log without one is replayed on the
run's deployment). A sidecar is checked before the log is read: a file that is not a JSON
object, an unknown key, a key that the named format does not take, an unknown format, or a
`deployment` that is not a name fails that log alone, with one message naming the sidecar and
the key (a name the catalog does not list fails it too, at ingest). A sidecar is part of its log's identity: the ingest stores the
options (`canonical` text) beside the content hash, so editing a sidecar re-ingests the log.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from pipelines.formats import COMMON_OPTIONS, FORMATS, reader_options
from pipelines.formats.common import is_one_of, start_time_of
from pipelines.formats.source import sidecar_of, utf16_text


class OptionsError(ValueError):
    """A sidecar that cannot be used; the message names the sidecar and the key."""


DEPLOYMENT_KEY = "deployment"


def _known_keys(format: str | None) -> set[str]:
    """Every key a sidecar may hold: for a named format, exactly the options it takes, and the
    deployment that served the log."""
    names = [format] if format is not None else list(FORMATS)
    return {"format", DEPLOYMENT_KEY, *COMMON_OPTIONS}.union(*(reader_options(name) for name in names))


def raw_options(path: Path) -> dict:
    """The sidecar of `path` as a checked JSON object ({} when there is none)."""
    sidecar = sidecar_of(path)
    if not sidecar.is_file():
        return {}
    data = sidecar.read_bytes()
    if (utf16 := utf16_text(data)) is not None:
        raise OptionsError(f"{sidecar}: {utf16}; expected a JSON object of read_trace options for {path.name},"
                           f" saved as UTF-8")
    try:   # past a UTF-8 BOM, which Windows Notepad writes (the logs may carry one too)
        options = json.loads(data.decode("utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OptionsError(f"{sidecar}: not valid JSON ({exc}); expected a JSON object of read_trace "
                           f"options for {path.name}, e.g. {{\"format\": \"csv\", \"time_unit\": \"s\", ...}}") from None
    if not isinstance(options, dict):
        raise OptionsError(f"{sidecar}: holds a JSON {type(options).__name__}; expected a JSON object of "
                           f"read_trace options for {path.name}")
    format = options.get("format")
    if format is not None and not is_one_of(format, FORMATS):
        raise OptionsError(f"{sidecar}: key 'format' is {format!r}; expected one of {sorted(FORMATS)}")
    allowed = _known_keys(format)
    for key in sorted(options):
        if key not in allowed:
            scope = f"format {format!r}" if format is not None else "any format"
            # a misspelling names its option first: the list of every format's keys is long
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise OptionsError(f"{sidecar}: key {key!r} is not an option of {scope}; "
                               f"{hint}expected one of {sorted(allowed)}")
    deployment = options.get(DEPLOYMENT_KEY)
    if DEPLOYMENT_KEY in options and not (isinstance(deployment, str) and deployment.strip()):
        raise OptionsError(f"{sidecar}: key {DEPLOYMENT_KEY!r} is {deployment!r}; expected the name of"
                           f" the data/reference/deployments.csv row that served {path.name}")
    return options


def deployment_named(options: dict) -> str | None:
    """The deployment a sidecar's options (raw_options) say served the log, or None."""
    name = options.get(DEPLOYMENT_KEY)
    return name.strip() if name is not None else None


def file_options(path: Path) -> dict:
    """read_trace keyword arguments for `path` from its sidecar (start_time parsed; the
    deployment, which is not a reading option, left out)."""
    options = dict(raw_options(path))
    options.pop(DEPLOYMENT_KEY, None)
    columns = options.get("columns")
    if columns is not None and not (isinstance(columns, dict) and all(isinstance(v, str) for v in columns.values())):
        raise OptionsError(f"{sidecar_of(path)}: key 'columns' is {columns!r}; expected a JSON object mapping "
                           f"arrival, prompt_tokens, output_tokens (...) to the file's column names")
    if "start_time" in options:
        text = options["start_time"]
        try:
            options["start_time"] = start_time_of(text)
        except ValueError as exc:
            raise OptionsError(f"{sidecar_of(path)}: key 'start_time' is {text!r}; {exc}") from None
    return options


def canonical(options: dict) -> str:
    """The options as one stable text, stored in trace_files so a changed sidecar re-ingests."""
    return json.dumps(options, sort_keys=True, separators=(",", ":"))
