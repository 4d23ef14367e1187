"""The edges: adapters between the gateway's use cases (``service/``) and the world.

Each module here implements a port of ``core.ports`` on a real engine or speaks to one: the journals
(SQLite, PostgreSQL), the work queues (in-process, NATS JetStream), the SMPP binds, the HTTP/1.1 callback
client and its address guard, the reply channels, the cluster's node directory and reply routing, and
the data files the core's tables are read from (numbering, DLT errors), the worker processes' sockets
and the admin and ingest tokens. An edge reads its settings model from ``mogateway.config`` or is handed
plain values; ``config`` never imports an edge.
Nothing in ``core``, ``smpp``, ``config`` or ``service`` imports from here; ``mogateway.modes`` builds
the parts that differ between the ways a node runs and ``mogateway.node`` wires it all.
"""
