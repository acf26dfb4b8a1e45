"""The verifier with and without preloading the library in each batch's runner: time and verdicts, in one run.

Proves the dev ADK multiple-choice questions (``configure_adk_features_mc``) against google-adk in
``.venvs/adk`` twice, on one library probe: once as the verifier runs them (the runner imports the modules of
the library that two or more proofs name, ``SandboxSettings.preload``) and once with preloading turned off.
Prints the seconds of each and whether every verdict is the same.

    .venv/bin/python benchmarks/verifier_preload.py [--questions 61] [--python .venvs/adk/bin/python]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from retrieval_pipeline.core.datasets.suite.reader import load_suite
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.proofs.library_index import probe_environment
from retrieval_pipeline.core.verifier.verify import run_verification

PROJECT = Path(__file__).resolve().parents[1]
SUITE = PROJECT.parent / "shared/data/adk/benchmark_definitions/configure_adk_features_mc/benchmark.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=61)
    parser.add_argument("--python", type=Path, default=PROJECT / ".venvs/adk/bin/python")
    args = parser.parse_args()
    cases = load_suite(SUITE).cases[: args.questions]
    verifier = load_registry().get("adk_v1_24_1").verifier
    base = SandboxSettings(python=args.python, timeout_s=verifier.timeout_s, memory_mb=verifier.memory_mb)
    index = probe_environment(base, verifier.library, import_name=verifier.import_name)
    seen = {}
    for mode, preload in [("preloaded", ()), ("not preloaded", ("no.such.package",))]:
        settings = SandboxSettings(python=args.python, timeout_s=verifier.timeout_s, memory_mb=verifier.memory_mb, preload=preload)
        started = time.perf_counter()
        run = run_verification(
            cases, sandbox_settings=settings, library=verifier.library, import_name=verifier.import_name, cache=None, index=index
        )
        print(f"{mode:>14}: {time.perf_counter() - started:6.1f} s for {len(cases)} questions", flush=True)
        seen[mode] = [(v.case_id, v.verdict, v.proven_true, v.proven_false, v.undecided, v.consistent) for v in run.verdicts]
    print("same verdicts:", seen["preloaded"] == seen["not preloaded"])


if __name__ == "__main__":
    main()
