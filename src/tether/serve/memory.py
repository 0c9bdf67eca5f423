"""Keeping a long-running server's memory where its bounded caches put it (glibc only;
elsewhere these do nothing).

Python's small objects and numpy's small arrays come from ``malloc``. glibc gives each
thread that allocates its own arena, and memory freed in one arena is not reused by
another: a server whose compile threads build constraints and whose model thread then
fills their masks spreads across arenas and keeps growing past what it holds
(measured: +105 MB over 450 requests after the caches were full). :func:`limit_arenas`
caps the arenas before the server starts its threads; :func:`trim` hands freed pages
back to the system after each request.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)
ARENAS = 2


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018 - glibc has both; other C libraries may not
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int = ARENAS) -> None:
    """At most ``arenas`` malloc arenas for the process (call before starting threads)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, arenas)


def trim() -> None:
    """Return the free memory at the top of every arena to the system."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
