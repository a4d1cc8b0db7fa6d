"""The store: SQL and rows on SQLite and PostgreSQL alike."""
