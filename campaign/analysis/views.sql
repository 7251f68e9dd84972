-- Documented views over the catalog, for people and for the analysis. `campaign sql --workspace W "select ..."`
-- creates them (as temporary views: the catalog is opened read-only) before running your query.
--
-- executed_window: the window the newest execute run executed (or reused), with its commitment.
CREATE OR REPLACE TEMP VIEW executed_window AS
SELECT r.commitment_id, r.replica, r.seed, r.summary, c.window_start, c.window_end, c.config_digest,
       c.data_digest, c.config_json, e.run_id AS execute_run_id, e.executed_at
FROM executions e
JOIN sim_replicas r ON r.commitment_id = e.commitment_id AND r.replica = e.replica
JOIN commitments c ON c.commitment_id = e.commitment_id
ORDER BY e.executed_at DESC, e.run_id DESC
LIMIT 1;

-- window_events: the event log of that window, with the day of the window each event happened on.
CREATE OR REPLACE TEMP VIEW window_events AS
SELECT ev.event_id, ev.t_s, ev.t_s / 86400.0 AS day, ev.kind, ev.category, ev.scope, ev.node,
       ev.tokens_trained, ev.detail
FROM sim_events ev
JOIN executed_window w ON ev.commitment_id = w.commitment_id AND ev.replica = w.replica;

-- interruptions_by_day: unexpected failures and planned maintenance per day of the window, by category.
CREATE OR REPLACE TEMP VIEW interruptions_by_day AS
SELECT CAST(floor(day) AS INTEGER) AS day,
       CASE WHEN kind = 'failure' THEN 'unexpected' ELSE 'planned' END AS kind,
       coalesce(nullif(category, ''), 'planned_maintenance') AS category,
       count(*) AS n_interruptions
FROM window_events
WHERE kind IN ('failure', 'planned_start')
GROUP BY ALL
ORDER BY day, kind, n_interruptions DESC, category;

-- gate_figures: each gate of the newest validate run, its verdict, and its figures (summary, details JSON).
CREATE OR REPLACE TEMP VIEW gate_figures AS
SELECT g.gate, g.passed, json_extract_string(g.details, '$.summary') AS summary, g.details, g.run_id,
       g.checked_at, g.config_digest, g.data_digest
FROM gates g
WHERE g.run_id = (SELECT run_id FROM gates ORDER BY checked_at DESC, run_id DESC LIMIT 1)
ORDER BY g.gate;

-- rejections_by_reason: rejected documents per reason and source for the newest prepared data, with the share of
-- that source's input documents.
CREATE OR REPLACE TEMP VIEW rejections_by_reason AS
SELECT r.reason, r.source, r.n_documents, r.n_documents / nullif(d.n_input, 0) AS share_of_input, r.data_digest
FROM rejections r
JOIN datasets d ON d.data_digest = r.data_digest AND d.source = r.source
WHERE r.data_digest = (SELECT data_digest FROM datasets ORDER BY created_at DESC LIMIT 1)
ORDER BY r.n_documents DESC, r.reason, r.source;

-- data_mixture: kept documents and tokens per source for the newest prepared data, with each source's token share.
CREATE OR REPLACE TEMP VIEW data_mixture AS
SELECT source, n_input, n_documents, n_rejected, n_tokens,
       n_tokens / nullif(sum(n_tokens) OVER (), 0) AS token_share, data_digest
FROM datasets
WHERE data_digest = (SELECT data_digest FROM datasets ORDER BY created_at DESC LIMIT 1)
ORDER BY source;
