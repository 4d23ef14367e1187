-- A message's first timeline entry (received or rejected: origin, source id, notes, rejection) moves
-- into its row, so storing an MO writes one row; the timeline reads it back from there. (SQLite's
-- journal version 2.)
ALTER TABLE messages ADD COLUMN notes TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN rejection_field TEXT;
ALTER TABLE messages ADD COLUMN rejection_reason TEXT;
-- engine: postgres
UPDATE messages m SET
    notes = coalesce((SELECT (e.data -> 'notes')::text FROM events e
                      WHERE e.message_id = m.id AND e.kind IN ('received', 'rejected')
                      ORDER BY e.seq LIMIT 1), ''),
    rejection_field = (SELECT e.data ->> 'field' FROM events e
                       WHERE e.message_id = m.id AND e.kind = 'rejected' ORDER BY e.seq LIMIT 1),
    rejection_reason = (SELECT e.data ->> 'reason' FROM events e
                        WHERE e.message_id = m.id AND e.kind = 'rejected' ORDER BY e.seq LIMIT 1);
-- engine: sqlite
UPDATE messages SET
    notes = coalesce((SELECT json_extract(e.data, '$.notes') FROM events e
                      WHERE e.message_id = messages.id AND e.kind IN ('received', 'rejected')
                      ORDER BY e.seq LIMIT 1), ''),
    rejection_field = (SELECT json_extract(e.data, '$.field') FROM events e
                       WHERE e.message_id = messages.id AND e.kind = 'rejected' ORDER BY e.seq LIMIT 1),
    rejection_reason = (SELECT json_extract(e.data, '$.reason') FROM events e
                        WHERE e.message_id = messages.id AND e.kind = 'rejected' ORDER BY e.seq LIMIT 1);
-- engine: both
DELETE FROM events WHERE kind IN ('received', 'rejected');
-- "dispatching" was never written by a gateway and is gone from the state table.
UPDATE messages SET state = 'queued' WHERE state = 'dispatching';

-- Recovery and the sweeper page through unfinished messages by their id (keyset paging on the unique
-- key: no page repeats or skips a row). The indexes of the messages waiting by state or by last change
-- are no longer read (SQLite's version 1 had its own).
DROP INDEX IF EXISTS messages_pending;
DROP INDEX IF EXISTS messages_unfinished_id;
DROP INDEX IF EXISTS messages_unfinished;
CREATE INDEX messages_unfinished ON messages (id) WHERE state IN ('answered', 'queued', 'replying');
