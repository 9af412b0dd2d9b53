-- 0017: what each Source publishes, as its last run's discovery found it:
-- 'resourcesync' (Change Lists), 'resource-list-only' (a Resource List and
-- nothing after it) or 'plain-sitemap'. NULL until a run has said.
ALTER TABLE source ADD COLUMN kind text;
