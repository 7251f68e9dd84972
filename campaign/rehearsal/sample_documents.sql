-- The rehearsal's documents: whole clean documents in the order of their text's sha256 (ties by id), taken while
-- the tokens before them are below the sample size. Texts are read only for the chosen documents.
-- $1: glob of the clean Parquet files; $2: sample size in tokens.
WITH ordered AS (
    SELECT CAST(doc_id AS VARCHAR) AS doc_id, text_sha256, n_tokens,
           coalesce(sum(greatest(n_tokens, 0)) OVER (ORDER BY text_sha256, CAST(doc_id AS VARCHAR)
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS tokens_before
    FROM read_parquet($1)
),
chosen AS (SELECT doc_id, text_sha256, n_tokens FROM ordered WHERE tokens_before < $2)
SELECT chosen.doc_id, clean.text, chosen.text_sha256, chosen.n_tokens
FROM chosen JOIN read_parquet($1) AS clean
  ON CAST(clean.doc_id AS VARCHAR) = chosen.doc_id AND clean.text_sha256 = chosen.text_sha256
ORDER BY chosen.text_sha256, chosen.doc_id
