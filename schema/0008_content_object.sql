-- 0008: where each blob is in shared object storage (the S3 content tier).
--
-- With `content.store` "s3", every blob a node stores is also uploaded to
-- the bucket before the database names it: small blobs packed together
-- into immutable objects `packs/<sha-256 of the object>`, a larger one as
-- `blobs/<its sha-256>`. This table says where each blob is, so that any
-- node can serve any content with one Range GET. A row is written only
-- after its object's PUT succeeded: the database never names content the
-- bucket lacks.
CREATE TABLE content_object (
    sha256   text PRIMARY KEY,
    object   text NOT NULL,
    "offset" bigint NOT NULL CHECK ("offset" >= 0),
    length   bigint NOT NULL CHECK (length >= 0)
);
CREATE INDEX content_object_object ON content_object (object);
