-- WhatsApp messages retention deleted, remembered by id for the webhook's replay window (issue 36.4):
-- a signed body Meta (or anyone holding one) posts again after its message's row is gone must not be
-- stored and answered a second time. Retention writes a row as it deletes a WhatsApp message, and
-- forgets it once the message is older than [whatsapp] max_message_age_s (older webhooks are refused by
-- their timestamp anyway). The id is the message id (core.message.id_for_source of the number and the
-- wamid); received_at is Meta's timestamp of the message.
CREATE TABLE whatsapp_seen (
    id          text NOT NULL PRIMARY KEY,
    received_at double precision NOT NULL
);
CREATE INDEX whatsapp_seen_received ON whatsapp_seen (received_at);
