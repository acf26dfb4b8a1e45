"""The one cache store: ``sqlite_store`` (one SQLite file, one locking and corrupt-file recovery path, used by the
LLM, embedding and result caches) and ``result_cache`` (results keyed by the content of their inputs)."""
