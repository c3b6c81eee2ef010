"""fleetspend: where an LLM serving fleet's time and money go.

Importing the package points numba's on-disk cache at a folder named by the contents of every
module it compiles with `cache=True`. Numba invalidates a cached function only when its own file
changes, not when a function it calls from another file does: the replay loop
(pipelines/replay/engine.py) calls the step formula (pipelines/roofline/step.py), so after an
edit or a `git pull` that changes only step.py it would silently keep replaying the old physics.
A folder per content digest cannot go stale. A NUMBA_CACHE_DIR set by the user is left alone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
NUMBA_SOURCES = ("roofline/step.py", "replay/engine.py")


def numba_cache_dir(package: Path = PACKAGE) -> Path:
    """The cache folder for the compiled code of `package`'s NUMBA_SOURCES as they are now."""
    digest = hashlib.sha256()
    for name in NUMBA_SOURCES:
        digest.update((package / name).read_bytes())
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_home / "fleetspend" / "numba" / digest.hexdigest()[:16]


os.environ.setdefault("NUMBA_CACHE_DIR", str(numba_cache_dir()))
