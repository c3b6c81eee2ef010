"""The README's "From Python" example runs as written and prints what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

README = Path(__file__).resolve().parents[1] / "README.md"


def _from_python_blocks() -> list[str]:
    section = README.read_text().split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_from_python_example_runs_and_its_figure_is_true():
    namespace: dict = {}
    exec(_from_python_blocks()[0], namespace)  # noqa: S102 - the README's own example
    stages = namespace["stages"]
    assert isinstance(stages, pl.DataFrame) and stages.height == 2
    said = re.search(r"d\.prefill_s\(500\)\s+# ([\d.]+) s", _from_python_blocks()[0])
    assert said, "the example no longer states prefill_s(500)"
    assert round(namespace["d"].prefill_s(500), 3) == float(said.group(1))
