"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The fifth set's helpers (``benchmarks/fresh_mc5/evidence_helpers.py``, which re-export the earlier sets' ``norm``,
``run``, ``attr_doc``, ``doc``, ``has``, ``defined_anywhere``, ``invocation_context``, ``events_of``, ``outcome``
and ``members``), loaded by path and re-exported; this set needs nothing besides.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "fresh_mc5_evidence_helpers", Path(__file__).resolve().parent.parent / "fresh_mc5" / "evidence_helpers.py"
)
assert _spec is not None and _spec.loader is not None
_fifth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fifth)

norm = _fifth.norm
run = _fifth.run
attr_doc = _fifth.attr_doc
doc = _fifth.doc
has = _fifth.has
defined_anywhere = _fifth.defined_anywhere
invocation_context = _fifth.invocation_context
events_of = _fifth.events_of
outcome = _fifth.outcome
members = _fifth.members
