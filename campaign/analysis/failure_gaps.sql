-- Time between consecutive unexpected failures, for the observed job MTBF.
SELECT count(*) AS n_failures, min(t_s) AS first_s, max(t_s) AS last_s
FROM sim_events
WHERE commitment_id = $commitment_id AND replica = $replica AND kind = 'failure'
