-- 0004: counts every feed's resources again, with writers locked out. Up to
-- this release 0003 counted before its triggers existed, so that rows an
-- older daemon wrote during the upgrade were never counted; a database
-- migrated that way is put right here (a no-op for one migrated since).
LOCK TABLE resource IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO feed_stats AS s (feed_id, live, deleted, bytes)
SELECT f.id,
       count(r.uri) FILTER (WHERE r.state = 'live'),
       count(r.uri) FILTER (WHERE r.state = 'deleted'),
       coalesce(sum(r.length) FILTER (WHERE r.state = 'live'), 0)
FROM feed f LEFT JOIN resource r ON r.feed_id = f.id
GROUP BY f.id
ON CONFLICT (feed_id) DO UPDATE SET live = EXCLUDED.live, deleted = EXCLUDED.deleted, bytes = EXCLUDED.bytes;
