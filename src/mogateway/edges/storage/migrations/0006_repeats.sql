-- SMPP MOs redelivered over another bind (core.message.find_repeats): a store looks up the earlier MOs
-- of the same number with the same SMSC id or content here (for content, the range of source ids
-- "c:<digest>:"), inside its transaction. It replaces (msisdn, received_at): one index keyed by the number, not two.
-- "C" collation: the range is one of bytes, whatever the database's collation.
DROP INDEX messages_msisdn;
CREATE INDEX messages_msisdn_source ON messages (msisdn, source_id COLLATE "C");
