-- The console's sessions and failed sign-ins leave one process's memory for the journal, so that every
-- worker and every node signs in, signs out and throttles alike (edges/storage/console_sessions.py).
-- A session is kept under a SHA-256 of its id, never the id; its flashes are sealed with a key derived
-- from the id. Both tables are bounded by the gateway (expired rows and the oldest beyond a cap go).
CREATE TABLE console_sessions (
    id_hash    text NOT NULL PRIMARY KEY,
    expires_at double precision NOT NULL,
    flashes    text NOT NULL DEFAULT ''
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
CREATE TABLE console_signin_failures (
    address  text NOT NULL,
    at       double precision NOT NULL,
    failures integer NOT NULL,
    PRIMARY KEY (address, at)
);
CREATE INDEX console_signin_failures_at ON console_signin_failures (at);
