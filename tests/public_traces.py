"""Where the real public traces are: ../shared/traces/ beside the checkout, or the folder
FLEETSPEND_PUBLIC_TRACES names. Tests that read them whole skip where it is absent."""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("FLEETSPEND_PUBLIC_TRACES",
                             Path(__file__).resolve().parents[2] / "shared" / "traces"))
