"""The full-vocabulary passes of one decision, compiled by numba (machine code cached on
disk).

A decision on a large vocabulary only materialises the tokens near the top (see
:mod:`tether.sampling.rows`). What it needs from *every* token comes from two
vectorised passes: :func:`scan` (the largest logit, the largest allowed one, and the
largest allowed one of every block of ``BLOCK`` tokens) and :func:`masses` (sums of
exponentials: the legal mass for the KL diagnostic, the mass left out of a window).
:func:`gather` then lists the allowed tokens near the top, reading only the blocks
whose largest allowed logit can reach the window. Sums are in float32 blocks folded
into float64; ``allowed`` is a uint8 array of 0/1 flags.

The scalar building blocks below are branch-free so that numba's loops vectorise them
(AVX2: 8 lanes). They live in this module because numba caches each kernel's machine
code by its own source file: a change here must invalidate the kernels that inline it.

* :func:`_exp` — ``np.exp`` costs about as much as the whole per-token budget on a 129k
  row, so this is a float32 ``exp`` of its own: ``v = k·ln 2 + r`` (k by rounding,
  Cody–Waite reduction), a degree-5 minimax polynomial for ``e^r`` on
  [-ln 2/2, ln 2/2] and ``k`` added to the exponent bits; relative error below 5e-7 on
  [-87, 0]. Arguments below -87 count as ``exp(-87)`` (about 1.6e-38: nothing), NaN
  as nothing too.
* :func:`_key` / :func:`_unkey` — a float32 as an int32 that orders like the float
  (``-inf`` < finite < ``+inf``; a NaN with the sign bit clear above ``+inf``, one with
  it set below ``-inf``): LLVM vectorises int32 max/min reductions but not float ones.
* :func:`_keep` / :func:`_choose` — select by a 0/1 flag with bit operations.

Integer arithmetic is done in LLVM intrinsics because numba widens int32 arithmetic to
int64, which AVX2 cannot keep in 8 lanes.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

BLOCK = 256
_RUN = 32
_FAST = {"reassoc", "contract", "nsz", "arcp", "afn"}  # no nnan/ninf: -inf and NaN occur
_KEY_INF = np.int32(np.float32(np.inf).view(np.int32))  # key of +inf; above it: NaN
_KEY_NEG_INF = np.int32(np.float32(-np.inf).view(np.int32) ^ 0x7FFFFFFF)  # key of -inf
_KEY_NONE = np.int32(-(2**31))  # below every key: "no token"

_I32 = ir.IntType(32)
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.428606765330187e-06)
_FLOOR = np.float32(-87.0)
# e^r ≈ _P0 + _P1 r + … + _P5 r^5 on [-ln 2/2, ln 2/2] (relative error 7.5e-8)
_P0, _P1, _P2, _P3, _P4, _P5 = (np.float32(c) for c in (
    1.0000000716556794, 0.9999996919826528, 0.4999889484050255, 0.16667574750967046,
    0.0419153832241036, 0.008297654106077822))


def _int32(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    width = value.type.width
    if width == 32:
        return value
    return builder.trunc(value, _I32) if width > 32 else builder.zext(value, _I32)


def _flip(builder: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """``bits ^ ((bits >> 31) & 0x7FFFFFFF)``: float bits <-> order key (an involution)."""
    sign = builder.ashr(bits, ir.Constant(_I32, 31))
    return builder.xor(bits, builder.and_(sign, ir.Constant(_I32, 0x7FFFFFFF)))


@intrinsic
def _key(typingctx, value):  # noqa: ARG001 - numba's intrinsic signature
    """The order key of a float32 (see the module docstring)."""
    def codegen(context, builder, signature, args):
        return _flip(builder, builder.bitcast(args[0], _I32))
    return types.int32(types.float32), codegen


@intrinsic
def _unkey(typingctx, k):  # noqa: ARG001 - numba's intrinsic signature
    """The float32 of an order key."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(_flip(builder, args[0]), ir.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def _choose(typingctx, flag, a, b):  # noqa: ARG001 - numba's intrinsic signature
    """``a`` where the integer ``flag`` (0 or 1) is 1, else ``b`` (int32)."""
    def codegen(context, builder, signature, args):
        lanes = builder.neg(_int32(builder, args[0]))
        picked = builder.and_(args[1], lanes)
        return builder.or_(picked, builder.and_(args[2], builder.not_(lanes)))
    return types.int32(flag, types.int32, types.int32), codegen


@intrinsic
def _keep(typingctx, value, flag):  # noqa: ARG001 - numba's intrinsic signature
    """``value`` where the integer ``flag`` (0 or 1) is 1, +0.0 where it is 0."""
    def codegen(context, builder, signature, args):
        lanes = builder.neg(_int32(builder, args[1]))
        kept = builder.and_(builder.bitcast(args[0], _I32), lanes)
        return builder.bitcast(kept, ir.FloatType())
    return types.float32(types.float32, flag), codegen


@intrinsic
def _rint(typingctx, value):  # noqa: ARG001 - numba's intrinsic signature
    """The float32 ``value`` rounded to the nearest integer (ties to even)."""
    def codegen(context, builder, signature, args):
        rint = builder.module.declare_intrinsic("llvm.rint", [ir.FloatType()])
        return builder.call(rint, [args[0]])
    return types.float32(types.float32), codegen


@intrinsic
def _ldexp(typingctx, value, k):  # noqa: ARG001 - numba's intrinsic signature
    """``value · 2^k`` for an integral float32 ``k``, by adding ``k`` to the exponent bits
    (the result must be a normal float)."""
    def codegen(context, builder, signature, args):
        shifted = builder.shl(builder.fptosi(args[1], _I32), ir.Constant(_I32, 23))
        bits = builder.add(builder.bitcast(args[0], _I32), shifted)
        return builder.bitcast(bits, ir.FloatType())
    return types.float32(types.float32, types.float32), codegen


@njit(inline="always", fastmath=_FAST)
def _exp(v):  # noqa: ANN001, ANN201 - a float32 in, a float32 out
    """``exp(v)`` for float32 ``v <= 0`` (see the module docstring)."""
    v = v if v > _FLOOR else _FLOOR
    k = _rint(v * _LOG2E)
    r = (v - k * _LN2_HI) - k * _LN2_LO
    p = _P5 * r + _P4
    p = p * r + _P3
    p = p * r + _P2
    p = p * r + _P1
    p = p * r + _P0
    return _ldexp(p, k)


# -- the passes ------------------------------------------------------------------------------
def unkey(key: int) -> float:
    """The float of an order key (an entry of :func:`scan`'s ``tops``), in Python;
    ``-inf`` for a block with no allowed token."""
    k = np.int32(max(key, _KEY_NEG_INF))
    return float((k ^ ((k >> 31) & np.int32(0x7FFFFFFF))).view(np.float32))


def scan(x: np.ndarray, allowed: np.ndarray, tops: np.ndarray) -> tuple[float, float, bool]:
    """``(largest logit, largest allowed logit, whether x holds a NaN)``; ``tops[b]``
    gets the order key of the largest allowed logit of block ``b`` (``_KEY_NONE`` if the
    block allows nothing). With a NaN the two maxima are meaningless: scan a copy
    without NaN."""
    return _floats(*_scan(x, allowed, tops))


@njit(cache=True, nogil=True, fastmath=_FAST)
def _scan(x: np.ndarray, allowed: np.ndarray, tops: np.ndarray) -> tuple[int, int, int]:
    """The order keys of :func:`scan`'s maxima, and of the smallest logit. (Kept apart
    from the conversion to floats: LLVM does not vectorise the loop otherwise.)"""
    n = x.shape[0]
    peak, low, legal = _KEY_NEG_INF, _KEY_NEG_INF, _KEY_NONE
    for b in range(tops.shape[0]):
        top = _KEY_NONE
        for i in range(b * BLOCK, min(b * BLOCK + BLOCK, n)):
            k = _key(x[i])
            peak = k if k > peak else peak
            low = k if k < low else low
            mine = _choose(allowed[i], k, _KEY_NONE)
            top = mine if mine > top else top
        tops[b] = top
        legal = top if top > legal else legal
    return peak, low, legal


@njit(cache=True, nogil=True)
def _floats(peak: int, low: int, legal: int) -> tuple[float, float, bool]:
    has_nan = peak > _KEY_INF or low < _KEY_NEG_INF
    legal = legal if legal > _KEY_NEG_INF else _KEY_NEG_INF
    return _unkey(np.int32(peak)), _unkey(np.int32(legal)), has_nan


@njit(cache=True, nogil=True, fastmath=_FAST)
def masses(x: np.ndarray, allowed: np.ndarray, shift: float) -> tuple[float, float]:
    """``(Σ exp(x - shift), Σ_allowed exp(x - shift))`` over the whole row."""
    n = x.shape[0]
    shift32 = np.float32(shift)
    total, legal = 0.0, 0.0
    for start in range(0, n, BLOCK):
        block_total, block_legal = np.float32(0.0), np.float32(0.0)
        for i in range(start, min(start + BLOCK, n)):
            e = _exp(x[i] - shift32)
            block_total += e
            block_legal += _keep(e, allowed[i])
        total += block_total
        legal += block_legal
    return total, legal


@njit(cache=True, nogil=True)
def gather(x: np.ndarray, allowed: np.ndarray, tops: np.ndarray, cut: float) -> np.ndarray:
    """The allowed tokens with ``x >= cut`` (never a NaN), in id order.

    Only the blocks whose top (:func:`scan`) reaches ``cut`` are read; in those, the
    runs of ``_RUN`` tokens whose largest allowed logit reaches it (a vectorised max)
    are listed first, then walked. (No array is grown in a loop: numba would count
    references on every pass.)"""
    n = x.shape[0]
    cut32 = np.float32(cut)
    reach = _key(cut32)
    blocks = 0
    for b in range(tops.shape[0]):
        blocks += tops[b] >= reach
    starts = np.empty(blocks * (BLOCK // _RUN), dtype=np.int64)
    m = 0
    for b in range(tops.shape[0]):
        if tops[b] < reach:
            continue
        for start in range(b * BLOCK, min(b * BLOCK + BLOCK, n), _RUN):
            top = _KEY_NONE
            for i in range(start, min(start + _RUN, n)):
                mine = _choose(allowed[i], _key(x[i]), _KEY_NONE)
                top = mine if mine > top else top
            starts[m] = start
            m += top >= reach
    out = np.empty(m * _RUN, dtype=np.int64)
    j = 0
    for r in range(m):
        for i in range(starts[r], min(starts[r] + _RUN, n)):
            if allowed[i] != 0 and x[i] >= cut32:
                out[j] = i
                j += 1
    return out[:j]


@njit(cache=True, nogil=True, fastmath=_FAST)
def outside_mass(x: np.ndarray, allowed: np.ndarray, cut: float, scale: float,
                 shift: float) -> float:
    """``Σ exp(x·scale - shift)`` over the allowed tokens with ``x < cut``."""
    n = x.shape[0]
    cut32, scale32, shift32 = np.float32(cut), np.float32(scale), np.float32(shift)
    total = 0.0
    for start in range(0, n, BLOCK):
        block = np.float32(0.0)
        for i in range(start, min(start + BLOCK, n)):
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
