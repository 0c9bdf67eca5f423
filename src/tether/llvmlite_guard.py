"""Keep llvmlite (numba's LLVM binding, which tether's kernels load) from breaking vLLM.

vLLM on CPUs without Triton-CPU, while a worker starts, replaces its Triton kernels with
C++ ones and, to rebind every reference to them, walks the objects of every loaded module
reading ``vars(obj).get("kernel")``. llvmlite's ``ffi.lib`` wraps any attribute it is asked
for as a C function — ``__dict__`` included — so ``vars(ffi.lib)`` is no dict and the
worker dies (``'_lib_fn_wrapper' object has no attribute 'get'``) whenever tether was
imported in that process first (a script that imports tether, then starts vLLM).
:func:`guard` gives ``ffi.lib`` an empty ``__dict__`` entry in its table of wrapped
functions, which is what ``vars()`` then returns; llvmlite never looks that name up
itself, so nothing else changes.
"""

from __future__ import annotations

import sys


def guard() -> None:
    """Make ``vars(llvmlite.binding.ffi.lib)`` a dict, if llvmlite is loaded."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    table = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(table, dict):
        table.setdefault("__dict__", {})
