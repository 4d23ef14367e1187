-- What changes as an MO moves (its state, last change, client, reply text, owning worker) leaves its
-- messages row for a short row of its own (edges/storage/schema.py): a change then rewrites that row
-- and its own indexes, not the whole message and every index of messages. The messages row is
-- written once, when the MO is stored. (SQLite's journal version 4; its DROP COLUMN needs SQLite 3.35
-- and no index on the column.)
-- engine: postgres
CREATE TABLE message_states (
    id         text PRIMARY KEY,
    state      text NOT NULL,
    updated_at double precision NOT NULL,
    client_id  text,
    reply_text text,
    owner      integer NOT NULL DEFAULT 0
);
DROP INDEX messages_updated;
-- engine: sqlite
CREATE TABLE message_states (
    id TEXT NOT NULL PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL,
    client_id TEXT,
    reply_text TEXT,
    owner INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
-- engine: both
INSERT INTO message_states (id, state, updated_at, client_id, reply_text, owner)
    SELECT id, state, updated_at, client_id, reply_text, owner FROM messages;
DROP INDEX IF EXISTS messages_unfinished;
ALTER TABLE messages DROP COLUMN updated_at;
ALTER TABLE messages DROP COLUMN state;
ALTER TABLE messages DROP COLUMN client_id;
ALTER TABLE messages DROP COLUMN reply_text;
ALTER TABLE messages DROP COLUMN owner;
CREATE INDEX message_states_unfinished ON message_states (owner, id)
    WHERE state IN ('answered', 'queued', 'replying');
-- engine: postgres
-- Retention (docs/scaling.md) finds old finished messages by their last change.
CREATE INDEX message_states_updated ON message_states (updated_at);
