-- Every booking of the calendar (cancelled ones too: they are on record), oldest first.
SELECT booking_id, commitment_id, kind, campaign, nodes, start_at, end_at, status, actual_end, workspace,
       config_digest, data_digest, coalesce(note, ''), created_at
FROM bookings
ORDER BY start_at, created_at, booking_id
