"""The compiled replay never runs stale physics: numba's cache folder is named by the contents of
every module compiled with cache=True (pipelines/__init__.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from pipelines import NUMBA_SOURCES, PACKAGE, numba_cache_dir


def test_every_cached_module_names_the_cache_folder():
    cached = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
              if "@njit(cache=True" in path.read_text()}
    assert cached == set(NUMBA_SOURCES)


def test_an_edit_to_the_step_formula_alone_moves_the_cache(tmp_path):
    """Numba itself would keep engine.py's compiled loop, built on the old step_cost."""
    for name in NUMBA_SOURCES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACKAGE / name, tmp_path / name)
    assert numba_cache_dir(tmp_path, tmp_path) == numba_cache_dir(PACKAGE, tmp_path)
    with open(tmp_path / "roofline" / "step.py", "a") as step:
        step.write("\n# edited\n")
    assert numba_cache_dir(tmp_path, tmp_path) != numba_cache_dir(PACKAGE, tmp_path)


COMPILE = ("import numpy as np; from pipelines.roofline import step; "
           "step.step_seconds(np.ones(15), *[np.ones(1)] * 5); "
           "import numba; print(numba.config.CACHE_DIR)")


@pytest.mark.parametrize("first", ["import numba", "pass"])
def test_compiled_code_lands_in_the_digest_folder(tmp_path, first):
    """Whichever is imported first, numba or the package, the step formula's compiled code is
    written under the digest folder; a folder the user chose is left alone, one an older
    checkout chose is replaced."""
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    environment["XDG_CACHE_HOME"] = str(tmp_path / "home")

    def cache_dir(extra: dict) -> str:
        return subprocess.run([sys.executable, "-c", f"{first}; {COMPILE}"],
                              env={**environment, **extra}, check=True, capture_output=True,
                              text=True, cwd=PACKAGE.parent).stdout.strip()

    expected = numba_cache_dir(home=tmp_path / "home")
    assert cache_dir({}) == str(expected)
    assert any(expected.rglob("*.nbi")), list(expected.rglob("*"))
    stale = str(expected.parent / "0123456789abcdef")
    assert cache_dir({"NUMBA_CACHE_DIR": stale}) == str(expected)
    chosen = str(tmp_path / "chosen")
    assert cache_dir({"NUMBA_CACHE_DIR": chosen}) == chosen
