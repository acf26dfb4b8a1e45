"""Dataset kinds: one adapter module per kind (the protocol is :mod:`.base`).

Importing the package imports every module in it, so each kind's adapter registers itself; a new
kind is one new module here.
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
    "register_adapter",
    "unregister_adapter",
    "validate_kind_blocks",
]


def _import_kinds() -> None:
    """Import every module of the package: each one registers its kind."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_import_kinds()
