-- A WhatsApp MO keeps its callback's `whatsapp` member (core/whatsapp_member.py) with it, as the exact
-- JSON text the callback sends, so a callback made after a restart or on another node carries the same
-- bytes. Text in both engines (jsonb would reorder its keys); NULL for an SMS and for WhatsApp MOs stored
-- before this migration (their callbacks have no member). Adding a nullable column without a default
-- rewrites no row in either engine.
ALTER TABLE messages ADD COLUMN whatsapp text;
