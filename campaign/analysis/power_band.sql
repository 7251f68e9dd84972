-- Facility power for the report's whole-window band: the per-minute means of the sampled series, then the min,
-- mean and max of those minutes in each bin of $bin_s seconds (a whole number of minutes), one row per bin.
WITH minute AS (
    SELECT floor(t_s / 60.0) AS minute, avg(power_mw) AS power_mw
    FROM sim_power
    WHERE commitment_id = $commitment_id AND replica = $replica
    GROUP BY ALL
)
SELECT min(minute) * 60.0 / 86400.0 AS day, min(power_mw) AS min_mw, avg(power_mw) AS mean_mw,
       max(power_mw) AS max_mw
FROM minute
GROUP BY floor(minute * 60.0 / $bin_s)
ORDER BY day
