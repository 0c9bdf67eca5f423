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
    folder = cache_dir()
    path = folder / f"{name}.json" if folder else None
    if path is not None and path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
    value = compute()
    if path is not None:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(value))
            tmp.replace(path)
        except OSError:
            tmp.unlink(missing_ok=True)
    return value


def arrays_cached(name: str, fields: tuple[str, ...],
                  compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``compute()`` (the arrays named ``fields``), kept on disk as ``name``.npz (a file
    name that changes whenever what ``compute`` returns would)."""
    folder = cache_dir()
    path = folder / f"{name}.npz" if folder else None
    if path is not None and path.exists():
        try:
            with np.load(path) as data:
                return {f: data[f] for f in fields}
        except (OSError, KeyError, ValueError):
            pass  # a damaged entry is computed again below
    arrays = compute()
    if path is not None:
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        try:
            saved: dict[str, Any] = {f: arrays[f] for f in fields}
            np.savez(tmp, **saved)
            tmp.replace(path)
        except OSError:
            tmp.unlink(missing_ok=True)
    return arrays
