-- SMPP MOs redelivered over another bind (core.repeats.find_repeats): a store looks up the earlier MOs
-- of the same number with the same SMSC id or content here (for content, the range of source ids
-- "c:<digest>:"), inside its transaction, with one seek. It replaces (msisdn, received_at): one index
-- keyed by the number, not two, so each MO still costs one index entry at a random place (it also
-- serves the search by number, which sorts that number's rows by time; docs/benchmarks.md §0.4).
DROP INDEX IF EXISTS messages_msisdn;
-- engine: postgres
-- "C" collation: the range is one of bytes, whatever the database's collation.
CREATE INDEX messages_msisdn_source ON messages (msisdn, source_id COLLATE "C");
-- engine: sqlite
-- (IF NOT EXISTS: a SQLite journal of its version 3 may have it already.)
CREATE INDEX IF NOT EXISTS messages_msisdn_source ON messages (msisdn, source_id);
