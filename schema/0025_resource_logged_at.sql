-- 0025: when each resource's last change entered our change log (#52).
--
-- Our OAI-PMH face lists the resources we hold by this time (its
-- datestamp), from one clock (the database's), so that several nodes
-- agree. It is set where the change log is written (store/pg/pg_history.cpp,
-- log_changes), after the change-log lock is taken: a later commit can never
-- carry an earlier time than one a harvester was already shown (a reader
-- takes the same lock to learn how far it may list). It lives on the
-- resource row, not only in the log, because retention compacts the log
-- while the resource stays held.
ALTER TABLE resource ADD COLUMN logged_at timestamptz DEFAULT now();
UPDATE resource r SET logged_at = coalesce(
    (SELECT max(c.recorded_at) FROM change_log c WHERE c.feed_id = r.feed_id AND c.uri = r.uri),
    r.updated_at);
ALTER TABLE resource ALTER COLUMN logged_at SET NOT NULL;
CREATE INDEX resource_logged_at ON resource (logged_at, feed_id, uri);
