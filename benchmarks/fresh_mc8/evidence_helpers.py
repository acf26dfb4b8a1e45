"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The seventh set's helpers (``benchmarks/fresh_mc7/evidence_helpers.py``, which re-export the earlier sets' ``norm``,
``run``, ``attr_doc``, ``doc``, ``has``, ``defined_anywhere``, ``invocation_context``, ``events_of``, ``outcome``,
``members`` and ``cli_options``), loaded by path and re-exported (put into this module's namespace by name). This
set adds nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_NAMES = [
    "norm", "run", "attr_doc", "doc", "has", "defined_anywhere", "invocation_context", "events_of", "outcome", "members",
    "cli_options",
]  # fmt: skip

_path = Path(__file__).resolve().parent.parent / "fresh_mc7" / "evidence_helpers.py"
_spec = importlib.util.spec_from_file_location("fresh_mc7_evidence_helpers", _path)
assert _spec is not None and _spec.loader is not None
_seventh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_seventh)
globals().update({name: getattr(_seventh, name) for name in _NAMES})
