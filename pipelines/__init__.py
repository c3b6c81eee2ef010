"""fleetspend: where an LLM serving fleet's time and money go.

Importing the package points numba's on-disk cache at a folder named by the contents of every
module it compiles with `cache=True`. Numba invalidates a cached function only when its own file
changes, not when a function it calls from another file does: the replay loop
(pipelines/replay/engine.py) calls the step formula (pipelines/roofline/step.py), so after an
edit or a `git pull` that changes only step.py it would silently keep replaying the old physics.
A folder per content digest cannot go stale. A NUMBA_CACHE_DIR the user chose is left alone; one
this package chose (inherited by a child process of an older checkout) is recomputed.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
NUMBA_SOURCES = ("roofline/step.py", "replay/engine.py")
CACHE_FOLDER = ("fleetspend", "numba")


def _cache_home() -> Path:
    """$XDG_CACHE_HOME or ~/.cache, else the temporary directory (no home, or not writable)."""
    try:
        home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        (home / Path(*CACHE_FOLDER)).mkdir(parents=True, exist_ok=True)
        if os.access(home / Path(*CACHE_FOLDER), os.W_OK):
            return home
    except (OSError, RuntimeError):
        pass
    return Path(tempfile.gettempdir())


def numba_cache_dir(package: Path = PACKAGE, home: Path | None = None) -> Path:
    """The cache folder for the compiled code of `package`'s NUMBA_SOURCES as they are now."""
    digest = hashlib.sha256()
    for name in NUMBA_SOURCES:
        digest.update((package / name).read_bytes())
    return (home or _cache_home()) / Path(*CACHE_FOLDER) / digest.hexdigest()[:16]


def _use_digest_cache() -> None:
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen and Path(chosen).parent.parts[-2:] != CACHE_FOLDER:
        return
    os.environ["NUMBA_CACHE_DIR"] = str(numba_cache_dir())
    if "numba" in sys.modules:  # imported first: it has read its settings already
        sys.modules["numba"].config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]


_use_digest_cache()
