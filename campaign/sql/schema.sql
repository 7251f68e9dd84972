-- The workspace catalog. Stages append; a stage's result rows go in with one transaction, keyed so that a
-- rerun with the same inputs (config digest, data digest) adds nothing; every validate run records its own verdict.
CREATE TABLE IF NOT EXISTS schema_meta (
    version INTEGER NOT NULL,
    migrated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    stage VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,          -- running, completed, failed, refused, abandoned, reused
    config_digest VARCHAR,
    data_digest VARCHAR,
    pid INTEGER,
    message VARCHAR
);
CREATE TABLE IF NOT EXISTS datasets (
    data_digest VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    file VARCHAR NOT NULL,
    n_input BIGINT NOT NULL,
    n_documents BIGINT NOT NULL,
    n_rejected BIGINT NOT NULL,
    n_tokens BIGINT NOT NULL,
    n_bytes BIGINT NOT NULL,
    sha256 VARCHAR NOT NULL,
    tokenizer VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (data_digest, source)
);
CREATE TABLE IF NOT EXISTS rejections (
    data_digest VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    n_documents BIGINT NOT NULL,
    PRIMARY KEY (data_digest, source, reason)
);
-- Prepare's removal table: documents, characters and tokens removed per source and reason, in pipeline
-- order (position); tokens_exact is false where tokens were estimated (documents not tokenized).
CREATE TABLE IF NOT EXISTS removals (
    data_digest VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    position INTEGER NOT NULL,
    step VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    n_documents BIGINT NOT NULL,
    n_chars BIGINT NOT NULL,
    n_tokens BIGINT NOT NULL,
    tokens_exact BOOLEAN NOT NULL,
    PRIMARY KEY (data_digest, source, reason)
);
CREATE TABLE IF NOT EXISTS gates (
    run_id VARCHAR NOT NULL,
    gate VARCHAR NOT NULL,
    passed BOOLEAN NOT NULL,
    config_digest VARCHAR NOT NULL,
    data_digest VARCHAR NOT NULL,
    details JSON,
    checked_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, gate)
);
CREATE TABLE IF NOT EXISTS commitments (
    commitment_id VARCHAR PRIMARY KEY,
    window_start TIMESTAMPTZ NOT NULL,
    window_end TIMESTAMPTZ NOT NULL,
    config_digest VARCHAR NOT NULL,
    data_digest VARCHAR NOT NULL,
    approved_by VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (config_digest, data_digest)
);
-- The committed config, inside the trust root (commitments/<id>.json is a copy for people to read).
ALTER TABLE commitments ADD COLUMN IF NOT EXISTS config_json VARCHAR;
-- What the approver wrote when saying yes ('' for an automatic approval; a rejection books nothing).
ALTER TABLE commitments ADD COLUMN IF NOT EXISTS approval_comment VARCHAR;
CREATE TABLE IF NOT EXISTS sim_replicas (
    commitment_id VARCHAR NOT NULL,
    replica INTEGER NOT NULL,
    seed BIGINT NOT NULL,
    ettr DOUBLE NOT NULL,
    tokens_trained DOUBLE NOT NULL,
    completed BOOLEAN NOT NULL,
    summary JSON NOT NULL,
    run_id VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (commitment_id, replica)
);
CREATE TABLE IF NOT EXISTS sim_events (
    commitment_id VARCHAR NOT NULL,
    replica INTEGER NOT NULL,
    event_id BIGINT NOT NULL,
    t_s DOUBLE NOT NULL,
    kind VARCHAR NOT NULL,
    category VARCHAR,
    scope VARCHAR,
    node INTEGER,
    tokens_trained DOUBLE,
    detail VARCHAR,
    PRIMARY KEY (commitment_id, replica, event_id)
);
CREATE TABLE IF NOT EXISTS sim_power (
    commitment_id VARCHAR NOT NULL,
    replica INTEGER NOT NULL,
    t_s DOUBLE NOT NULL,
    power_mw DOUBLE NOT NULL,
    PRIMARY KEY (commitment_id, replica, t_s)
);
-- Every execute run and the window it ran (a rerun that reuses a simulated window is recorded too), so analyse
-- reports the window executed last, not whichever replica happens to be newest.
CREATE TABLE IF NOT EXISTS executions (
    run_id VARCHAR PRIMARY KEY,
    commitment_id VARCHAR NOT NULL,
    replica INTEGER NOT NULL,
    reused BOOLEAN NOT NULL,
    executed_at TIMESTAMPTZ NOT NULL
);
-- One row per grid point of a `campaign simulate --sweep` (campaign/sim/sweeps.py); a rerun of the same sweep
-- (same config digest, axes, replicas and seed) adds nothing.
CREATE TABLE IF NOT EXISTS sim_sweeps (
    sweep_id VARCHAR NOT NULL,
    point INTEGER NOT NULL,
    config_digest VARCHAR NOT NULL,
    seed BIGINT NOT NULL,
    replicas INTEGER NOT NULL,
    sweep_values JSON NOT NULL,
    ettr_mean DOUBLE NOT NULL,
    ettr_p10 DOUBLE NOT NULL,
    ettr_p90 DOUBLE NOT NULL,
    window_utilisation_mean DOUBLE NOT NULL,
    completion_days_p10 DOUBLE,
    completion_days_p50 DOUBLE,
    completion_days_p90 DOUBLE,
    p_complete_in_window DOUBLE NOT NULL,
    energy_mwh DOUBLE NOT NULL,
    cost_usd DOUBLE NOT NULL,
    is_best BOOLEAN NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    target_days_p90 DOUBLE,  -- the day by which 90% of the replicas reached the target (NULL: fewer did)
    p_target_in_window DOUBLE,  -- the share of replicas that reached the target inside the window (the ranking)
    PRIMARY KEY (sweep_id, point)
);
-- A catalog written before the target columns existed gets them (NULL for its older sweeps).
ALTER TABLE sim_sweeps ADD COLUMN IF NOT EXISTS target_days_p90 DOUBLE;
ALTER TABLE sim_sweeps ADD COLUMN IF NOT EXISTS p_target_in_window DOUBLE;
