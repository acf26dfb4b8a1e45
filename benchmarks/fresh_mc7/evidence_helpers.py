"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The sixth set's helpers (``benchmarks/fresh_mc6/evidence_helpers.py``, which re-export the earlier sets' ``norm``,
``run``, ``attr_doc``, ``doc``, ``has``, ``defined_anywhere``, ``invocation_context``, ``events_of``, ``outcome``
and ``members``), loaded by path and re-exported, and ``cli_options``, which this set adds.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "fresh_mc6_evidence_helpers", Path(__file__).resolve().parent.parent / "fresh_mc6" / "evidence_helpers.py"
)
assert _spec is not None and _spec.loader is not None
_sixth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sixth)

norm = _sixth.norm
run = _sixth.run
attr_doc = _sixth.attr_doc
doc = _sixth.doc
has = _sixth.has
defined_anywhere = _sixth.defined_anywhere
invocation_context = _sixth.invocation_context
events_of = _sixth.events_of
outcome = _sixth.outcome
members = _sixth.members


def cli_options(command: list[str], *options: str) -> str:
    """Print, for each option, whether ``adk <command> --help`` lists it; return that help text."""
    from click.testing import CliRunner
    from google.adk.cli.cli_tools_click import main

    out = CliRunner().invoke(main, [*command, "--help"]).output
    listed = set(re.findall(r"--[a-zA-Z0-9_-]+", out))
    print("adk", " ".join(command), {option: option in listed for option in options})
    return out
