"""The summary-only replica compiled: the event-by-event model of campaign/sim/simulator.py, state for state, in
one Numba function (LLVM machine code, cached on disk), with the routine checkpoint cycles between random events
in closed form and the power statistics from the step curve's breakpoints.

Why compiled: a Llama 3 405B replica is thousands of events and power breakpoints, too many for a Python call
each (docs/simulation-model.md). Numba (numba.pydata.org, BSD, the standard JIT for NumPy code) compiles the same
loop; `cache=True` keeps the machine code beside this file so a CLI run loads it instead of compiling.

Helpers that only read and write arrays their caller owns are compiled with `_nrt=False` (Numba's switch for the
runtime's reference counting, numba/numba#2350): with it on, every call passing an array does an atomic incref and
decref per array argument, most of the event loop's time. Those helpers cannot allocate (Numba refuses to compile
an allocation there), so only the kernels that allocate keep the runtime.
Speed: benchmarks/results/2026-12-03-simulate.md.

The Python model stays the reference: `simulate()` (event log, sampled power) runs it, and
tests/unit/test_sim_fast.py holds this kernel to it for any setting (same counts, figures to float rounding).
Arrivals are drawn by campaign.sim.failures.draw_arrivals with NumPy's generators, exactly as the reference.
Source: campaign/sim/simulator.py (the model and its sources); Numba documentation, "Supported Python features"
and "Notes on caching"; the heap is heapq's algorithm on row numbers of an event pool (a typed list of tuples was
slower); the arrivals, known up front, are sorted once and merged with it rather than pushed into it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from campaign.sim.compile_progress import report_compiles

report_compiles()  # a first compile (once per install) says so on the terminal

# Job states, in the reference's order (simulator.py INIT .. DONE).
INIT, RUNNING, CHECKPOINT, DETECT, RESTART, WAIT_SPARE, PLANNED, DONE = range(8)
# Goodput buckets of the non-training states.
B_CHECKPOINT, B_RESTART, B_WAITING, B_RELEASED = range(4)
_BUCKET = np.array(
    [B_RESTART, -1, B_CHECKPOINT, B_RESTART, B_RESTART, B_WAITING, B_WAITING, B_RELEASED], np.int64
)
# Event kinds.
(
    E_FAILURE,
    E_DETECTED,
    E_REPAIR,
    E_PLANNED,
    E_PLANNED_END,
    E_SEGMENT_END,
    E_TARGET,
    E_CKPT_END,
    E_UPLOAD,
    E_RESTART_END,
) = range(10)

# Float parameters (P).
(
    P_WINDOW,
    P_RATE,
    P_TAU,
    P_WRITE,
    P_BG,
    P_TARGET,
    P_STOP,
    P_AMP,
    P_T0,
    P_RAMP,
    P_PLANNED_DUR,
    P_IDLE_NODE_MW,
    P_Q_K,  # quarantine: retire a node at its k-th failure within P_Q_WINDOW seconds (0: never)
    P_Q_WINDOW,
) = range(14)
N_P = 14
# Float state (F).
(
    F_NOW,
    F_SINCE,
    F_SEG_START,
    F_SEG_EFF,
    F_RUN_S,
    F_RUN_TOK,
    F_PEND_S,
    F_PEND_TOK,
    F_COMMIT_S,
    F_COMMIT_TOK,
    F_LOST_S,
    F_HOLD,
    F_NEED_RESTART,
    F_COMPLETION,
    F_REWORK_S,
    F_LOST_END_S,
    F_LAST_MW,
    F_B0,
) = range(18)
# After the four buckets: what the summarised cycles add to the curve's energy (MW s) and their largest 1-s change.
F_CYCLES_MWS = F_B0 + 4
F_CYCLES_RAMP = F_B0 + 5
# When the committed tokens first reached the target (NaN: not in the window).
F_TARGET_S = F_B0 + 6
N_F = F_B0 + 7
# A run or checkpoint segment at least this long holds a whole second wherever it starts, and a breakpoint's
# neighbouring seconds then lie inside its two segments (see _write_cycles); a hair above 2 s covers float rounding.
CYCLE_MIN_S = 2.0 + 1e-6
# Int state (S).
(
    S_STATE,
    S_IDS,
    S_SEG_ID,
    S_CKPT_ID,
    S_RESTART_ID,
    S_RAMP_BUCKET,
    S_DETECTIONS,
    S_PLANNED_STOP,
    S_FINAL,
    S_UNEXPECTED,
    S_PLANNED,
    S_CHECKPOINTS,
    S_EXHAUSTED,
    S_REWORK_N,
    S_EMPTY_N,
    S_SEQ,
    S_FREE_HEAD,
    S_FREE_N,
    S_AWAIT_HEAD,
    S_AWAIT_N,
    S_PEND_HEAD,
    S_PEND_N,
    S_HAS_POWER,
    S_HEAP_N,
    S_POWER_N,
    S_FREE_EV_N,
    S_EV_USED,
    S_ARR_NEXT,
    S_QUARANTINED,
) = range(29)
N_S = 29
DAY_S = 86_400.0
RAMP_HEADROOM = 1e-8  # campaign.sim.power.RAMP_HEADROOM (a test holds them equal)
TARGET_SLACK = 1e-9  # campaign.sim.simulator.TARGET_SLACK (a test holds them equal)


@njit(cache=True, nogil=True, _nrt=False)
def _nominal(a, t0, start, end):
    if end <= start:
        return 0.0
    if a == 0.0:
        return end - start
    w = 2.0 * math.pi / DAY_S
    return (end - start) - a / w * (math.sin(w * (end - t0)) - math.sin(w * (start - t0)))


@njit(cache=True, nogil=True, _nrt=False)
def _sines(k, h, half, phase):
    if abs(half) < 1e-12:
        return k * math.sin(phase)
    return math.sin(k * h / 2.0) / half * math.sin(phase + (k - 1) * h / 2.0)


@njit(cache=True, nogil=True, _nrt=False)
def _nominal_periodic(a, t0, first, length, period, k):
    if length <= 0.0 or k <= 0:
        return 0.0
    if a == 0.0:
        return k * length
    w = 2.0 * math.pi / DAY_S
    h = w * period
    half = math.sin(h / 2.0)
    return k * length - a / w * (
        _sines(k, h, half, w * (first + length - t0)) - _sines(k, h, half, w * (first - t0))
    )


@njit(cache=True, nogil=True, _nrt=False)
def _time_for_nominal(a, t0, start, work):
    if work <= 0.0:
        return start
    if a == 0.0:
        return start + work
    lo, hi = start + work / (1.0 + a), start + work / (1.0 - a)
    t = start + work
    for _ in range(60):
        f = _nominal(a, t0, start, t) - work
        if abs(f) < 1e-9:
            break
        if f > 0:
            hi = min(hi, t)
        else:
            lo = max(lo, t)
        t -= f / (1.0 - a * math.cos(2.0 * math.pi * (t - t0) / DAY_S))
        if not lo <= t <= hi:
            t = 0.5 * (lo + hi)
    return t


@njit(cache=True, nogil=True, _nrt=False)
def _ramp_delay(rise, ramp):
    if ramp <= 0.0 or rise <= 0.0:  # ramp <= 0 encodes "no ramp limit"
        return 0.0
    return rise / (2.0 * ramp)


@njit(cache=True, nogil=True, _nrt=False)
def _before(EF, EI, i, j):
    """Event i runs before event j: earlier time, then earlier scheduling (the reference's (t, seq) order)."""
    return EF[i, 0] < EF[j, 0] or (EF[i, 0] == EF[j, 0] and EI[i, 0] < EI[j, 0])


@njit(cache=True, nogil=True, _nrt=False)
def _sift_up(H, EF, EI, pos):
    item = H[pos]
    while pos > 0:
        parent = (pos - 1) >> 1
        if _before(EF, EI, item, H[parent]):
            H[pos] = H[parent]
            pos = parent
        else:
            break
    H[pos] = item


@njit(cache=True, nogil=True, _nrt=False)
def _sift_down(H, EF, EI, pos, n):
    item = H[pos]
    child = 2 * pos + 1
    while child < n:
        right = child + 1
        if right < n and _before(EF, EI, H[right], H[child]):
            child = right
        if _before(EF, EI, H[child], item):
            H[pos] = H[child]
            pos = child
            child = 2 * pos + 1
        else:
            break
    H[pos] = item


@njit(cache=True, nogil=True, _nrt=False)
def _push(H, EF, EI, FE, S, t, kind, a, b, c, x):
    """Schedule an event: its fields go to a free row of the pool (EF, EI), its row number onto the heap H
    (heapq's algorithm on row numbers). The pool is sized for every event a replica can hold at once."""
    S[S_SEQ] += 1
    if S[S_FREE_EV_N] > 0:
        S[S_FREE_EV_N] -= 1
        row = FE[S[S_FREE_EV_N]]
    else:
        row = S[S_EV_USED]
        if row >= EF.shape[0]:
            raise RuntimeError("campaign.sim.compiled: event pool full (a bound in run_replica is wrong)")
        S[S_EV_USED] = row + 1
    EF[row, 0] = t
    EF[row, 1] = x
    EI[row, 0] = S[S_SEQ]
    EI[row, 1] = kind
    EI[row, 2] = a
    EI[row, 3] = b
    EI[row, 4] = c
    n = S[S_HEAP_N]
    H[n] = row
    S[S_HEAP_N] = n + 1
    _sift_up(H, EF, EI, n)


@njit(cache=True, nogil=True, _nrt=False)
def _pop(H, EF, EI, FE, S):
    """Remove the next event and return its pool row (read it before the next push reuses the row)."""
    top = H[0]
    n = S[S_HEAP_N] - 1
    S[S_HEAP_N] = n
    if n > 0:
        H[0] = H[n]
        _sift_down(H, EF, EI, 0, n)
    FE[S[S_FREE_EV_N]] = top
    S[S_FREE_EV_N] += 1
    return top


@njit(cache=True, nogil=True, _nrt=False)
def _next_row(H, EF, EI, ORDER, S):
    """The next event's pool row (-1 when none): the earlier, by (time, scheduling order), of the next arrival
    (rows 0 .. n-1, sorted once in ORDER; they never enter the heap) and the heap's top (rows n and up)."""
    j = S[S_ARR_NEXT]
    if j < ORDER.size and (S[S_HEAP_N] == 0 or _before(EF, EI, ORDER[j], H[0])):
        return ORDER[j]
    return H[0] if S[S_HEAP_N] > 0 else -1


@njit(cache=True, nogil=True, _nrt=False)
def _take(H, EF, EI, FE, ORDER, S, row):
    """Remove the event _next_row gave (read its fields before the next push reuses a heap row)."""
    if row < ORDER.size:
        S[S_ARR_NEXT] += 1
    else:
        _pop(H, EF, EI, FE, S)


@njit(cache=True, nogil=True, _nrt=False)
def _next_s(H, EF, EI, ORDER, S):
    row = _next_row(H, EF, EI, ORDER, S)
    return EF[row, 0] if row >= 0 else np.inf


@njit(cache=True, nogil=True, _nrt=False)
def _facility_mw(S, P, JM, nodes):
    return (nodes - S[S_EMPTY_N]) * JM[S[S_STATE]] + S[S_FREE_N] * P[P_IDLE_NODE_MW]


@njit(cache=True, nogil=True)
def _grown(a, need):
    """`a` itself when it holds `need` rows, else a copy at least twice as long."""
    if a.size >= need:
        return a
    out = np.empty(max(need, 2 * a.size))
    out[: a.size] = a
    return out


@njit(cache=True, nogil=True, _nrt=False)
def _record_power(S, F, PT, PM, mw):
    """Append a power step when the level changed (the caller made room for one more)."""
    if S[S_HAS_POWER] == 0 or F[F_LAST_MW] != mw:
        n = S[S_POWER_N]
        PT[n] = F[F_NOW]
        PM[n] = mw
        S[S_POWER_N] = n + 1
        F[F_LAST_MW] = mw
        S[S_HAS_POWER] = 1


@njit(cache=True, nogil=True, _nrt=False)
def _segment_tokens(F, P, t):
    return P[P_RATE] * _nominal(P[P_AMP], P[P_T0], F[F_SEG_EFF], t)


@njit(cache=True, nogil=True, _nrt=False)
def _slack_tokens(P):
    """simulator._Replica._slack_tokens: tokens short of the target that still reach it."""
    return TARGET_SLACK * P[P_RATE] * P[P_TAU]


@njit(cache=True, nogil=True, _nrt=False)
def _tokens_in_progress(S, F, P):
    total = F[F_COMMIT_TOK] + F[F_RUN_TOK] + F[F_PEND_TOK]
    if S[S_STATE] == RUNNING:
        total += _segment_tokens(F, P, F[F_NOW])
    return total


@njit(cache=True, nogil=True, _nrt=False)
def _set_state(S, F, P, state, exact_tokens):
    now = F[F_NOW]
    if S[S_STATE] == RUNNING:
        ramp_s = min(now, F[F_SEG_EFF]) - F[F_SEG_START]
        if ramp_s > 0.0:
            F[F_B0 + S[S_RAMP_BUCKET]] += ramp_s
        F[F_RUN_S] += max(0.0, now - max(F[F_SEG_START], F[F_SEG_EFF]))
        F[F_RUN_TOK] += _segment_tokens(F, P, now) if math.isnan(exact_tokens) else exact_tokens
        S[S_SEG_ID] = -1
    else:
        F[F_B0 + _BUCKET[S[S_STATE]]] += now - F[F_SINCE]
    S[S_STATE] = state
    F[F_SINCE] = now


@njit(cache=True, nogil=True, _nrt=False)
def _start_running(S, F, P, JM, nodes, H, EF, EI, FE):
    before_mw = _facility_mw(S, P, JM, nodes)
    S[S_RAMP_BUCKET] = _BUCKET[S[S_STATE]]
    _set_state(S, F, P, RUNNING, np.nan)
    now = F[F_NOW]
    F[F_SEG_START] = now
    F[F_SEG_EFF] = now + _ramp_delay(_facility_mw(S, P, JM, nodes) - before_mw, P[P_RAMP])
    S[S_IDS] += 1
    S[S_SEG_ID] = S[S_IDS]
    remaining = P[P_TARGET] - _tokens_in_progress(S, F, P)
    t_checkpoint = now + max(P[P_TAU] - F[F_RUN_S], 0.0)
    if P[P_STOP] != 0.0 and _segment_tokens(F, P, t_checkpoint) >= remaining - _slack_tokens(P):
        t_target = (
            _time_for_nominal(P[P_AMP], P[P_T0], F[F_SEG_EFF], remaining / P[P_RATE])
            if remaining > 0
            else now
        )
        _push(H, EF, EI, FE, S, min(max(t_target, now), t_checkpoint), E_TARGET, S[S_SEG_ID], 0, 0, remaining)
    else:
        _push(H, EF, EI, FE, S, t_checkpoint, E_SEGMENT_END, S[S_SEG_ID], 0, 0, 0.0)


@njit(cache=True, nogil=True, _nrt=False)
def _begin_checkpoint(S, F, P, PEND, H, EF, EI, FE, exact_tokens):
    _set_state(S, F, P, CHECKPOINT, exact_tokens)
    S[S_IDS] += 1
    cap = PEND.shape[0]
    if S[S_PEND_N] >= cap:
        raise RuntimeError(
            "campaign.sim.compiled: pending snapshots overflow (a bound in compiled_inputs is wrong)"
        )
    i = (S[S_PEND_HEAD] + S[S_PEND_N]) % cap
    PEND[i, 0] = S[S_IDS]
    PEND[i, 1] = F[F_RUN_S]
    PEND[i, 2] = F[F_RUN_TOK]
    S[S_PEND_N] += 1
    F[F_PEND_S] += F[F_RUN_S]
    F[F_PEND_TOK] += F[F_RUN_TOK]
    F[F_RUN_S] = 0.0
    F[F_RUN_TOK] = 0.0
    S[S_IDS] += 1
    S[S_CKPT_ID] = S[S_IDS]
    _push(H, EF, EI, FE, S, F[F_NOW] + P[P_WRITE], E_CKPT_END, S[S_CKPT_ID], 0, 0, 0.0)


@njit(cache=True, nogil=True, _nrt=False)
def _commit(S, F, P, PEND, n):
    """Commit the oldest n pending snapshots (all when n < 0); note when the committed tokens reach the target."""
    cap = PEND.shape[0]
    count = S[S_PEND_N] if n < 0 else n
    for _ in range(count):
        h = S[S_PEND_HEAD]
        F[F_COMMIT_S] += PEND[h, 1]
        F[F_COMMIT_TOK] += PEND[h, 2]
        S[S_PEND_HEAD] = (h + 1) % cap
        S[S_PEND_N] -= 1
    if math.isnan(F[F_TARGET_S]) and F[F_COMMIT_TOK] >= P[P_TARGET] - _slack_tokens(P):
        F[F_TARGET_S] = F[F_NOW]
    if S[S_PEND_N] == 0:
        F[F_PEND_S] = 0.0
        F[F_PEND_TOK] = 0.0
    else:
        run_s = 0.0
        tokens = 0.0
        for j in range(S[S_PEND_N]):
            h = (S[S_PEND_HEAD] + j) % cap
            run_s += PEND[h, 1]
            tokens += PEND[h, 2]
        F[F_PEND_S] = run_s
        F[F_PEND_TOK] = tokens


@njit(cache=True, nogil=True, _nrt=False)
def _lose_uncommitted(S, F):
    lost_s = F[F_RUN_S] + F[F_PEND_S]
    S[S_PEND_N] = 0
    F[F_PEND_S] = 0.0
    F[F_PEND_TOK] = 0.0
    F[F_RUN_S] = 0.0
    F[F_RUN_TOK] = 0.0
    F[F_LOST_S] += lost_s
    return lost_s


@njit(cache=True, nogil=True, _nrt=False)
def _skip_cycles(S, F, P, JM, nodes, H, EF, EI, ORDER):
    """simulator._Replica._skip_cycles: whole run + checkpoint cycles before the next event, in closed form.
    Returns (k, first cycle start, run MW, checkpoint MW) for the caller to write the k cycles' power steps."""
    now = F[F_NOW]
    tau = P[P_TAU]
    period = tau + P[P_WRITE]
    horizon = min(_next_s(H, EF, EI, ORDER, S), P[P_WINDOW])
    k = math.ceil((horizon - now) / period) - 1
    if k <= 0:
        return 0, now, 0.0, 0.0
    up = nodes - S[S_EMPTY_N]
    idle_mw = S[S_FREE_N] * P[P_IDLE_NODE_MW]
    run_mw = up * JM[RUNNING] + idle_mw
    ckpt_mw = up * JM[CHECKPOINT] + idle_mw
    ramp = min(_ramp_delay(run_mw - ckpt_mw, P[P_RAMP]), tau)
    if P[P_STOP] != 0.0 or math.isnan(F[F_TARGET_S]):
        # Stop the block a cycle before the target, so the commit that reaches it runs as an event.
        remaining = P[P_TARGET] - _tokens_in_progress(S, F, P)
        most = P[P_RATE] * (tau - ramp) * (1.0 + P[P_AMP])
        if most > 0:
            fewer = np.floor(remaining / most) - 1.0  # as a float: a target of 1e30 tokens overflows an int64
            if fewer < k:
                k = np.int64(fewer)
        if k <= 0:
            return 0, now, 0.0, 0.0
    F[F_B0 + B_CHECKPOINT] += now - F[F_SINCE] + k * (P[P_WRITE] + ramp)
    F[F_COMMIT_S] += k * (tau - ramp)
    F[F_COMMIT_TOK] += P[P_RATE] * _nominal_periodic(P[P_AMP], P[P_T0], now + ramp, tau - ramp, period, k)
    S[S_CHECKPOINTS] += k
    F[F_NOW] = now + k * period
    F[F_SINCE] = F[F_NOW]
    return k, now, run_mw, ckpt_mw


@njit(cache=True, nogil=True, _nrt=False)
def _summarised(P, k, summarise):
    """Whether a block of k cycles is written as its first cycle, one long run and its last checkpoint (see
    _write_cycles) instead of two steps per cycle: only for the summary of a curve without a ramp limit."""
    return (
        summarise != 0
        and k >= 3
        and P[P_RAMP] <= 0.0
        and P[P_TAU] >= CYCLE_MIN_S
        and P[P_WRITE] >= CYCLE_MIN_S
    )


@njit(cache=True, nogil=True, _nrt=False)
def _write_cycles(S, F, P, PT, PM, first, k, run_mw, ckpt_mw, summarise):
    """The power steps of k skipped cycles from `first`: run at first + i period, checkpoint at + tau.

    Summarised (see _summarised), only cycle 0, the start of cycle 1 and the checkpoint of cycle k-1 are written,
    as if the job ran from cycle 1's start to cycle k-1's checkpoint; the 1-s statistics of what that leaves out
    are added here, exactly. Every segment lasting at least 2 s, a second next to a breakpoint lies inside the
    breakpoint's two segments, so: the left-out seconds hold the same two levels as cycle 0's (the peak and the
    minimum are unchanged); each left-out breakpoint T between levels A and B changes the 1-s series by exactly
    (1 - frac(T)) |B - A| then frac(T) |B - A| (frac(T) = T - floor(T), the share of its second before it), and
    nothing else changes; the energy left out is (k - 2) checkpoint writes at checkpoint instead of run level.
    The times are the same expressions as the full path's, so the statistics agree with it to rounding.
    """
    n = S[S_POWER_N]
    period = P[P_TAU] + P[P_WRITE]
    if not _summarised(P, k, summarise):
        for i in range(k):
            t0 = first + i * period
            PT[n + 2 * i] = t0
            PM[n + 2 * i] = run_mw
            PT[n + 2 * i + 1] = t0 + P[P_TAU]
            PM[n + 2 * i + 1] = ckpt_mw
        S[S_POWER_N] = n + 2 * k
        return
    PT[n], PM[n] = first, run_mw
    PT[n + 1], PM[n + 1] = first + P[P_TAU], ckpt_mw
    PT[n + 2], PM[n + 2] = first + period, run_mw
    PT[n + 3], PM[n + 3] = first + (k - 1) * period + P[P_TAU], ckpt_mw
    S[S_POWER_N] = n + 4
    F[F_CYCLES_MWS] += (k - 2) * P[P_WRITE] * (ckpt_mw - run_mw)
    # Left out: the checkpoints of cycles 1 .. k-2 and the run starts of cycles 2 .. k-1. The largest change at
    # T is max(1 - frac, frac) |B - A|: the nearer T is to a whole second, the larger.
    off = 0.0  # largest |frac - 1/2| so far: max(1 - frac, frac) = 1/2 + |frac - 1/2|
    for i in range(1, k - 1):
        t0 = first + i * period + P[P_TAU]
        t1 = first + (i + 1) * period
        off = max(off, max(abs(t0 - math.floor(t0) - 0.5), abs(t1 - math.floor(t1) - 0.5)))
    F[F_CYCLES_RAMP] = max(F[F_CYCLES_RAMP], (0.5 + off) * abs(ckpt_mw - run_mw))


@njit(cache=True, nogil=True, _nrt=False)
def _occupied_slot(EMPTY, slot, n):
    for k in range(n):
        s = (slot + k) % n
        if EMPTY[s] == 0:
            return s
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def _swap(S, SLOTS, EMPTY, NODESLOT, slot, node):
    SLOTS[slot] = node
    NODESLOT[node] = slot
    if EMPTY[slot] != 0:
        EMPTY[slot] = 0
        S[S_EMPTY_N] -= 1


@njit(cache=True, nogil=True, _nrt=False)
def _advance(S, F, P, JM, nodes, H, EF, EI, FE):
    state = S[S_STATE]
    if state == RUNNING or state == CHECKPOINT or state == DONE:
        return
    now = F[F_NOW]
    if now < F[F_HOLD]:
        target = PLANNED
    elif S[S_DETECTIONS] > 0:
        target = DETECT
    elif S[S_AWAIT_N] > 0:
        target = WAIT_SPARE
    elif F[F_NEED_RESTART] > 0:
        target = RESTART
    else:
        target = RUNNING
    if target == state:
        return
    if target == RUNNING:
        _start_running(S, F, P, JM, nodes, H, EF, EI, FE)
        return
    _set_state(S, F, P, target, np.nan)
    if target == RESTART:
        S[S_IDS] += 1
        S[S_RESTART_ID] = S[S_IDS]
        _push(H, EF, EI, FE, S, now + F[F_NEED_RESTART], E_RESTART_END, S[S_RESTART_ID], 0, 0, 0.0)


@njit(cache=True, nogil=True, _nrt=False)
def _note_failure(S, P, HIST, HISTN, RETIRED, node, now):
    """Quarantine (simulator._Replica._note_failure): HIST[node] rings the node's last k failure times."""
    k = np.int64(P[P_Q_K])
    if k <= 0:
        return
    HIST[node, HISTN[node] % k] = now
    HISTN[node] += 1
    if HISTN[node] >= k and now - HIST[node, HISTN[node] % k] <= P[P_Q_WINDOW]:
        RETIRED[node] = 1
        S[S_QUARANTINED] += 1


@njit(cache=True, nogil=True, _nrt=False)
def _load_arrivals(S, EF, EI, arr_t, arr_kind, arr_a, arr_b, arr_c):
    """Every arrival into the event pool's first rows, in scheduling order (ORDER sorts them by time)."""
    for i in range(arr_t.size):
        S[S_SEQ] += 1
        EF[i, 0] = arr_t[i]
        EF[i, 1] = 0.0
        EI[i, 0] = S[S_SEQ]
        EI[i, 1] = arr_kind[i]
        EI[i, 2] = arr_a[i]
        EI[i, 3] = arr_b[i]
        EI[i, 4] = arr_c[i]
    S[S_EV_USED] = arr_t.size


@njit(cache=True, nogil=True, _nrt=False)
def _run_events(
    P,
    JM,
    nodes,
    CAT,
    F,
    S,
    SLOTS,
    EMPTY,
    NODESLOT,
    RETIRED,
    HIST,
    HISTN,
    FREE,
    AWAIT,
    PEND,
    BYCAT,
    PT,
    PM,
    H,
    EF,
    EI,
    FE,
    ORDER,
    summarise,
):
    """The event loop, from where it stopped to the window's end (True), or until the power steps need more room
    than PT and PM have (False: the state is whole between two events; grow them and call again)."""
    window = P[P_WINDOW]
    period = P[P_TAU] + P[P_WRITE]
    summarised = _summarised(P, 3, summarise)
    free_cap = FREE.size
    while True:
        row = _next_row(H, EF, EI, ORDER, S)
        if row < 0 or EF[row, 0] >= window:
            return True
        # Room for this event's steps: one, and a block of skipped cycles (at most two per cycle left).
        need = S[S_POWER_N] + 6
        if not summarised:
            need += 2 * np.int64(math.ceil((window - F[F_NOW]) / period))
        if need > PT.size:
            return False
        _take(H, EF, EI, FE, ORDER, S, row)
        F[F_NOW] = EF[row, 0]
        kind = EI[row, 1]
        ev_a, ev_b, ev_c, ev_x = EI[row, 2], EI[row, 3], EI[row, 4], EF[row, 1]
        state = S[S_STATE]
        if kind == E_FAILURE:
            # A lemon's own failure (ev_c: its node) interrupts the job only while the node holds a slot.
            if state != DONE and (ev_c < 0 or NODESLOT[ev_c] >= 0):
                index = ev_a
                slot = ev_b if ev_c < 0 else NODESLOT[ev_c]
                S[S_UNEXPECTED] += 1
                BYCAT[index] += 1
                if state == RUNNING or state == CHECKPOINT:
                    _set_state(S, F, P, DETECT, np.nan)
                    F[F_REWORK_S] += _lose_uncommitted(S, F)
                    S[S_REWORK_N] += 1
                    S[S_FINAL] = 0
                    S[S_PLANNED_STOP] = 0
                node = -1
                if CAT[index, 3] != 0.0:
                    slot = _occupied_slot(EMPTY, slot, nodes)
                    if slot >= 0:
                        node = SLOTS[slot]
                        EMPTY[slot] = 1
                        S[S_EMPTY_N] += 1
                        NODESLOT[node] = -1
                        _note_failure(S, P, HIST, HISTN, RETIRED, node, F[F_NOW])
                S[S_DETECTIONS] += 1
                F[F_NEED_RESTART] = max(F[F_NEED_RESTART], CAT[index, 1])
                _push(H, EF, EI, FE, S, F[F_NOW] + CAT[index, 0], E_DETECTED, index, slot, node, 0.0)
                _advance(S, F, P, JM, nodes, H, EF, EI, FE)
        elif kind == E_DETECTED:
            index = ev_a
            slot = ev_b
            node = ev_c
            S[S_DETECTIONS] -= 1
            if slot >= 0:
                if RETIRED[node] == 0:
                    _push(H, EF, EI, FE, S, F[F_NOW] + CAT[index, 2], E_REPAIR, node, 0, 0, 0.0)
                if S[S_FREE_N] > 0:
                    h = S[S_FREE_HEAD]
                    spare = FREE[h]
                    S[S_FREE_HEAD] = (h + 1) % free_cap
                    S[S_FREE_N] -= 1
                    _swap(S, SLOTS, EMPTY, NODESLOT, slot, spare)
                else:
                    AWAIT[(S[S_AWAIT_HEAD] + S[S_AWAIT_N]) % AWAIT.size] = slot
                    S[S_AWAIT_N] += 1
                    S[S_EXHAUSTED] += 1
            _advance(S, F, P, JM, nodes, H, EF, EI, FE)
        elif kind == E_REPAIR:
            node = ev_a
            if S[S_AWAIT_N] > 0:
                h = S[S_AWAIT_HEAD]
                slot = AWAIT[h]
                S[S_AWAIT_HEAD] = (h + 1) % AWAIT.size
                S[S_AWAIT_N] -= 1
                _swap(S, SLOTS, EMPTY, NODESLOT, slot, node)
                _advance(S, F, P, JM, nodes, H, EF, EI, FE)
            else:
                FREE[(S[S_FREE_HEAD] + S[S_FREE_N]) % free_cap] = node
                S[S_FREE_N] += 1
        elif kind == E_PLANNED:
            if state != DONE:
                duration = P[P_PLANNED_DUR]
                S[S_PLANNED] += 1
                F[F_HOLD] = max(F[F_HOLD], F[F_NOW] + duration)
                _push(H, EF, EI, FE, S, F[F_NOW] + duration, E_PLANNED_END, 0, 0, 0, 0.0)
                if state == RUNNING:
                    S[S_PLANNED_STOP] = 1
                    _begin_checkpoint(S, F, P, PEND, H, EF, EI, FE, np.nan)
                elif state == CHECKPOINT:
                    S[S_PLANNED_STOP] = 0 if S[S_FINAL] != 0 else 1
                else:
                    _advance(S, F, P, JM, nodes, H, EF, EI, FE)
        elif kind == E_PLANNED_END:
            if not (state == DONE or F[F_NOW] < F[F_HOLD] or S[S_PLANNED_STOP] != 0):
                _advance(S, F, P, JM, nodes, H, EF, EI, FE)
        elif kind == E_SEGMENT_END:
            if state == RUNNING and ev_a == S[S_SEG_ID]:
                _begin_checkpoint(S, F, P, PEND, H, EF, EI, FE, np.nan)
        elif kind == E_TARGET:
            if state == RUNNING and ev_a == S[S_SEG_ID]:
                S[S_FINAL] = 1
                _begin_checkpoint(S, F, P, PEND, H, EF, EI, FE, ev_x)
        elif kind == E_CKPT_END:
            if state == CHECKPOINT and ev_a == S[S_CKPT_ID]:
                S[S_CHECKPOINTS] += 1
                if S[S_FINAL] != 0:
                    _commit(S, F, P, PEND, -1)
                    _set_state(S, F, P, DONE, np.nan)
                    F[F_COMPLETION] = F[F_NOW]
                    if math.isnan(F[F_TARGET_S]):  # the last checkpoint holds the target, up to rounding
                        F[F_TARGET_S] = F[F_NOW]
                elif S[S_PLANNED_STOP] != 0:
                    S[S_PLANNED_STOP] = 0
                    _commit(S, F, P, PEND, -1)
                    _set_state(S, F, P, PLANNED, np.nan)
                    _advance(S, F, P, JM, nodes, H, EF, EI, FE)
                else:
                    last = (S[S_PEND_HEAD] + S[S_PEND_N] - 1) % PEND.shape[0]
                    snapshot_id = np.int64(PEND[last, 0])
                    if P[P_BG] > 0:
                        _push(H, EF, EI, FE, S, F[F_NOW] + P[P_BG], E_UPLOAD, snapshot_id, 0, 0, 0.0)
                    else:
                        _commit(S, F, P, PEND, 1)
                        k, first, run_mw, ckpt_mw = _skip_cycles(S, F, P, JM, nodes, H, EF, EI, ORDER)
                        if k > 0:
                            _write_cycles(S, F, P, PT, PM, first, k, run_mw, ckpt_mw, summarise)
                    _start_running(S, F, P, JM, nodes, H, EF, EI, FE)
        elif kind == E_UPLOAD:
            if S[S_PEND_N] > 0 and np.int64(PEND[S[S_PEND_HEAD], 0]) == ev_a:
                _commit(S, F, P, PEND, 1)
        elif kind == E_RESTART_END and state == RESTART and ev_a == S[S_RESTART_ID]:
            F[F_NEED_RESTART] = 0.0
            _start_running(S, F, P, JM, nodes, H, EF, EI, FE)
        _record_power(S, F, PT, PM, _facility_mw(S, P, JM, nodes))


@njit(cache=True, nogil=True)
def run_replica(P, JM, nodes, spare_nodes, CAT, arr_t, arr_kind, arr_a, arr_b, arr_c, pend_cap, summarise):
    """One replica. P: float parameters; JM: facility MW per job node in each state; CAT: per failure category
    (detect_s, restart_s, repair_s, loses a node); arrivals in scheduling order (kind E_PLANNED or E_FAILURE,
    a = category, b = slot, c = the physical node a lemon's own failure hits, else -1). Returns (F, S, by_category, power times, power MW). With `summarise` (only for
    the summary, never for the curve itself) blocks of skipped cycles write four power steps, not two per cycle,
    and F[F_CYCLES_MWS], F[F_CYCLES_RAMP] hold what the left-out steps add to the statistics (_write_cycles).
    This shell allocates; the work is in helpers without reference counting (see the module's docstring)."""
    F = np.zeros(N_F)
    S = np.zeros(N_S, np.int64)
    F[F_COMPLETION] = np.nan
    F[F_TARGET_S] = np.nan
    F[F_HOLD] = -np.inf
    S[S_SEG_ID] = -1
    S[S_CKPT_ID] = -1
    S[S_RESTART_ID] = -1
    S[S_RAMP_BUCKET] = B_RESTART
    S[S_SEQ] = -1
    SLOTS = np.arange(nodes)
    EMPTY = np.zeros(nodes, np.int8)
    # Node identities: the slot each node holds (-1: a spare, in repair or retired), and the quarantine's records.
    NODESLOT = np.full(nodes + spare_nodes, -1, np.int64)
    NODESLOT[:nodes] = SLOTS
    RETIRED = np.zeros(nodes + spare_nodes, np.int8)
    quarantine_k = np.int64(P[P_Q_K])
    HIST = np.zeros((nodes + spare_nodes if quarantine_k > 0 else 1, quarantine_k if quarantine_k > 0 else 1))
    HISTN = np.zeros(HIST.shape[0], np.int64)
    FREE = np.zeros(nodes + spare_nodes + 1, np.int64)
    FREE[:spare_nodes] = np.arange(nodes, nodes + spare_nodes)
    S[S_FREE_N] = spare_nodes
    AWAIT = np.zeros(nodes + 1, np.int64)
    PEND = np.zeros((pend_cap, 3))
    BYCAT = np.zeros(CAT.shape[0], np.int64)
    # Power steps: one per event at most plus a block's; sized for the usual count (two per cycle of the window
    # unless summarised, eight per arrival), grown when the next event might not fit.
    cycles = 0.0 if _summarised(P, 3, summarise) else P[P_WINDOW] / (P[P_TAU] + P[P_WRITE])
    PT = np.empty(np.int64(2.0 * min(cycles, 1e7)) + 8 * arr_t.size + 1024)
    PM = np.empty(PT.size)
    # The pool holds every arrival (its first rows, outside the heap), and per arrival at most a detection, a
    # repair, a maintenance end and a stale segment, checkpoint or restart event in the heap; plus the snapshots
    # uploading; plus slack.
    cap = 5 * arr_t.size + pend_cap + 64
    EF = np.empty((cap, 2))
    EI = np.empty((cap, 5), np.int64)
    H = np.empty(cap, np.int64)
    FE = np.empty(cap, np.int64)
    _load_arrivals(S, EF, EI, arr_t, arr_kind, arr_a, arr_b, arr_c)
    ORDER = np.argsort(arr_t, kind="mergesort")  # stable: equal times keep their scheduling order
    _start_running(S, F, P, JM, nodes, H, EF, EI, FE)
    _record_power(S, F, PT, PM, _facility_mw(S, P, JM, nodes))
    while not _run_events(
        P,
        JM,
        nodes,
        CAT,
        F,
        S,
        SLOTS,
        EMPTY,
        NODESLOT,
        RETIRED,
        HIST,
        HISTN,
        FREE,
        AWAIT,
        PEND,
        BYCAT,
        PT,
        PM,
        H,
        EF,
        EI,
        FE,
        ORDER,
        summarise,
    ):
        PT = _grown(PT, 2 * PT.size)
        PM = _grown(PM, PT.size)
    F[F_NOW] = max(F[F_NOW], P[P_WINDOW])
    # _finish
    _set_state(S, F, P, DONE if S[S_STATE] == DONE else INIT, np.nan)
    if math.isnan(F[F_COMPLETION]):
        F[F_LOST_END_S] = _lose_uncommitted(S, F)
    return F, S, BYCAT, PT[: S[S_POWER_N]].copy(), PM[: S[S_POWER_N]].copy()


# ----------------------------------------------------------------------------------------------- power curve


@njit(cache=True, nogil=True)
def coalesce(t, mw):
    """power._coalesce: the last level at each time, levels equal to the one before dropped."""
    n = t.size
    keep_t = np.empty(n)
    keep_mw = np.empty(n)
    m = 0
    for i in range(n):
        if i + 1 < n and t[i + 1] == t[i]:
            continue
        if m > 0 and keep_mw[m - 1] == mw[i]:
            continue
        keep_t[m] = t[i]
        keep_mw[m] = mw[i]
        m += 1
    return keep_t[:m].copy(), keep_mw[:m].copy()


@njit(cache=True, nogil=True)
def rate_limited(t, mw, end_s, ramp, start_mw):
    """power.rate_limited_curve on a coalesced step function: (times, levels, slopes); `ramp` is the limit, held
    with power.RAMP_HEADROOM as there."""
    ramp = ramp * (1.0 - RAMP_HEADROOM)
    n = t.size
    out_t = np.empty(2 * n)
    out_mw = np.empty(2 * n)
    out_slope = np.empty(2 * n)
    m = 0
    y = start_mw
    for i in range(n):
        a = t[i]
        b = t[i + 1] if i + 1 < n else end_s
        level = mw[i]
        if b <= a:
            continue
        if y == level:
            out_t[m], out_mw[m], out_slope[m] = a, y, 0.0
            m += 1
            continue
        slope = math.copysign(ramp, level - y)
        reach_s = abs(level - y) / ramp
        out_t[m], out_mw[m], out_slope[m] = a, y, slope
        m += 1
        if a + reach_s < b:
            out_t[m], out_mw[m], out_slope[m] = a + reach_s, level, 0.0
            m += 1
            y = level
        else:
            y += slope * (b - a)
    return out_t[:m].copy(), out_mw[:m].copy(), out_slope[:m].copy()


@njit(cache=True, nogil=True, _nrt=False)
def _second_value(t, mw, slope, end_s, lo, hi, k):
    """Mean MW over [lo, hi], segment k holding lo: the level at the midpoint inside one segment, else the
    pieces' integrals (stable however short the interval)."""
    n = t.size
    if k + 1 >= n or t[k + 1] >= hi:
        return mw[k] + slope[k] * ((lo - t[k]) + 0.5 * (hi - lo))
    total = 0.0
    a = lo
    j = k
    while a < hi:
        b = min(hi, t[j + 1]) if j + 1 < n else hi
        if b > a:
            total += (b - a) * (mw[j] + slope[j] * ((a - t[j]) + 0.5 * (b - a)))
        a = b
        j += 1
    return total / (hi - lo)


@njit(cache=True, nogil=True, _nrt=False)
def curve_stats(t, mw, slope, end_s):
    """power.power_stats_from_curve: (peak, min, largest 1-s change, energy MWh) of the 1-s series, from the
    seconds next to each breakpoint (their extremes and steps are there) and the sloped segments."""
    n_seg = t.size
    energy = 0.0
    for i in range(n_seg):
        length = (t[i + 1] if i + 1 < n_seg else end_s) - t[i]
        energy += mw[i] * length + 0.5 * slope[i] * length**2
    n = math.ceil(end_s)
    peak, low, ramp = -np.inf, np.inf, 0.0
    last_c = -2
    last_v = 0.0
    k = 0  # segment holding the candidate second's start
    for p in range(n_seg + 1):
        point = t[p] if p < n_seg else end_s
        base = math.floor(point)
        for c in range(base - 1, base + 2):
            if c <= last_c or c < 0 or c >= n:
                continue
            lo = float(c)
            hi = min(lo + 1.0, end_s)
            while k + 1 < n_seg and t[k + 1] <= lo:
                k += 1
            v = _second_value(t, mw, slope, end_s, lo, hi, k)
            peak = max(peak, v)
            low = min(low, v)
            if c == last_c + 1:
                ramp = max(ramp, abs(v - last_v))
            last_c, last_v = c, v
    for i in range(n_seg):
        if slope[i] != 0.0:
            end = t[i + 1] if i + 1 < n_seg else end_s
            if math.floor(end) - math.ceil(t[i]) >= 2.0:
                ramp = max(ramp, abs(slope[i]))
    return peak, low, ramp, energy / 3600.0


# ----------------------------------------------------------------------------------------------- random streams
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


@njit(cache=True, nogil=True)
def replica_summary(P, JM, nodes, spare_nodes, CAT, arr_t, arr_kind, arr_a, arr_b, arr_c, pend_cap, start_mw):
    """One replica's tallies and power statistics in one call: run_replica with its cycles summarised, the
    step curve coalesced (rate-limited from `start_mw` under a ramp limit) and its statistics. Returns
    (F, S, by_category, [peak MW, min MW, largest 1-s change MW, energy MWh])."""
    F, S, BYCAT, PT, PM = run_replica(
        P, JM, nodes, spare_nodes, CAT, arr_t, arr_kind, arr_a, arr_b, arr_c, pend_cap, 1
    )
    t, mw = coalesce(PT, PM)
    if P[P_RAMP] > 0.0:
        t, mw, slope = rate_limited(t, mw, P[P_WINDOW], P[P_RAMP], start_mw)
    else:
        slope = np.zeros(t.size)
    peak, low, ramp, energy_mwh = curve_stats(t, mw, slope, P[P_WINDOW])
    stats = np.empty(4)
    stats[0], stats[1] = peak, low
    stats[2] = max(ramp, F[F_CYCLES_RAMP])
    stats[3] = energy_mwh + F[F_CYCLES_MWS] / 3600.0
    return F, S, BYCAT, stats


def warm() -> float:
    """Compile (first use after install or a change to this file) or load from the cache every kernel, with the
    argument types the simulator passes; returns the seconds it took. `make install` calls it once."""
    import time

    started = time.perf_counter()
    P = np.zeros(N_P)
    P[P_WINDOW], P[P_RATE], P[P_TAU], P[P_WRITE], P[P_TARGET], P[P_RAMP] = (
        3600.0,
        1.0,
        600.0,
        10.0,
        1e30,
        -1.0,
    )
    JM = np.full(8, 0.01)
    CAT = np.array([[60.0, 600.0, 7200.0, 1.0]])
    arrivals = np.array([100.0, 2000.0])
    kinds = np.array([E_PLANNED, E_FAILURE], np.int64)
    arrival_args = (CAT, arrivals, kinds, np.zeros(2, np.int64), np.array([-1, 0]), np.array([-1, -1]), 10)
    _, _, _, t, mw = run_replica(P, JM, 2, 1, *arrival_args, 0)
    replica_summary(P, JM, 2, 1, *arrival_args, 0.0)
    t, mw = coalesce(t, mw)
    pcg64_stream_states(np.array([405, 0], np.uint64), 3)
    curve_stats(t, mw, np.zeros_like(mw), 3600.0)
    curve_stats(*rate_limited(t, mw, 3600.0, 0.5, 0.0), 3600.0)
    return time.perf_counter() - started
