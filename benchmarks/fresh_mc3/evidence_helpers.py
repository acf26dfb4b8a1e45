"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The second set's helpers (``benchmarks/fresh_mc2/evidence_helpers.py``, which re-export the first set's ``norm``,
``run``, ``attr_doc``, ``doc``, ``has``, ``defined_anywhere`` and add ``invocation_context``, ``events_of`` and
``outcome``), loaded by path and re-exported; this set needs nothing besides.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "fresh_mc2_evidence_helpers", Path(__file__).resolve().parent.parent / "fresh_mc2" / "evidence_helpers.py"
)
assert _spec is not None and _spec.loader is not None
_second = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_second)

norm = _second.norm
run = _second.run
attr_doc = _second.attr_doc
doc = _second.doc
has = _second.has
defined_anywhere = _second.defined_anywhere
invocation_context = _second.invocation_context
events_of = _second.events_of
outcome = _second.outcome


def members(cls: type, *names: str) -> None:
    """Print, for each name, whether ``cls`` has it as an attribute or as a pydantic field."""
    fields = getattr(cls, "model_fields", {})
    print(cls.__name__, {name: hasattr(cls, name) or name in fields for name in names})
