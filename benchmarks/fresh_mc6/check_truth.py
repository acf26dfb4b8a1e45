"""Re-establish the truth of the sixth fresh multiple-choice set by running google-adk.

The same machinery as ``benchmarks/fresh_mc/check_truth.py``, pointed at this folder by
``benchmarks/fresh_mc2/check_truth.py::checker_for`` (both loaded by path, nothing copied): ``truth.yaml`` holds, per
question id, the options that are true on each library version and the evidence (a Python snippet and what it
printed on each version). Every snippet is run again in each version's virtual environment, in its own subprocess
with a timeout, and its output must be the recorded one; every question of the three suites must have an entry, and
the suite's key must be among the options true on 2.13.

    .venv/bin/python benchmarks/fresh_mc6/check_truth.py            # check (exit 1 on any difference)
    .venv/bin/python benchmarks/fresh_mc6/check_truth.py --only ID  # one question
    .venv/bin/python benchmarks/fresh_mc6/check_truth.py --record   # write what the snippets print now

``--record`` only refreshes the ``printed`` texts; the true letters are a reader's judgment of that output
and are never written by this script.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = ("configure_fresh6_mc", "diagnose_fresh6_mc", "predict_fresh6_mc")

_spec = importlib.util.spec_from_file_location("fresh_mc2_check_truth", HERE.parent / "fresh_mc2" / "check_truth.py")
assert _spec is not None and _spec.loader is not None
_second = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_second)

_base = _second.checker_for(HERE, SUITES, "sixth")
VERSIONS = _base.VERSIONS
suite_keys = _base.suite_keys
main = _base.main


if __name__ == "__main__":
    sys.exit(main())
