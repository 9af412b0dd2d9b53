-- 0009: which process ran each sync run.
--
-- Several daemons on one database (on one machine or several) share the
-- sources by leases; an operator asks which node runs which source. Each
-- run records its node: the config's node_name, by default "<host> pid
-- <pid>". Older runs have none.
ALTER TABLE sync_run ADD COLUMN node text;
