-- Retention: deleting old finished messages reads events and reply references by message, and old
-- messages by their last change. These indexes keep `mogateway migrate`'s documented cleanup SQL
-- (docs/scaling.md) from scanning whole tables. PostgreSQL only: the SQLite journal has no such SQL,
-- and the indexes would only make its writes dearer.
-- engine: postgres
CREATE INDEX messages_updated ON messages (updated_at);
CREATE INDEX reply_refs_message ON reply_refs (message_id);
