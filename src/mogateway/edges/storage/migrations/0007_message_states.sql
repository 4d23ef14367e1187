-- What changes as an MO moves (its state, last change, client, reply text, owning worker) leaves its
-- messages row for a short row of its own (edges/storage/schema.py): a change then rewrites that row
-- and its own indexes, not the whole message and every index of messages. The messages row is
-- written once, when the MO is stored.
CREATE TABLE message_states (
    id         text PRIMARY KEY,
    state      text NOT NULL,
    updated_at double precision NOT NULL,
    client_id  text,
    reply_text text,
    owner      integer NOT NULL DEFAULT 0
);
INSERT INTO message_states (id, state, updated_at, client_id, reply_text, owner)
    SELECT id, state, updated_at, client_id, reply_text, owner FROM messages;
DROP INDEX messages_unfinished;
DROP INDEX messages_updated;
ALTER TABLE messages
    DROP COLUMN updated_at,
    DROP COLUMN state,
    DROP COLUMN client_id,
    DROP COLUMN reply_text,
    DROP COLUMN owner;
CREATE INDEX message_states_unfinished ON message_states (owner, id)
    WHERE state IN ('answered', 'queued', 'replying');
-- Retention (docs/scaling.md) finds old finished messages by their last change.
CREATE INDEX message_states_updated ON message_states (updated_at);
