-- Every booking of the calendar (cancelled ones too: they are on record), oldest first.
-- Columns named as the fields of campaign.calendar.timeline.Booking (read by name).
SELECT booking_id, commitment_id, kind, campaign, nodes, start_at AS start, end_at AS "end", status, actual_end,
       workspace, config_digest, data_digest, coalesce(note, '') AS note, created_at
FROM bookings
ORDER BY start_at, created_at, booking_id
