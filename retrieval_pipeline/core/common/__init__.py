"""Utilities every floor may use, importing no stage: the shared types, errors, paths, files written atomically,
YAML read safely, frames, progress lines, and in ``cache/`` the one cache store and the result cache. Nothing here
knows what a dataset or a retriever is."""
