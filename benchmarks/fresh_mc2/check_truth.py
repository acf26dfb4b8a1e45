"""Re-establish the truth of the second fresh multiple-choice set by running google-adk.

The same machinery as ``benchmarks/fresh_mc/check_truth.py`` (loaded from there, not copied), pointed at this
folder: ``truth.yaml`` holds, per question id, the options that are true on each library version and the
evidence (a Python snippet and what it printed on each version). Every snippet is run again in each version's
virtual environment, in its own subprocess with a timeout, and its output must be the recorded one; every
question of the three suites must have an entry, and the suite's key must be among the options true on 2.13.

    .venv/bin/python benchmarks/fresh_mc2/check_truth.py            # check (exit 1 on any difference)
    .venv/bin/python benchmarks/fresh_mc2/check_truth.py --only ID  # one question
    .venv/bin/python benchmarks/fresh_mc2/check_truth.py --record   # write what the snippets print now

``--record`` only refreshes the ``printed`` texts; the true letters are a reader's judgment of that output
and are never written by this script.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = ("configure_fresh2_mc", "diagnose_fresh2_mc", "predict_fresh2_mc")


def checker_for(here: Path, suites: tuple[str, str, str], which: str):
    """``benchmarks/fresh_mc/check_truth.py`` as a module of its own, with its layout pointed at the set in ``here``.

    ``suites`` are the set's configure, diagnose and predict suites; ``which`` names the set in the truth file's
    header ("second", "third"). Later sets load this function by path, as this file loads the first set's script.
    """
    spec = importlib.util.spec_from_file_location(f"{here.name}_check_truth_base", here.parent / "fresh_mc" / "check_truth.py")
    assert spec is not None and spec.loader is not None
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    base.HERE = here
    base.TRUTH = here / "truth.yaml"
    base.SUITES = suites
    base.IMPORT_DIRS = (
        here,
        here / "benchmarks/benchmark_definitions" / suites[1],
        here / "benchmarks/benchmark_definitions" / suites[2] / "cases",
    )
    base.TRUTH_HEADER = base.TRUTH_HEADER.replace("fresh multiple-choice", f"{which} set of fresh multiple-choice").replace(
        "benchmarks/fresh_mc/", f"benchmarks/{here.name}/"
    )
    return base


_base = checker_for(HERE, SUITES, "second")
VERSIONS = _base.VERSIONS
suite_keys = _base.suite_keys
main = _base.main


if __name__ == "__main__":
    sys.exit(main())
