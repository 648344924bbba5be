"""The leased task store: SQLite (and, beside it, PostgreSQL) behind one contract."""
