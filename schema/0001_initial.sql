-- 0001: sources, the sets we follow, resource state, watermarks, the change
-- log we republish, and sync runs with their errors.

-- A configured upstream Source (by its name in the config file).
CREATE TABLE source (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    url         text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One Capability List (one set of resources) of a source that we follow.
CREATE TABLE feed (
    id                   bigserial PRIMARY KEY,
    source_id            bigint NOT NULL REFERENCES source (id) ON DELETE CASCADE,
    capability_list_url  text NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source_id, capability_list_url)
);

-- The state of every resource we hold, per feed and URI.
CREATE TABLE resource (
    feed_id          bigint NOT NULL REFERENCES feed (id) ON DELETE CASCADE,
    uri              text NOT NULL,
    state            text NOT NULL CHECK (state IN ('live', 'deleted')),
    lastmod          timestamptz,
    change_datetime  timestamptz,          -- upstream change time (1.1 datetime, else lastmod)
    length           bigint,
    md5              text,                 -- hex digests of the bytes we hold
    sha1             text,
    sha256           text,
    type             text,
    encoding         text,
    links            jsonb NOT NULL DEFAULT '[]',   -- every rs:ln as received
    blob_sha256      text,                 -- the content in the blob store
    fetched_at       timestamptz,
    fetched_from     text,                 -- which location served the bytes
    last_seen_run    bigint,               -- the baseline or audit run that last listed it
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (feed_id, uri)
) WITH (fillfactor = 70); -- room on each page for HOT updates of changed resources

-- How far each feed has been applied.
CREATE TABLE watermark (
    feed_id          bigint PRIMARY KEY REFERENCES feed (id) ON DELETE CASCADE,
    baseline_at      timestamptz,          -- `at` of the list the last baseline came from
    change_list_url  text,                 -- the Change List being followed
    last_time        timestamptz,          -- time of the last applied change ...
    last_uri         text,                 -- ... its URI ...
    last_position    integer,              -- ... and its position among equal times
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Every change this aggregator applied, append-only; republished as our
-- own Change List.
CREATE TABLE change_log (
    seq                bigserial PRIMARY KEY,
    feed_id            bigint NOT NULL REFERENCES feed (id) ON DELETE CASCADE,
    uri                text NOT NULL,
    change             text NOT NULL CHECK (change IN ('created', 'updated', 'deleted')),
    recorded_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    upstream_datetime  timestamptz,
    lastmod            timestamptz,
    length             bigint,
    md5                text,
    sha1               text,
    sha256             text,
    type               text,
    encoding           text,
    links              jsonb NOT NULL DEFAULT '[]',
    blob_sha256        text
);
CREATE INDEX change_log_feed ON change_log (feed_id, seq);

-- One run of baseline, incremental or audit over a source.
CREATE TABLE sync_run (
    id           bigserial PRIMARY KEY,
    source_id    bigint NOT NULL REFERENCES source (id) ON DELETE CASCADE,
    mode         text NOT NULL CHECK (mode IN ('baseline', 'incremental', 'audit')),
    status       text NOT NULL CHECK (status IN ('running', 'succeeded', 'partial', 'failed')),
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    created      bigint NOT NULL DEFAULT 0,
    updated      bigint NOT NULL DEFAULT 0,
    deleted      bigint NOT NULL DEFAULT 0,
    unchanged    bigint NOT NULL DEFAULT 0,
    failed       bigint NOT NULL DEFAULT 0,
    bytes        bigint NOT NULL DEFAULT 0,
    message      text
);
CREATE INDEX sync_run_source ON sync_run (source_id, id DESC);

CREATE TABLE sync_error (
    id         bigserial PRIMARY KEY,
    run_id     bigint NOT NULL REFERENCES sync_run (id) ON DELETE CASCADE,
    at         timestamptz NOT NULL DEFAULT now(),
    url        text NOT NULL,
    reason     text NOT NULL
);
CREATE INDEX sync_error_run ON sync_error (run_id);
