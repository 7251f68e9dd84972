-- Tokens trained at each event, for the progress plot.
SELECT t_s / 86400.0 AS day, tokens_trained
FROM sim_events
WHERE commitment_id = $commitment_id AND replica = $replica
ORDER BY event_id
