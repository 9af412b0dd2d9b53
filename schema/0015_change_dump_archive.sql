-- 0015: the Change Dump Archive. When retention compacts a Change List
-- part, its Change Dump package and the package's manifest are kept as
-- blobs at the URLs they had (kind 'changedump-package'), and an archived
-- Change Dump listing that one package is kept beside them (kind
-- 'changedump', archive/changedump-<n>.xml): the set's Change Dump
-- Archive lists those, so a follower behind the live Change Dump catches
-- up from packages instead of re-baselining. They expire with the part.
ALTER TABLE archived_document DROP CONSTRAINT archived_document_kind_check;
ALTER TABLE archived_document ADD CONSTRAINT archived_document_kind_check
    CHECK (kind IN ('changelist', 'resourcelist', 'changedump', 'changedump-package'));
