-- The executed replica to analyse: the newest commitment that has a simulated window.
SELECT r.commitment_id, r.replica, r.seed, r.summary, c.window_start, c.window_end, c.config_digest, c.data_digest
FROM sim_replicas r JOIN commitments c USING (commitment_id)
ORDER BY r.created_at DESC, r.replica
LIMIT 1
