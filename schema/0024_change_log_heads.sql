-- 0024: the change log's last entry per URI, found by an index (#49).
--
-- What enters the change log is decided against the URI's last logged
-- entry (store/history_rule.h): a change read again, or older than what
-- the log already says, is not logged twice. Each batch looks up the last
-- entry of its URIs; `tributary check-history` walks the log per URI.
CREATE INDEX change_log_feed_uri ON change_log (feed_id, uri, seq);
