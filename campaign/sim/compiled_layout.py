"""The compiled kernel's memory layout: its job states, goodput buckets, event kinds and the indices of its float
parameters (P), float state (F) and int state (S) arrays; plain integers that Numba reads as compile-time constants.

campaign/sim/compiled.py and its helpers index their arrays with these names; campaign/sim/fast.py packs the
parameters with them. A change here changes every kernel: compiled.py drops its cached machine code when this
file changes (Numba's cache sees only the file a function is in).
"""

from __future__ import annotations

import numpy as np

# Job states, in the reference's order (simulator.py INIT .. DONE).
INIT, RUNNING, CHECKPOINT, DETECT, RESTART, WAIT_SPARE, PLANNED, DONE = range(8)
# Goodput buckets of the non-training states.
B_CHECKPOINT, B_RESTART, B_WAITING, B_RELEASED = range(4)
BUCKET_OF_STATE = np.array(
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
TARGET_SLACK = 1e-9  # campaign.sim.simulator.TARGET_SLACK (a test holds them equal)
