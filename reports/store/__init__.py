"""The results store: every run's records and answers kept in one database (SQLite or PostgreSQL),
filled from results.jsonl only, for the dashboard, the shard balance and your own queries."""
