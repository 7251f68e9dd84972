-- Facility power of the sampled series: level, spread, energy and the largest step between samples.
WITH p AS (
    SELECT t_s, power_mw,
           t_s - lag(t_s) OVER (ORDER BY t_s) AS dt_s,
           power_mw - lag(power_mw) OVER (ORDER BY t_s) AS dp_mw
    FROM sim_power
    WHERE commitment_id = $commitment_id AND replica = $replica
)
-- Sums are ordered by time so that the result is the same to the last bit on every run (parallel sums are not).
SELECT max(power_mw) AS peak_mw,
       avg(power_mw ORDER BY t_s) AS mean_mw,
       min(power_mw) AS min_mw,
       -- uniform samples, each the mean over the interval that starts at t_s
       sum(power_mw ORDER BY t_s) * (max(t_s) - min(t_s)) / greatest(count(*) - 1, 1) / 3600.0 AS energy_mwh_sampled,
       max(abs(dp_mw) / dt_s) AS max_sampled_ramp_mw_per_s,
       count(*) AS n_samples
FROM p
