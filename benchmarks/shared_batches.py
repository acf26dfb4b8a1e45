"""The verifier with its questions' proofs in shared batches, for several QUESTIONS_PER_SLOT: time, CPU and verdicts, in one run.

Proves the dev ADK multiple-choice questions (``configure_adk_features_mc``, google-adk in ``.venvs/adk``) or,
with ``--stdlib``, the project's sample (this interpreter) once per value of
:data:`~retrieval_pipeline.core.verifier.verify.QUESTIONS_PER_SLOT`, on one library probe and without a verdict
cache. ``1`` is the verifier before shared batches (one question per batch slot: each question's proofs a batch
of their own). Prints wall seconds, the machine's busy CPU seconds (``/proc/stat``: sandboxes included; run it
on an otherwise idle machine), the ratios to ``1``, and whether every verdict is the same.

    .venv/bin/python benchmarks/shared_batches.py [--stdlib] [--per-slot 1 2 3 4 6]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from retrieval_pipeline.core.datasets.suite.reader import load_suite
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier import verify
from retrieval_pipeline.core.verifier.proofs.library_index import probe_environment

PROJECT = Path(__file__).resolve().parents[1]
ADK_SUITE = PROJECT.parent / "shared/data/adk/benchmark_definitions/configure_adk_features_mc/benchmark.yaml"
STDLIB_SUITE = PROJECT / "data/samples/stdlib/multiple_choice.yaml"


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (every process, the sandboxes' included)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdlib", action="store_true", help="the project's sample suite on this interpreter")
    parser.add_argument("--per-slot", type=int, nargs="+", default=[1, 2, 3, 4, 6])
    args = parser.parse_args()
    if args.stdlib:
        settings, cases = SandboxSettings(), load_suite(STDLIB_SUITE).cases
        index = probe_environment(settings)
    else:
        verifier = load_registry().get("adk_v1_24_1").verifier
        settings = SandboxSettings(python=PROJECT / ".venvs/adk/bin/python", timeout_s=verifier.timeout_s, memory_mb=verifier.memory_mb)
        cases = load_suite(ADK_SUITE).cases
        index = probe_environment(settings, verifier.library, import_name=verifier.import_name)
    seen, base = {}, None
    for per_slot in args.per_slot:
        verify.QUESTIONS_PER_SLOT = per_slot
        cpu, started = busy_cpu_s(), time.perf_counter()
        run = verify.run_verification(cases, sandbox_settings=settings, index=index, cache=None)
        wall, cpu = time.perf_counter() - started, busy_cpu_s() - cpu
        base = base or (wall, cpu)
        seen[per_slot] = {v.case_id: (v.verdict, tuple(v.proven_true), tuple(v.proven_false)) for v in run.verdicts}
        print(f"QUESTIONS_PER_SLOT={per_slot}: {len(run.verdicts)} questions, {wall:.1f} s ({wall / base[0]:.2f}x), "
              f"{cpu:.1f} CPU-s ({cpu / base[1]:.2f}x)")  # fmt: skip
    first = next(iter(seen.values()))
    print("every verdict the same:", all(verdicts == first for verdicts in seen.values()))


if __name__ == "__main__":
    main()
