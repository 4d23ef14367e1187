-- A console session is bound to the admin token it was opened with (api/console/sessions.py): the row
-- keeps an HMAC of that token under a key derived from the session's id (which the journal never
-- holds), never the token. A session whose tag does not match the gateway's admin token of the moment
-- is refused and deleted, so rotating MOGATEWAY_ADMIN_TOKEN signs every browser out. Sessions opened
-- before this migration have no tag ('') and are refused like any other mismatch.
ALTER TABLE console_sessions ADD COLUMN admin_token_tag text NOT NULL DEFAULT '';
