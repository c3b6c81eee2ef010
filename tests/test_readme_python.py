"""The README's "From Python" examples run as written and print what their comments say, and
the errors its prose quotes are the API's."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipelines.roofline import load_catalog

README = Path(__file__).resolve().parents[1] / "README.md"
MOONCAKE_EXCERPT = (Path(__file__).resolve().parent / "fixtures" / "mooncake"
                    / "conversation_trace_excerpt.jsonl")


def _from_python_section() -> str:
    return README.read_text().split("## From Python", 1)[1].split("\n## ", 1)[0]


def _from_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _from_python_section(), flags=re.S)


def test_the_from_python_example_runs_and_its_figure_is_true():
    namespace: dict = {}
    exec(_from_python_blocks()[0], namespace)  # noqa: S102 - the README's own example
    stages = namespace["stages"]
    assert isinstance(stages, pl.DataFrame) and stages.height == 2
    said = re.search(r"d\.prefill_s\(500\)\s+# ([\d.]+) s", _from_python_blocks()[0])
    assert said, "the example no longer states prefill_s(500)"
    assert round(namespace["d"].prefill_s(500), 3) == float(said.group(1))


def test_the_build_in_the_examples_comment_runs():
    """The example's other deployment is only in a comment, `# or catalog.build(...)` over two
    lines: the test ran the code around it, not the call a reader copies."""
    block = _from_python_blocks()[0]
    comment = " ".join(line.split("#", 1)[1].strip() for line in block.splitlines() if "#" in line)
    call = re.search(r"or (catalog\.build\(.*?\))", comment)
    assert call, "the example no longer shows catalog.build in a comment"
    d = eval(call.group(1), {"catalog": load_catalog()})  # noqa: S307 - the README's own call
    assert d.prefill_s(500) > 0 and d.decode_step_s(batch_size=32, context_tokens=32 * 1000) > 0


def test_the_errors_the_section_quotes_are_the_apis():
    """The prose after the example quotes four messages; each is what the call raises (a
    trailing "..." stands for the rest)."""
    catalog = load_catalog()
    d = catalog.deployment("seed-example")
    calls = {"weights='FP8':": lambda: catalog.build(model="llama-3.1-8b", gpu="h100-sxm",
                                                     weights="FP8"),
             "tp=3 cannot split": lambda: catalog.build(model="llama-3.1-8b", gpu="h100-sxm", tp=3),
             "prompt_tokens=1.5:": lambda: d.prefill_s(1.5),
             "cached_tokens=100 with": lambda: d.prefill_s(100, 100)}
    prose = " ".join(_from_python_section().split())
    for start, call in calls.items():
        quoted = re.search(rf"`({re.escape(start)}[^`]*)`", prose)
        assert quoted, f"the section no longer quotes {start!r}"
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value).startswith(quoted.group(1).removesuffix("...").rstrip())


def test_the_read_trace_example_runs_as_written(tmp_path, monkeypatch):
    """The second example reads two files the reader has, by the names it gives them: run in a
    folder holding a Mooncake excerpt and a Parquet log of those names and columns."""
    shutil.copy(MOONCAKE_EXCERPT, tmp_path / "conversation_trace.jsonl")
    pl.DataFrame({"ts": [1_700_000_000_000, 1_700_000_001_000], "in": [100, 200],
                  "out": [10, 20], "team": ["a", "b"]}).write_parquet(tmp_path / "my_log.parquet")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(_from_python_blocks()[1], namespace)  # noqa: S102 - the README's own example
    result = namespace["result"]
    assert result.format == "mooncake" and result.requests.height > 0
    assert set(result.counts) == {"exact_duplicates", "zero_output_rows", "failed_rows"}
    assert list(result.rejected.columns) == ["source_file", "line", "raw", "reason"]
