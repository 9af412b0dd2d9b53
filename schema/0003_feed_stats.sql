-- 0003: per-feed resource counts, kept by statement-level triggers as
-- resources change, so that the status API and /metrics read a few rows
-- instead of counting every resource (a full scan of `resource` on each
-- request: seconds at tens of millions of rows, every scrape).
--
-- The triggers exist before the backfill counts, and the table is locked
-- against writers for the whole migration (it runs in one transaction):
-- counted the other way round, rows an older daemon wrote between the count
-- and the triggers were never counted (0004 recounts databases migrated so).
LOCK TABLE resource IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE feed_stats (
    feed_id  bigint PRIMARY KEY REFERENCES feed (id) ON DELETE CASCADE,
    live     bigint NOT NULL DEFAULT 0,
    deleted  bigint NOT NULL DEFAULT 0,
    bytes    bigint NOT NULL DEFAULT 0     -- sum of the live resources' lengths
);

-- Adds the rows of `rows_in` and subtracts those of `rows_out` (each a
-- transition table, or empty), one statement per batch of resources.
CREATE FUNCTION feed_stats_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO feed_stats AS s (feed_id, live, deleted, bytes)
    SELECT feed_id, count(*) FILTER (WHERE state = 'live'), count(*) FILTER (WHERE state = 'deleted'),
           coalesce(sum(length) FILTER (WHERE state = 'live'), 0)
    FROM new_rows GROUP BY feed_id
    ON CONFLICT (feed_id) DO UPDATE
        SET live = s.live + EXCLUDED.live, deleted = s.deleted + EXCLUDED.deleted, bytes = s.bytes + EXCLUDED.bytes;
    RETURN NULL;
END $$;

CREATE FUNCTION feed_stats_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE feed_stats s SET live = s.live + d.live, deleted = s.deleted + d.deleted, bytes = s.bytes + d.bytes
    FROM (SELECT feed_id, sum(live) AS live, sum(deleted) AS deleted, sum(bytes) AS bytes FROM (
              SELECT feed_id, (state = 'live')::int AS live, (state = 'deleted')::int AS deleted,
                     CASE WHEN state = 'live' THEN coalesce(length, 0) ELSE 0 END AS bytes FROM new_rows
              UNION ALL
              SELECT feed_id, -(state = 'live')::int, -(state = 'deleted')::int,
                     CASE WHEN state = 'live' THEN -coalesce(length, 0) ELSE 0 END FROM old_rows) x
          GROUP BY feed_id) d
    WHERE s.feed_id = d.feed_id AND (d.live <> 0 OR d.deleted <> 0 OR d.bytes <> 0);
    RETURN NULL;
END $$;

CREATE FUNCTION feed_stats_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only an UPDATE: when a feed is deleted its stats row goes with it.
    UPDATE feed_stats s SET live = s.live - d.live, deleted = s.deleted - d.deleted, bytes = s.bytes - d.bytes
    FROM (SELECT feed_id, count(*) FILTER (WHERE state = 'live') AS live,
                 count(*) FILTER (WHERE state = 'deleted') AS deleted,
                 coalesce(sum(length) FILTER (WHERE state = 'live'), 0) AS bytes
          FROM old_rows GROUP BY feed_id) d
    WHERE s.feed_id = d.feed_id;
    RETURN NULL;
END $$;

CREATE TRIGGER resource_stats_insert AFTER INSERT ON resource
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION feed_stats_after_insert();
CREATE TRIGGER resource_stats_update AFTER UPDATE ON resource
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION feed_stats_after_update();
CREATE TRIGGER resource_stats_delete AFTER DELETE ON resource
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION feed_stats_after_delete();

INSERT INTO feed_stats (feed_id, live, deleted, bytes)
SELECT f.id,
       count(r.uri) FILTER (WHERE r.state = 'live'),
       count(r.uri) FILTER (WHERE r.state = 'deleted'),
       coalesce(sum(r.length) FILTER (WHERE r.state = 'live'), 0)
FROM feed f LEFT JOIN resource r ON r.feed_id = f.id
GROUP BY f.id;
