-- 0022: who holds a source's lease (#38).
-- The lease itself is a session advisory lock, held on the one connection
-- of its process that keeps session state (several runs of a daemon share
-- it), so pg_stat_activity no longer says which run holds a source: the run
-- writes itself here when it takes the lock. Read only when the lock is
-- refused, to name the holder; a row left by a process that died is
-- overwritten by the next holder.
CREATE TABLE source_lease (
  source_id bigint PRIMARY KEY REFERENCES source (id) ON DELETE CASCADE,
  holder text NOT NULL,
  since timestamptz NOT NULL DEFAULT now()
);
