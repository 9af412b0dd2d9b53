-- 0021: the operator's view (#37).
-- Why each run ran: "schedule", "push" (a notification), "operator" (the
-- API or the page), "startup" (the first run after the daemon started),
-- "cli" (`tributary sync`). NULL for runs recorded before 0021.
ALTER TABLE sync_run ADD COLUMN trigger text;

-- A source paused by an operator: no run starts on any node until resumed.
-- Kept here, not in the config, so it holds on every daemon sharing the
-- database and across restarts. Keyed by name: a source paused and then
-- removed from the config and added back is still paused.
CREATE TABLE source_pause (
  source text PRIMARY KEY,
  paused_at timestamptz NOT NULL DEFAULT now(),
  paused_by text NOT NULL,
  reason text NOT NULL DEFAULT ''
);

-- Every operator action (pause, resume, sync now, audit now, retry now,
-- confirm or refuse held deletions, retire): who, when and what, shown in
-- the source's history.
CREATE TABLE operator_action (
  id bigserial PRIMARY KEY,
  source text NOT NULL,
  action text NOT NULL,
  actor text NOT NULL,
  at timestamptz NOT NULL DEFAULT now(),
  detail text NOT NULL DEFAULT ''
);
CREATE INDEX operator_action_source ON operator_action (source, id);

-- Sources gone from the configuration (#37's lifecycle): since when. Their
-- documents answer 410 Gone and leave our Source Description at once; their
-- data is purged by `tributary gc` after `removed_source_retention`, or at
-- once by `tributary retire`. A source configured again leaves this table.
CREATE TABLE source_removed (
  source text PRIMARY KEY,
  removed_at timestamptz NOT NULL DEFAULT now()
);

-- The status history counts a run's changes when the run ends, apart from
-- what a baseline stored (a baseline's creations are no changes upstream):
-- `changes` from incremental runs and audits, `baseline` from baselines.
-- The change-log cursor of 0016 is no longer read.
ALTER TABLE source_history ADD COLUMN baseline bigint NOT NULL DEFAULT 0;

-- A run stopped by its process shutting down is "interrupted": no failure
-- of the source's (it resumes at the next start), not shown as one.
ALTER TABLE sync_run DROP CONSTRAINT sync_run_status_check;
ALTER TABLE sync_run ADD CONSTRAINT sync_run_status_check
  CHECK (status IN ('running', 'succeeded', 'partial', 'failed', 'interrupted'));
