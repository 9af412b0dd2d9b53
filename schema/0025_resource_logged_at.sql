-- 0025: our OAI-PMH face lists the resources we hold by when their last
-- change entered the change log (#52).
--
-- That time is the change log's own: a resource's last entry (its head)
-- and its recorded_at, which every writer stamps after taking the change
-- log's lock (store/pg/pg_history.cpp, log_changes), so that a later commit
-- never carries an earlier time than one a harvester was already shown (a
-- reader takes the same lock to learn how far it may list). The heads are
-- found by time through this index, and by URI through change_log_feed_uri.
CREATE INDEX change_log_recorded ON change_log (recorded_at, feed_id, uri);

-- Retention compacts the log while the resource stays held: when it removes
-- a resource's last entry, it moves that entry's time here
-- (pg_change_log.cpp). Otherwise NULL: writes of the resource row leave it
-- alone, so that an update stays a HOT update.
ALTER TABLE resource ADD COLUMN logged_at timestamptz;
UPDATE resource r SET logged_at = r.updated_at
WHERE NOT EXISTS (SELECT 1 FROM change_log c WHERE c.feed_id = r.feed_id AND c.uri = r.uri);
CREATE INDEX resource_logged_at ON resource (logged_at, feed_id, uri) WHERE logged_at IS NOT NULL;
