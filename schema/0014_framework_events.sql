-- 0014: ResourceSync Framework Notification: what changed in our own
-- documents (a Resource List published again, a Change List part closed, a
-- dump rebuilt, an archive grown), one row per change of a document, for
-- the hub to send to the subscribers of each set's framework channel.
-- Their cursors (hub_subscription.delivered_seq, for a framework topic)
-- point into `seq`. Rows older than a week go.
CREATE TABLE framework_event (
    seq         bigserial PRIMARY KEY,
    set_name    text NOT NULL,
    loc         text NOT NULL,
    capability  text NOT NULL,
    change      text NOT NULL CHECK (change IN ('created', 'updated', 'deleted')),
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX framework_event_set ON framework_event (set_name, seq);
