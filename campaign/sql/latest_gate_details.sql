-- The details of one gate in the newest validate run recorded for this config digest, whatever its data digest
-- (commit compares the files that gate read then with the files now, to name the one that changed).
SELECT details
FROM gates
WHERE config_digest = $1 AND gate = $2
ORDER BY checked_at DESC, run_id DESC
LIMIT 1
