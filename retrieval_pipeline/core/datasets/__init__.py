"""Dataset kinds: one folder per kind, ``<kind>/adapter.py`` plus its reader and helpers (the protocol is :mod:`.base`).

Importing the package imports every kind's ``adapter`` module, so each kind registers itself; a new
kind is one new folder here.
"""

from __future__ import annotations

import importlib
import pkgutil

from retrieval_pipeline.core.datasets.base import (
    CASE_JSON_FIELDS,
    DEFAULT_KIND,
    Block,
    CasesBuild,
    CorpusBuild,
    DatasetAdapter,
    PairBuilder,
    QueryColumns,
    SettingsBlock,
    adapter_for,
    adapter_of_kind,
    adapters,
    all_blocks,
    block_owners,
    gold_pair,
    register_adapter,
    unregister_adapter,
    validate_kind_blocks,
)

__all__ = [
    "CASE_JSON_FIELDS",
    "DEFAULT_KIND",
    "Block",
    "CasesBuild",
    "CorpusBuild",
    "DatasetAdapter",
    "PairBuilder",
    "QueryColumns",
    "SettingsBlock",
    "adapter_for",
    "adapter_of_kind",
    "adapters",
    "all_blocks",
    "block_owners",
    "gold_pair",
    "register_adapter",
    "unregister_adapter",
    "validate_kind_blocks",
]


def _import_kinds() -> None:
    """Import the adapter of every kind folder of the package: each one registers its kind."""
    for module in pkgutil.iter_modules(__path__):
        if module.ispkg:
            importlib.import_module(f"{__name__}.{module.name}.adapter")


_import_kinds()
