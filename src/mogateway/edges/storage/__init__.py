"""Durable storage: the journals (SQLite embedded, PostgreSQL for many nodes) on one schema description."""
