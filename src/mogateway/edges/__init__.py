"""The edges: adapters between the gateway's use cases (``service/``) and the world.

Each module here implements a port of ``core.ports`` on a real engine or speaks to one: the journals
(SQLite, PostgreSQL), the work queues (in-process, NATS JetStream), the SMPP binds, the HTTP/1.1 callback
client and its address guard, the reply channels, the cluster's node directory and reply routing, and
the data files the core's tables are read from (numbering, DLT errors).
Nothing in ``core``, ``smpp`` or ``service`` imports from here; ``mogateway.node`` wires it all.
"""
