-- 0017: what each Source publishes, as its last run's discovery found it:
-- 'resourcesync' (Change Lists), 'resource-list-only' (a Resource List and
-- nothing after it) or 'plain-sitemap'. NULL until a run has said.
ALTER TABLE source ADD COLUMN kind text;

-- How far ahead of our clock the Source dated the changes of its last
-- Change List read, past its clock_tolerance; NULL when its clock looked
-- right. The watermark never moves past the time changes were read.
ALTER TABLE source ADD COLUMN clock_ahead_seconds double precision;
