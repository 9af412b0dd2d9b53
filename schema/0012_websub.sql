-- 0012: ResourceSync Change Notification over WebSub, both ways.
--
-- hub_subscription: who follows our topics through our own hub (one row per
-- topic and callback, as WebSub keys a subscription). A row is written only
-- once the subscriber confirmed its intent (the challenge echoed), so every
-- row is a subscription someone asked for. Deliveries follow the change log:
-- `delivered_seq` is the last change-log seq the subscriber acknowledged, so
-- a restart (or another node taking over) resumes where delivery stopped,
-- and a subscriber that is down holds no queue in memory: it is a cursor
-- into the log, bounded by the log's own retention.
CREATE TABLE hub_subscription (
    topic              text NOT NULL,
    callback           text NOT NULL,
    secret             text,                 -- hub.secret: deliveries are signed
    lease_seconds      integer NOT NULL,
    expires_at         timestamptz NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    delivered_seq      bigint NOT NULL,
    delivered_at       timestamptz,           -- last acknowledged delivery
    deliveries         bigint NOT NULL DEFAULT 0,
    failures           integer NOT NULL DEFAULT 0, -- consecutive
    failures_total     bigint NOT NULL DEFAULT 0,
    retry_at           timestamptz,           -- back-off after a failure
    last_error         text,
    PRIMARY KEY (topic, callback)
);

-- push_subscription: our own subscriptions to upstream hubs, one per source
-- and topic. The callback path carries `token`, which is how a request to
-- the callback finds its subscription (and why a forged one finds none).
CREATE TABLE push_subscription (
    source              text NOT NULL,
    topic               text NOT NULL,
    hub                 text NOT NULL,
    token               text NOT NULL UNIQUE,
    secret              text,
    state               text NOT NULL,        -- requested, active, unsubscribing
    lease_seconds       integer,
    expires_at          timestamptz,
    requested_at        timestamptz NOT NULL DEFAULT now(),
    verified_at         timestamptz,
    last_notification_at timestamptz,
    notifications       bigint NOT NULL DEFAULT 0,
    ignored             bigint NOT NULL DEFAULT 0,
    last_note           text,
    PRIMARY KEY (source, topic)
);
