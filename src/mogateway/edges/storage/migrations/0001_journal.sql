-- The journal: messages, their timelines, reply references, the client registry, the gateway's settings.
-- Times are unix seconds (double precision), as in the SQLite journal, so both read the same.
--
-- Every migration runs on both engines (SQLite, PostgreSQL), except where a line "-- engine: sqlite" or
-- "-- engine: postgres" starts statements for one of them, up to the next such line ("-- engine: both"
-- goes back to both). SQLite keeps its tables WITHOUT ROWID (the row is stored in its key's B-tree) and
-- creates this first version "IF NOT EXISTS": a SQLite journal of its own version 1, from before these
-- files were SQLite's too, holds part of it already.

-- engine: postgres
CREATE TABLE messages (
    id          text PRIMARY KEY,
    origin      text NOT NULL,
    source_id   text,
    shortcode   text NOT NULL,
    msisdn      text NOT NULL,
    message     text NOT NULL,
    received_at double precision NOT NULL,
    stored_at   double precision NOT NULL,
    updated_at  double precision NOT NULL,
    state       text NOT NULL,
    cc          integer,
    ndc         integer,
    sn          bigint,
    operator    text NOT NULL DEFAULT '',
    circle      text NOT NULL DEFAULT '',
    client_id   text,
    reply_text  text
);
CREATE INDEX messages_received ON messages (received_at);
CREATE INDEX messages_msisdn ON messages (msisdn, received_at);
CREATE INDEX messages_shortcode ON messages (shortcode, received_at);
-- Small and hot: only the messages the dispatcher and the sweeper still have to finish.
CREATE INDEX messages_unfinished ON messages (updated_at)
    WHERE state IN ('queued', 'dispatching', 'answered');

-- seq orders a message's events in the order they were applied.
CREATE TABLE events (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id text NOT NULL,
    at         double precision NOT NULL,
    kind       text NOT NULL,
    data       jsonb NOT NULL
);
CREATE INDEX events_message ON events (message_id, seq);

CREATE TABLE reply_refs (
    ref        text PRIMARY KEY,
    message_id text NOT NULL
);

CREATE TABLE clients (
    id         text PRIMARY KEY,
    doc        jsonb NOT NULL,
    updated_at double precision NOT NULL
);

CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- engine: sqlite
CREATE TABLE IF NOT EXISTS messages (
    id TEXT NOT NULL PRIMARY KEY,
    origin TEXT NOT NULL,
    source_id TEXT,
    shortcode TEXT NOT NULL,
    msisdn TEXT NOT NULL,
    message TEXT NOT NULL,
    received_at REAL NOT NULL,
    stored_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL,
    cc INTEGER,
    ndc INTEGER,
    sn INTEGER,
    operator TEXT NOT NULL DEFAULT '',
    circle TEXT NOT NULL DEFAULT '',
    client_id TEXT,
    reply_text TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS messages_received ON messages (received_at);
CREATE INDEX IF NOT EXISTS messages_msisdn ON messages (msisdn, received_at);
CREATE INDEX IF NOT EXISTS messages_shortcode ON messages (shortcode, received_at);
-- seq is the rowid: it orders a message's events in the order they were applied.
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    message_id TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_message ON events (message_id, seq);
CREATE TABLE IF NOT EXISTS reply_refs (
    ref TEXT NOT NULL PRIMARY KEY,
    message_id TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS clients (
    id TEXT NOT NULL PRIMARY KEY,
    doc TEXT NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS settings (
    key TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
