-- 0016: a small rolling history per source for the status page's
-- sparklines: one row per source and 5-minute bucket, holding the lag last
-- sampled in it and the changes applied in it. Any daemon samples once a
-- minute; the changes are counted from the change log past a shared cursor
-- (locked FOR UPDATE), so several daemons on one database count each change
-- once. Rows older than the retention (7 days) are deleted by the sampler.
CREATE TABLE source_history (
    source_id    bigint NOT NULL REFERENCES source (id) ON DELETE CASCADE,
    bucket       timestamptz NOT NULL,           -- start of the 5-minute bucket
    lag_seconds  double precision,               -- now minus the newest change applied, last sampled
    changes      bigint NOT NULL DEFAULT 0,      -- changes applied (recorded) in the bucket
    failing      boolean NOT NULL DEFAULT false, -- the source's last run had failed when sampled
    PRIMARY KEY (source_id, bucket)
);
CREATE INDEX source_history_bucket ON source_history (bucket);

-- How far into the change log the history has counted (one row).
CREATE TABLE source_history_cursor (
    id        integer PRIMARY KEY CHECK (id = 1),
    last_seq  bigint NOT NULL
);
INSERT INTO source_history_cursor (id, last_seq) SELECT 1, coalesce(max(seq), 0) FROM change_log;
