-- The window to analyse: the one the newest execute run executed (or reused).
SELECT r.commitment_id, r.replica, r.seed, r.summary, c.window_start, c.window_end, c.config_digest, c.data_digest
FROM executions e
JOIN sim_replicas r ON r.commitment_id = e.commitment_id AND r.replica = e.replica
JOIN commitments c ON c.commitment_id = e.commitment_id
ORDER BY e.executed_at DESC, e.run_id DESC
LIMIT 1
