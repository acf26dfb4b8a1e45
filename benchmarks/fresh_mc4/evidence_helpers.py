"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The third set's helpers (``benchmarks/fresh_mc3/evidence_helpers.py``, which re-export the second and first sets'
``norm``, ``run``, ``attr_doc``, ``doc``, ``has``, ``defined_anywhere``, ``invocation_context``, ``events_of``,
``outcome`` and add ``members``), loaded by path and re-exported; this set needs nothing besides.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "fresh_mc3_evidence_helpers", Path(__file__).resolve().parent.parent / "fresh_mc3" / "evidence_helpers.py"
)
assert _spec is not None and _spec.loader is not None
_third = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_third)

norm = _third.norm
run = _third.run
attr_doc = _third.attr_doc
doc = _third.doc
has = _third.has
defined_anywhere = _third.defined_anywhere
invocation_context = _third.invocation_context
events_of = _third.events_of
outcome = _third.outcome
members = _third.members
