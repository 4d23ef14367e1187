-- The client portal (api/portal, docs/portal.md): client applications' own people, their invites,
-- sessions, failed sign-ins and the audit of changes to a client (edges/storage/portal_store.py).
-- A person belongs to one client for good; every portal query is scoped by client_id
-- (service/client_scope.py). Only hashes of invite tokens, session ids and recovery codes are kept;
-- passwords as argon2id hashes; a TOTP secret sealed like client secrets (storage/sealing.py).
CREATE TABLE portal_users (
    id            text NOT NULL PRIMARY KEY,
    client_id     text NOT NULL,
    email         text NOT NULL,
    role          text NOT NULL,
    password_hash text NOT NULL DEFAULT '',
    totp_secret   text NOT NULL DEFAULT '',
    totp_step     bigint NOT NULL DEFAULT 0,
    created_at    double precision NOT NULL,
    disabled_at   double precision NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX portal_users_email ON portal_users (email);
CREATE INDEX portal_users_client ON portal_users (client_id);
CREATE TABLE portal_recovery_codes (
    user_id   text NOT NULL,
    code_hash text NOT NULL,
    PRIMARY KEY (user_id, code_hash)
);
CREATE TABLE portal_invites (
    id_hash    text NOT NULL PRIMARY KEY,
    client_id  text NOT NULL,
    user_id    text NOT NULL,
    expires_at double precision NOT NULL,
    used_at    double precision NOT NULL DEFAULT 0
);
CREATE INDEX portal_invites_expires ON portal_invites (expires_at);
CREATE TABLE portal_sessions (
    id_hash    text NOT NULL PRIMARY KEY,
    user_id    text NOT NULL,
    client_id  text NOT NULL,
    expires_at double precision NOT NULL,
    flashes    text NOT NULL DEFAULT ''
);
CREATE INDEX portal_sessions_user ON portal_sessions (user_id);
CREATE INDEX portal_sessions_client ON portal_sessions (client_id);
CREATE INDEX portal_sessions_expires ON portal_sessions (expires_at);
CREATE TABLE portal_signin_failures (
    address  text NOT NULL,
    at       double precision NOT NULL,
    failures integer NOT NULL,
    PRIMARY KEY (address, at)
);
CREATE INDEX portal_signin_failures_at ON portal_signin_failures (at);
CREATE TABLE portal_audit (
    id        text NOT NULL PRIMARY KEY,
    client_id text NOT NULL,
    at        double precision NOT NULL,
    actor     text NOT NULL,
    action    text NOT NULL,
    detail    text NOT NULL DEFAULT ''
);
CREATE INDEX portal_audit_client ON portal_audit (client_id, at);
