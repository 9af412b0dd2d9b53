-- 0023: the feed a batch writes to is checked once a batch, not once a row
-- (#38). The foreign keys of resource and change_log on feed ran a
-- SELECT ... FOR KEY SHARE on feed for every row written: 10,000 change-log
-- rows took 116 ms with it and 52 ms without. PgStore::apply now takes that
-- lock on the feed's row once, first in its transaction, and fails if the
-- feed is gone; so does delete_unseen (it updates the feed's row first).
-- A feed's rows still go with it: a trigger deletes them, as ON DELETE
-- CASCADE did (a source removed by `tributary forget` cascades to its feeds,
-- and so to this).
ALTER TABLE resource DROP CONSTRAINT IF EXISTS resource_feed_id_fkey;
ALTER TABLE change_log DROP CONSTRAINT IF EXISTS change_log_feed_id_fkey;

CREATE FUNCTION feed_delete_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM resource WHERE feed_id = OLD.id;
  DELETE FROM change_log WHERE feed_id = OLD.id;
  RETURN OLD;
END
$$;

CREATE TRIGGER feed_delete_rows BEFORE DELETE ON feed
  FOR EACH ROW EXECUTE FUNCTION feed_delete_rows();
