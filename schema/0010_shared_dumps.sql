-- 0010: dump packages every node serves alike.
--
-- With content in a shared bucket, a Resource Dump or Change Dump package
-- built by one node is stored as a blob (so in the bucket) and named here
-- by the URL path we serve it under; the current Resource Dump document of
-- each set is kept here too. Any node then serves the document and every
-- package it lists with the same bytes, so a client behind a load balancer
-- never fetches a package the node it reached does not have. Blob garbage
-- collection counts these names as references.
CREATE TABLE shared_dump (
    set_name    text PRIMARY KEY,
    generation  text NOT NULL,
    document    text NOT NULL,
    seq         bigint NOT NULL,      -- the change-log seq it was built at
    built_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE shared_dump_file (
    url_path    text PRIMARY KEY,
    set_name    text NOT NULL,
    generation  text,                 -- a Resource Dump package's generation
    part        integer,              -- a Change Dump package's (or manifest's) part
    part_from   timestamptz,          -- and that part's from and until
    part_until  timestamptz,
    sha256      text NOT NULL,
    length      bigint NOT NULL,
    CHECK ((generation IS NULL) <> (part IS NULL))
);
CREATE INDEX shared_dump_file_set ON shared_dump_file (set_name);
