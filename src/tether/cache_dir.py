"""tether's on-disk cache (``$TETHER_CACHE_DIR``, else ``~/.cache/tether``).

Derived data that is costly to compute and depends only on its key — a vocabulary's
trie, Unicode class tables, UTF-8 automata of large character sets, the automaton of a
``multipleOf``'s multiples — is kept here so a new process does not compute it again.
``TETHER_CACHE_DIR=off`` disables it. A damaged or unreadable entry is recomputed, never
trusted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def cache_dir() -> Path | None:
    """The cache folder, created on demand; ``None`` if caching is off or impossible."""
    configured = os.environ.get("TETHER_CACHE_DIR")
    if configured == "off":
        return None
    path = Path(configured) if configured else Path.home() / ".cache" / "tether"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


def json_cached(name: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, kept on disk as JSON under ``name`` (a file name without suffix).

    The value comes back as JSON gives it (lists for tuples): callers convert.
    """
    return _cached(f"{name}.json", lambda path: json.loads(path.read_text()), compute,
                   lambda value, tmp: tmp.write_text(json.dumps(value)))


def arrays_cached(name: str, fields: tuple[str, ...],
                  compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``compute()`` (the arrays named ``fields``), kept on disk as ``name``.npz (a file
    name that changes whenever what ``compute`` returns would)."""
    def read(path: Path) -> dict[str, np.ndarray]:
        with np.load(path) as data:
            return {f: data[f] for f in fields}

    def write(arrays: dict[str, np.ndarray], tmp: Path) -> None:
        saved: dict[str, Any] = {f: arrays[f] for f in fields}
        np.savez(tmp, **saved)

    return _cached(f"{name}.npz", read, compute, write)


def _cached(file: str, read: Callable[[Path], Any], compute: Callable[[], Any],
            write: Callable[[Any, Path], None]) -> Any:
    """The value kept in the cache folder as ``file`` (``read``), else ``compute()``,
    written there (``write`` to a temporary file moved into place: readers never see
    half a file). A damaged entry is computed again; no folder, nothing is kept."""
    folder = cache_dir()
    path = folder / file if folder else None
    if path is not None and path.exists():
        try:
            return read(path)
        except (OSError, KeyError, ValueError):
            pass  # a damaged entry is computed again below
    value = compute()
    if path is not None:
        tmp = path.with_name(f"{os.getpid()}.tmp.{file}")  # (np.savez keeps a .npz name)
        try:
            write(value, tmp)
            tmp.replace(path)
        except OSError:
            tmp.unlink(missing_ok=True)
    return value
