-- 0019: the XML form of retry entries goes; the record takes its name.
ALTER TABLE retry DROP COLUMN entry;
ALTER TABLE retry RENAME COLUMN entry_json TO entry;
ALTER TABLE retry ALTER COLUMN entry SET NOT NULL;
