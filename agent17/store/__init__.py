"""The leased task store: one SQLite file per workspace."""

from agent17.store.sqlite import SqliteTaskStore

__all__ = ["SqliteTaskStore"]
