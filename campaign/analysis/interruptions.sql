-- Interruptions by category: unexpected failures and planned maintenance.
SELECT kind, coalesce(nullif(category, ''), kind) AS category, count(*) AS n
FROM sim_events
WHERE commitment_id = $commitment_id AND replica = $replica AND kind IN ('failure', 'planned_start')
GROUP BY ALL
ORDER BY n DESC, category
