"""Keeping a long-running server's memory where its bounded caches put it (glibc only;
elsewhere these do nothing).

Python's small objects and numpy's small arrays come from ``malloc``. glibc gives each
thread that allocates its own arena, and memory freed in one arena is not reused by
another: a server whose compile threads build constraints and whose model thread then
fills their masks spreads across arenas and keeps growing past what it holds
(measured: +105 MB over 450 requests after the caches were full). :func:`limit_arenas`
caps the arenas before the server starts its threads; :func:`trim` hands freed pages
back to the system after each request. :func:`usage` reports where the memory is (the
server's ``/health`` shows it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
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


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def usage() -> dict[str, float]:
    """Where the process's memory is, in MB: ``rss`` (resident); with glibc 2.33+,
    ``malloc_in_use`` (allocated from the arenas and by mmap) and ``malloc_free`` (free
    in the arenas: what fragmentation keeps); ``python_blocks`` (the interpreter's
    allocated blocks, a count)."""
    out: dict[str, float] = {"python_blocks": float(sys.getallocatedblocks())}
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            out["rss"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        pass
    libc = _libc()
    mallinfo2 = getattr(libc, "mallinfo2", None) if libc is not None else None
    if mallinfo2 is not None:
        mallinfo2.restype = _MallInfo2
        info = mallinfo2()
        out["malloc_in_use"] = (info.uordblks + info.hblkhd) / 2**20
        out["malloc_free"] = info.fordblks / 2**20
    return {k: round(v, 1) for k, v in out.items()}
