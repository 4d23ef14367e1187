"""Work queues: in-process (embedded default) and NATS JetStream (shared by many nodes)."""
