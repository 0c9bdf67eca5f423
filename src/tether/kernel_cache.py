"""Whether numba has cached tether's compiled kernels yet.

The core's kernels are numba functions compiled on first use and cached next to their
source (or under ``$NUMBA_CACHE_DIR``); the first run on a machine spends ~30 s compiling
them. :func:`announce_first_run` (called as ``tether`` is imported, before any kernel
compiles) says so on stderr in one line instead of sitting silent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_KERNEL_PACKAGE = Path(__file__).parent / "engine"  # compiled on every constraint's first mask


def first_run() -> bool:
    """True when no compiled kernel is cached where numba will look for it."""
    configured = os.environ.get("NUMBA_CACHE_DIR")
    places = [Path(configured)] if configured else [_KERNEL_PACKAGE / "__pycache__"]
    for place in places:
        try:
            if next(place.rglob("*.nbi"), None) is not None:
                return False
        except OSError:
            continue
    return True


def announce_first_run() -> None:
    """One line on stderr when the kernels are about to be compiled for the first time."""
    if first_run():
        print("[tether] first run: numba is compiling the mask kernels (about 30 s, once)",
              file=sys.stderr, flush=True)
