-- 0011: garbage collection of the bucket.
--
-- `tributary gc` marks each content_object row whose blob the database
-- names nowhere (no live resource, no change the change log keeps, no
-- shared dump file) with the time, clears the mark of a row named again,
-- and deletes a row still named nowhere a grace period after it was
-- marked; then an object no row names any more is deleted from the bucket.
-- An uploader treats a marked row as absent: it puts the blob again and
-- clears the mark.
ALTER TABLE content_object ADD COLUMN condemned_at timestamptz;

-- Objects whose last row went: deleted from the bucket by the same
-- collection, or the next one if that failed (an object a row names again
-- meanwhile is kept).
CREATE TABLE content_object_dead (
    object  text PRIMARY KEY,
    since   timestamptz NOT NULL DEFAULT now()
);
