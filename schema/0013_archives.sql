-- 0013: ResourceSync Archives of our own documents.
--
-- Every document we archive is kept as a blob (so, with content on S3, in
-- the bucket every node shares) and named here by the URL path it is
-- served under: a closed Change List part that retention compacted (it
-- keeps its URL, changelist-<n>.xml, and is listed by the set's Change List
-- Archive), or a part of a Resource List snapshot (listed by the set's
-- Resource List Archive). Rows older than the archive's retention go; their
-- blobs then go with the next `tributary gc`.
CREATE TABLE archived_document (
    url_path     text PRIMARY KEY,
    set_name     text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('changelist', 'resourcelist')),
    -- Change List parts: their number and time span. Resource List
    -- snapshots: one `snapshot` per archived list, `at` and `completed`;
    -- `is_index` for the document the archive names (the list or its index).
    part         integer,
    part_from    timestamptz,
    part_until   timestamptz,
    snapshot     text,
    at           timestamptz,
    completed    timestamptz,
    is_index     boolean NOT NULL DEFAULT true,
    sha256       text NOT NULL,
    length       bigint NOT NULL,
    archived_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX archived_document_set ON archived_document (set_name, kind);
