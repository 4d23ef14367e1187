-- Traffic figures (service.stats): absolute counts per interval (span 1 or 60 seconds starting at `at`),
-- node, client ('' for the whole gateway) and kind. Every node writes only its own rows, so nodes never
-- contend on them; reads sum over nodes.
CREATE TABLE stats (
    span   integer NOT NULL,
    at     bigint NOT NULL,
    node   text NOT NULL,
    client text NOT NULL,
    kind   text NOT NULL,
    count  bigint NOT NULL,
    PRIMARY KEY (span, at, node, client, kind)
);
