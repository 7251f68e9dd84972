-- The gates of the newest validate run recorded for exactly these (config digest, data digest).
-- Every validate run records all of its gates with one checked_at; the newest run's verdict is the one that counts.
WITH newest AS (
    SELECT run_id
    FROM gates
    WHERE config_digest = $1 AND data_digest = $2
    ORDER BY checked_at DESC, run_id DESC
    LIMIT 1
)
SELECT gate, passed, config_digest, data_digest, details, run_id, checked_at
FROM gates
WHERE run_id = (SELECT run_id FROM newest)
ORDER BY gate
