"""The largest 1-s change of the Llama 3 window's power under a 1.0 MW/s ramp limit, from the series and both models' statistics."""

import time

import numpy as np

from campaign.config import load_config
from campaign.sim.fast import simulate_curve, simulate_summary
from campaign.sim.power import one_second_series, power_stats_from_curve
from campaign.window import window_inputs

c = load_config("configs/campaigns/llama3-405b.yaml", ["plan.power_smoothing.ramp_mw_per_s=1.0"]).config
x = window_inputs(c)
t = time.time()
s, curve = simulate_curve(x, 0)
series = one_second_series(curve)
d = np.abs(np.diff(series))
print("series max", repr(d.max()), "over", int((d > 1.0).sum()), "of", series.size)
print(
    "stats",
    repr(power_stats_from_curve(curve)["max_ramp_mw_per_s"]),
    "summary",
    repr(s["power_mw"]["max_ramp_mw_per_s"]),
)
print("fast summary", repr(simulate_summary(x, 0).power_mw["max_ramp_mw_per_s"]), time.time() - t)
