"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The fourth set's helpers (``benchmarks/fresh_mc4/evidence_helpers.py``, which re-export the earlier sets' ``norm``,
``run``, ``attr_doc``, ``doc``, ``has``, ``defined_anywhere``, ``invocation_context``, ``events_of``, ``outcome``
and ``members``), loaded by path and re-exported; this set needs nothing besides.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "fresh_mc4_evidence_helpers", Path(__file__).resolve().parent.parent / "fresh_mc4" / "evidence_helpers.py"
)
assert _spec is not None and _spec.loader is not None
_fourth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fourth)

norm = _fourth.norm
run = _fourth.run
attr_doc = _fourth.attr_doc
doc = _fourth.doc
has = _fourth.has
defined_anywhere = _fourth.defined_anywhere
invocation_context = _fourth.invocation_context
events_of = _fourth.events_of
outcome = _fourth.outcome
members = _fourth.members
