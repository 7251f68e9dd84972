SELECT t_s / 86400.0 AS day, power_mw
FROM sim_power
WHERE commitment_id = $commitment_id AND replica = $replica
ORDER BY t_s
