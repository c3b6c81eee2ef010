"""Every script under bench/ answers --help with its usage and does nothing else, and refuses an
option it does not take: `bench/validation.py --help` ran the whole validation (a minute),
`bench/publish_bench.py --help` ended in a float() traceback, `bench/replay_bench.py --help` in
an int() one, and `bench/what_if_bench.py --bogus` ran every scenario."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py"))


def _run(monkeypatch, script: str, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", [str(BENCH / script), *args])
    monkeypatch.syspath_prepend(str(BENCH.parent))   # report_bench imports bench.replay_bench
    runpy.run_path(str(BENCH / script), run_name="__main__")


def test_every_bench_script_is_covered():
    assert SCRIPTS == ["ingest_bench.py", "publish_bench.py", "replay_bench.py", "report_bench.py",
                       "validation.py", "validation_calibration.py", "what_if_bench.py"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_the_usage_and_runs_nothing(monkeypatch, capsys, script):
    try:
        _run(monkeypatch, script, "--help")
    except SystemExit as stop:   # argparse exits 0 after its help
        assert stop.code == 0
    out = capsys.readouterr().out
    assert f"bench/{script}" in out or f"usage: {script}" in out   # its docstring's or argparse's
    assert "|" not in out, "a figure table was printed: the benchmark ran"


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_unknown_option_is_refused_by_name(monkeypatch, capsys, script):
    with pytest.raises(SystemExit) as stop:
        _run(monkeypatch, script, "--bogus")
    said = f"{stop.value.code}\n{capsys.readouterr().err}"
    assert stop.value.code != 0 and "--bogus" in said
