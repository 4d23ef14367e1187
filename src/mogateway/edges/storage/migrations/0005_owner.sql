-- The worker process that dispatches an MO (core.workers). Nodes on PostgreSQL share a queue instead
-- and store 0; the column keeps both journals on one schema (edges/storage/schema.py). (SQLite's
-- journal version 3.)
ALTER TABLE messages ADD COLUMN owner INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS messages_unfinished;
CREATE INDEX messages_unfinished ON messages (owner, id) WHERE state IN ('answered', 'queued', 'replying');
