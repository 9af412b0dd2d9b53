-- 0007: the change log's retention horizon.
--
-- The change log grows by one row per change applied (a baseline of a
-- million is a million rows) and our Change Lists and Change Dumps are
-- rendered from it. Behind a configured horizon it is compacted, in whole
-- closed Change List parts of each published set, so that every part still
-- published keeps exactly the changes it had: a part's URL names the same
-- bytes in every process, before and after.
--
-- One row per published set: its Change List parts 1..parts are compacted,
-- the last of them ended with change `last_seq` at `until`; numbering and
-- time go on from there. A row is for the set's feeds and part size as they
-- were: a set published over other feeds, or cut in other parts, starts
-- again from what the change log still holds.
CREATE TABLE change_log_compaction (
    set_name     text PRIMARY KEY,
    feeds        bigint[] NOT NULL,
    part_size    integer NOT NULL CHECK (part_size > 0),
    parts        integer NOT NULL CHECK (parts > 0),
    last_seq     bigint NOT NULL,
    until        timestamptz NOT NULL,
    compacted_at timestamptz NOT NULL DEFAULT now()
);
