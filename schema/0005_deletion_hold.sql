-- 0005: the mass-deletion guard, and what the status answers read.
--
-- A baseline whose list lacks more than a configured share of the live
-- resources we hold does not delete them: the feed records the hold (how
-- many the list lacked, of how many, since when) until an operator confirms
-- through the admin API (`deletions_confirmed`), and the next baseline then
-- applies them. An empty or truncated Resource List from a broken upstream
-- would otherwise delete a whole mirror in one run.
ALTER TABLE feed
    ADD COLUMN deletion_hold_unseen bigint,        -- NULL: no deletions held
    ADD COLUMN deletion_hold_live   bigint,
    ADD COLUMN deletion_hold_since  timestamptz,
    ADD COLUMN deletion_hold_run    bigint,
    ADD COLUMN deletions_confirmed  boolean NOT NULL DEFAULT false;

-- The status API's newest run per source and status: an index walk per
-- source instead of sorting every run (sync_run grows by one row per run).
CREATE INDEX sync_run_source_status ON sync_run (source_id, status, id DESC);
-- Retention deletes finished runs by age.
CREATE INDEX sync_run_finished ON sync_run (finished_at);
