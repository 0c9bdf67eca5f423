"""The full-vocabulary passes of one decision, compiled by numba (machine code cached on
disk).

A decision on a large vocabulary only materialises the tokens near the top (see
:mod:`tether.sampling.rows`); what it still needs from *every* token is a sum of
exponentials: the legal mass for the KL diagnostic, and the mass of the tokens left
out of the window. ``np.exp`` costs about as much as the whole per-token budget on a
129k row, so these kernels use their own vectorisable ``exp`` (Cody–Waite range
reduction and a degree-6 polynomial: relative error below 4e-7 on [-87, 0]) and sum in
float32 blocks folded into float64.

Arguments below 87 nats under the shift count as ``exp(-87)`` (about 1.6e-38: nothing),
NaN counts as nothing, and ``allowed`` is a uint8 array of 0/1 flags.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

_FAST = {"reassoc", "contract", "nsz", "arcp", "afn"}  # no nnan/ninf: -inf and NaN occur
_BLOCK = 256
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.428606765330187e-06)
_FLOOR = np.float32(-87.0)
_C2, _C3, _C4, _C5, _C6 = (np.float32(1 / math.factorial(n)) for n in range(2, 7))


@intrinsic
def _as_float(typingctx, bits):  # noqa: ARG001 - numba's intrinsic signature
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return types.float32(types.int32), codegen


@intrinsic
def _as_bits(typingctx, value):  # noqa: ARG001 - numba's intrinsic signature
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int32))
    return types.int32(types.float32), codegen


@njit(inline="always", fastmath=_FAST)
def _exp(v):
    v = v if v > _FLOOR else _FLOOR
    k = -np.int32(v * -_LOG2E + np.float32(0.5))  # round(v / ln 2), v <= 0
    kf = np.float32(k)
    r = (v - kf * _LN2_HI) - kf * _LN2_LO
    p = _C6 * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + np.float32(1.0)
    p = p * r + np.float32(1.0)
    return p * _as_float((k + np.int32(127)) << np.int32(23))


@njit(inline="always", fastmath=_FAST)
def _keep(value, flag):
    """``value`` where ``flag`` is 1, +0.0 where it is 0 (branch-free)."""
    return _as_float(_as_bits(value) & -np.int32(flag))


@njit(cache=True, nogil=True, fastmath=_FAST)
def masses(x: np.ndarray, allowed: np.ndarray, shift: float) -> tuple[float, float]:
    """``(Σ exp(x - shift), Σ_allowed exp(x - shift))`` over the whole row."""
    n = x.shape[0]
    shift32 = np.float32(shift)
    total, legal = 0.0, 0.0
    for start in range(0, n, _BLOCK):
        block_total, block_legal = np.float32(0.0), np.float32(0.0)
        for i in range(start, min(start + _BLOCK, n)):
            e = _exp(x[i] - shift32)
            block_total += e
            block_legal += _keep(e, allowed[i])
        total += block_total
        legal += block_legal
    return total, legal


@njit(cache=True, nogil=True, fastmath=_FAST)
def outside_mass(x: np.ndarray, allowed: np.ndarray, cut: float, scale: float,
                 shift: float) -> float:
    """``Σ exp(x·scale - shift)`` over the allowed tokens with ``x < cut``."""
    n = x.shape[0]
    cut32, scale32, shift32 = np.float32(cut), np.float32(scale), np.float32(shift)
    total = 0.0
    for start in range(0, n, _BLOCK):
        block = np.float32(0.0)
        for i in range(start, min(start + _BLOCK, n)):
            v = x[i]
            e = _exp(v * scale32 - shift32)
            block += _keep(e, allowed[i] & np.uint8(v < cut32))
        total += block
    return total


@njit(cache=True, nogil=True)
def outside_locate(x: np.ndarray, allowed: np.ndarray, cut: float, scale: float,
                   shift: float, target: float) -> int:
    """The first allowed token with ``x < cut`` (in id order) at which the running mass
    of :func:`outside_mass` exceeds ``target``; the last such token if it never does
    (rounding), -1 if there is none."""
    cut32, scale32, shift32 = np.float32(cut), np.float32(scale), np.float32(shift)
    running = 0.0
    last = -1
    for i in range(x.shape[0]):
        v = x[i]
        if allowed[i] and v < cut32:
            running += _exp(v * scale32 - shift32)
            last = i
            if running > target:
                return i
    return last
