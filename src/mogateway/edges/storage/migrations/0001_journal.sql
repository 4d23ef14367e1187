-- The journal: messages, their timelines, reply references, the client registry, the gateway's settings.
-- Times are unix seconds (double precision), as in the SQLite journal, so both read the same.

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
