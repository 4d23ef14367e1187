-- MOs named by their content (SMPP without an SMSC message id, core.message.content_source_id): a store
-- looks up the earlier MOs of the same number and content here (the range of source ids "c:<digest>:"),
-- inside its transaction. It replaces (msisdn, received_at): one index keyed by the number, not two.
-- "C" collation: the range is one of bytes, whatever the database's collation.
DROP INDEX messages_msisdn;
CREATE INDEX messages_msisdn_source ON messages (msisdn, source_id COLLATE "C");
