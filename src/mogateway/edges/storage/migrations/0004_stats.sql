-- Traffic figures (service.stats): absolute counts per interval (span 1 or 60 seconds starting at `at`),
-- node, client ('' for the whole gateway) and kind. Every node writes only its own rows, so nodes never
-- contend on them; reads sum over nodes.
-- engine: postgres
CREATE TABLE stats (
    span   integer NOT NULL,
    at     bigint NOT NULL,
    node   text NOT NULL,
    client text NOT NULL,
    kind   text NOT NULL,
    count  bigint NOT NULL,
    PRIMARY KEY (span, at, node, client, kind)
);
-- engine: sqlite
-- (IF NOT EXISTS: a SQLite journal of its version 2 may have it already.)
CREATE TABLE IF NOT EXISTS stats (
    span INTEGER NOT NULL,
    at INTEGER NOT NULL,
    node TEXT NOT NULL,
    client TEXT NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (span, at, node, client, kind)
) WITHOUT ROWID;
