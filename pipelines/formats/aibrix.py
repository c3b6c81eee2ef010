"""AIBrix benchmark-client JSONL: prompt_tokens, output_tokens, latency, ttft, tpot, start_time.

`start_time` is a **monotonic** clock in seconds (not Unix time): it becomes arrival_s from the
first request; give `start_time=` (a datetime) for wall-clock arrivals. Rows are written in
completion order, so they are sorted by arrival here. The schema changes inside the file: early
rows lack start_time/ttft/tpot, and a row without start_time has no arrival and is rejected.
`latency` -> observed_e2e_s, `ttft` -> observed_ttft_s.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.formats.common import IngestResult, Policies
from pipelines.formats.jsonlog import count, number, object_rows, text, value
from pipelines.formats.rows import Labels, finish

FORMAT = "aibrix"
EXPECTED = 'an AIBrix client JSONL log (objects with "prompt_tokens", "output_tokens", "latency", "start_time")'
LABELS = Labels("start_time", "prompt_tokens", "output_tokens", clock="a number of seconds",
                ttft="ttft", e2e="latency")


def read(plain: Path, shown: Path, sha256: str, policies: Policies, start_time=None) -> IngestResult:
    rows = object_rows(plain, shown, EXPECTED)
    parsed = rows.with_columns(
        arrival=number("start_time"), arrival_text=text("start_time"),
        prompt_tokens=count("prompt_tokens"), prompt_text=text("prompt_tokens"),
        output_tokens=count("output_tokens"), output_text=text("output_tokens"),
        observed_e2e_s=number("latency"), e2e_text=value("latency"),
        observed_ttft_s=number("ttft"), ttft_text=value("ttft"),
    )
    return finish(parsed, path=shown, fmt=FORMAT, sha256=sha256, labels=LABELS, policies=policies,
                  start_time=start_time)
