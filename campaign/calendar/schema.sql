-- The calendar of one cluster: who holds how many of its nodes when. Bookings are never deleted: a cancel or an
-- execute updates the booking's status (and actual end) and appends a row to booking_events with the reason.
CREATE TABLE IF NOT EXISTS calendar_meta (
    schema_version INTEGER NOT NULL,
    cluster VARCHAR NOT NULL,
    topology_digest VARCHAR NOT NULL,
    topology JSON NOT NULL,
    total_nodes INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
-- Prices used to cost idle gaps; a booking with prices that differ from the newest row appends a new row.
CREATE TABLE IF NOT EXISTS prices (
    valid_from TIMESTAMPTZ NOT NULL,
    gpus_per_node INTEGER NOT NULL,
    gpu_hour_usd DOUBLE NOT NULL,
    energy_usd_per_mwh DOUBLE NOT NULL,
    idle_node_w DOUBLE NOT NULL,
    recorded_by VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS bookings (
    booking_id VARCHAR PRIMARY KEY,
    commitment_id VARCHAR NOT NULL,       -- the workspace's commitment (m-... for maintenance)
    kind VARCHAR NOT NULL,                -- campaign, maintenance
    campaign VARCHAR NOT NULL,
    workspace VARCHAR,
    config_digest VARCHAR,
    data_digest VARCHAR,
    nodes INTEGER NOT NULL,
    start_at TIMESTAMPTZ NOT NULL,
    end_at TIMESTAMPTZ NOT NULL,
    actual_end TIMESTAMPTZ,               -- set by execute: the job's real end; the rest of the window is released
    status VARCHAR NOT NULL,              -- held (awaiting approval), booked, executed, cancelled
    note VARCHAR,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS booking_events (
    booking_id VARCHAR NOT NULL,
    event VARCHAR NOT NULL,               -- held, booked, executed, cancelled, hold released
    event_at TIMESTAMPTZ NOT NULL,
    detail VARCHAR
);
