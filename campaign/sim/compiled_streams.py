"""The replicas' random streams' states compiled: NumPy's SeedSequence children and their PCG64 states, without
building the Python objects (campaign.sim.failures.stream_states reads them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from campaign.sim.compile_progress import report_compiles

report_compiles()  # a first compile (once per install) says so on the terminal (failures.py imports this first)

# NumPy's SeedSequence (NEP 19: its output is stable across NumPy versions) and PCG64's seeding, computed without
# building 19 SeedSequence and PCG64 objects per replica (~0.15 ms of Python). Source: numpy/random/bit_generator.pyx
# (SeedSequence: hashmix, mix, mix_entropy, generate_state) and O'Neill's PCG (pcg_setseq_128_srandom_r), the
# algorithms re-stated here; tests/unit/test_sim_streams.py holds every state to NumPy's own.
_M32 = np.uint64(0xFFFFFFFF)
_INIT_A, _MULT_A = np.uint64(0x43B0D7E5), np.uint64(0x931E8875)
_INIT_B, _MULT_B = np.uint64(0x8B51F9DD), np.uint64(0x58F38DED)
_MIX_L, _MIX_R = np.uint64(0xCA01F9DD), np.uint64(0x4973F715)
_PCG_MULT_HI, _PCG_MULT_LO = np.uint64(0x2360ED051FC65DA4), np.uint64(0x4385DF649FCCF645)
_U16, _U32, _U1 = np.uint64(16), np.uint64(32), np.uint64(1)


@njit(cache=True, nogil=True, _nrt=False)
def _hashmix(value, h):
    """(mixed value, next hash constant), both 32-bit words held in uint64."""
    value ^= h
    h = (h * _MULT_A) & _M32
    value = (value * h) & _M32
    return value ^ (value >> _U16), h


@njit(cache=True, nogil=True, _nrt=False)
def _mix(x, y):
    r = (_MIX_L * x - _MIX_R * y) & _M32
    return r ^ (r >> _U16)


@njit(cache=True, nogil=True, _nrt=False)
def _mulhi64(a, b):
    """The high 64 bits of the 128-bit product a b."""
    a_lo, a_hi = a & _M32, a >> _U32
    b_lo, b_hi = b & _M32, b >> _U32
    lo_lo = a_lo * b_lo
    mid1 = a_hi * b_lo + (lo_lo >> _U32)
    mid2 = a_lo * b_hi + (mid1 & _M32)
    return a_hi * b_hi + (mid1 >> _U32) + (mid2 >> _U32)


@njit(cache=True, nogil=True, _nrt=False)
def _pcg_step(s_hi, s_lo, i_hi, i_lo):
    """state x multiplier + increment, modulo 2^128, as (high, low) words."""
    lo = s_lo * _PCG_MULT_LO
    hi = _mulhi64(s_lo, _PCG_MULT_LO) + s_hi * _PCG_MULT_LO + s_lo * _PCG_MULT_HI
    new_lo = lo + i_lo
    carry = _U1 if new_lo < lo else np.uint64(0)
    return hi + i_hi + carry, new_lo


@njit(cache=True, nogil=True)
def pcg64_stream_states(entropy, n_children):
    """PCG64 state of each child of SeedSequence(entropy words).spawn(n_children), as rows (state high, state low,
    increment high, increment low). `entropy`: the run entropy as 32-bit words (uint64 array), lowest first."""
    out = np.empty((n_children, 4), np.uint64)
    words = np.zeros(
        max(entropy.size, 4) + 1, np.uint64
    )  # the run entropy padded to the pool, then the spawn key
    words[: entropy.size] = entropy
    pool = np.empty(4, np.uint64)
    seed = np.empty(4, np.uint64)
    for child in range(n_children):
        words[-1] = np.uint64(child)  # a spawn key below 2^32 is one word
        h = _INIT_A
        for i in range(4):
            pool[i], h = _hashmix(words[i], h)
        for src in range(4):
            for dst in range(4):
                if src != dst:
                    v, h = _hashmix(pool[src], h)
                    pool[dst] = _mix(pool[dst], v)
        for src in range(4, words.size):
            for dst in range(4):
                v, h = _hashmix(words[src], h)
                pool[dst] = _mix(pool[dst], v)
        h = _INIT_B
        for i in range(4):  # generate_state(4, uint64): eight 32-bit words, little-endian pairs
            pair = np.uint64(0)
            for half in range(2):
                v = pool[(2 * i + half) % 4] ^ h
                h = (h * _MULT_B) & _M32
                v = (v * h) & _M32
                v ^= v >> _U16
                pair |= v << np.uint64(32 * half)
            seed[i] = pair
        # pcg_setseq_128_srandom_r(initstate = seed[0]:seed[1], initseq = seed[2]:seed[3])
        i_hi = (seed[2] << _U1) | (seed[3] >> np.uint64(63))
        i_lo = (seed[3] << _U1) | _U1
        s_hi, s_lo = _pcg_step(np.uint64(0), np.uint64(0), i_hi, i_lo)
        lo = s_lo + seed[1]
        s_hi = s_hi + seed[0] + (_U1 if lo < s_lo else np.uint64(0))
        s_hi, s_lo = _pcg_step(s_hi, lo, i_hi, i_lo)
        out[child, 0], out[child, 1], out[child, 2], out[child, 3] = s_hi, s_lo, i_hi, i_lo
    return out
