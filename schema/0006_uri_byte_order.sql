-- 0006: URIs in byte order.
--
-- The republisher keeps each set's Resource List as parts, each covering a
-- range of URIs, and maps a changed URI to its part itself: the database
-- must order URIs as bytes, whatever collation the database was created
-- with. "C" is also the cheapest collation to compare. The indexes on these
-- columns are rebuilt.
ALTER TABLE resource ALTER COLUMN uri TYPE text COLLATE "C";
ALTER TABLE change_log ALTER COLUMN uri TYPE text COLLATE "C";
ALTER TABLE retry ALTER COLUMN uri TYPE text COLLATE "C";
ALTER TABLE watermark ALTER COLUMN last_uri TYPE text COLLATE "C";
