"""The registry layer, above the stages: ``data/config/datasets.yaml`` read into each dataset's settings.

:mod:`.dataset` assembles a dataset's settings (:class:`DatasetConfig`) from its kind's and each stage's own
settings types; :mod:`.load` reads the YAML, merges the ``defaults`` block and checks the datasets against the
retriever specs and the metric table.
"""

from __future__ import annotations

from retrieval_pipeline.core.registry.dataset import DEFAULT_RETRIEVERS, DatasetConfig, Registry
from retrieval_pipeline.core.registry.load import DEFAULT_REGISTRY_PATH, DEFAULT_RETRIEVERS_PATH, load_registry, registry_at

__all__ = [
    "DEFAULT_REGISTRY_PATH",
    "DEFAULT_RETRIEVERS",
    "DEFAULT_RETRIEVERS_PATH",
    "DatasetConfig",
    "Registry",
    "load_registry",
    "registry_at",
]
