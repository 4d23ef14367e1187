-- Retention (service/retention.py) deletes a message's reply references with it, by message id. The
-- PostgreSQL journal has had that index since 0002 (so this is a no-op there); SQLite's had none, and
-- each batch scanned the whole table. One more index entry per reply part submitted over SMPP. (Old
-- finished messages are found by messages_received, their events by events_message: both engines have
-- those since 0001.)
CREATE INDEX IF NOT EXISTS reply_refs_message ON reply_refs (message_id);
