"""Retriever kinds: one module per kind, each registering its spec with ``register_kind``.

Every module in this package is imported here, so a new kind is a new file and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
