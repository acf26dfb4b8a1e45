"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The eighth set's helpers (``benchmarks/fresh_mc8/evidence_helpers.py``, which re-export the earlier sets' ``norm``,
``run``, ``attr_doc``, ``doc``, ``has``, ``defined_anywhere``, ``invocation_context``, ``events_of``, ``outcome``,
``members`` and ``cli_options``), loaded by path and re-exported (put into this module's namespace by name). This
set adds ``read_anywhere``: whether an identifier occurs anywhere in google.adk's source (for keyword names that a
pydantic model keeping extra fields would accept silently).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

_NAMES = [
    "norm", "run", "attr_doc", "doc", "has", "defined_anywhere", "invocation_context", "events_of", "outcome", "members",
    "cli_options",
]  # fmt: skip

_path = Path(__file__).resolve().parent.parent / "fresh_mc8" / "evidence_helpers.py"
_spec = importlib.util.spec_from_file_location("fresh_mc8_evidence_helpers", _path)
assert _spec is not None and _spec.loader is not None
_eighth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_eighth)
globals().update({name: getattr(_eighth, name) for name in _NAMES})


def read_anywhere(*names: str) -> None:
    """Print, for each name, whether it occurs as a whole identifier in any module of the installed google.adk."""
    import google.adk

    root = Path(google.adk.__file__).parent
    texts = [path.read_text(encoding="utf-8", errors="replace") for path in sorted(root.rglob("*.py"))]
    found = {name: any(re.search(rf"\b{re.escape(name)}\b", text) for text in texts) for name in names}
    print("occurs in google.adk:", found)
