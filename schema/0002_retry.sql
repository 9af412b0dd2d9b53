-- 0002: resources whose content could not be fetched for a lasting reason
-- (every location failed, or the bytes did not verify). Later runs retry
-- them, with backoff, until one succeeds, a later change stores the
-- resource, or a full listing (baseline, audit) no longer names it. Without
-- this a failure during a baseline waited for the next audit.
CREATE TABLE retry (
    feed_id          bigint NOT NULL REFERENCES feed (id) ON DELETE CASCADE,
    uri              text NOT NULL,
    entry            text NOT NULL,        -- the upstream's <url> entry, as a one-entry urlset
    change           text CHECK (change IN ('created', 'updated')), -- NULL: listed by a baseline/audit
    change_datetime  timestamptz,
    reason           text NOT NULL,
    attempts         integer NOT NULL DEFAULT 1,
    first_failed_at  timestamptz NOT NULL DEFAULT now(),
    next_attempt_at  timestamptz NOT NULL,
    last_seen_run    bigint,               -- the baseline or audit run that last listed it
    PRIMARY KEY (feed_id, uri)
);
CREATE INDEX retry_due ON retry (feed_id, next_attempt_at);
