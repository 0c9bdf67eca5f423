"""Where tether keeps its on-disk caches (``$TETHER_CACHE_DIR``, else ``~/.cache/tether``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path | None:
    """The cache folder, created on demand; ``None`` if caching is off or impossible.

    Set ``TETHER_CACHE_DIR=off`` to disable on-disk caching.
    """
    configured = os.environ.get("TETHER_CACHE_DIR")
    if configured == "off":
        return None
    path = Path(configured) if configured else Path.home() / ".cache" / "tether"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path
