-- 0018: a retry's entry as a record (jsonb: every field of the model, see
-- store/pg/entry_json.h), no longer as a one-entry XML urlset written by
-- the protocol writer and parsed back. Tributary's migrate fills entry_json
-- from entry for every existing row in this migration's transaction
-- (store/pg/migrations.cpp); 0019 then drops the XML.
ALTER TABLE retry ADD COLUMN entry_json jsonb;
