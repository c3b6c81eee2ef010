"""The compiled replay never runs stale physics: numba's cache folder is named by the contents of
every module compiled with cache=True (pipelines/__init__.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

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
    assert numba_cache_dir(tmp_path) == numba_cache_dir(PACKAGE)
    with open(tmp_path / "roofline" / "step.py", "a") as step:
        step.write("\n# edited\n")
    assert numba_cache_dir(tmp_path) != numba_cache_dir(PACKAGE)


def test_numba_uses_the_folder_unless_the_user_chose_one(tmp_path):
    def cache_dir_seen_by_numba(environment: dict) -> str:
        code = "import pipelines, numba; print(numba.config.CACHE_DIR)"
        return subprocess.run([sys.executable, "-c", code], env=environment, check=True,
                              capture_output=True, text=True).stdout.strip()

    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    assert cache_dir_seen_by_numba(environment) == str(numba_cache_dir())
    chosen = str(tmp_path / "numba")
    assert cache_dir_seen_by_numba({**environment, "NUMBA_CACHE_DIR": chosen}) == chosen
