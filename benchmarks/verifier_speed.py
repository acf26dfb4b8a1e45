"""Time the question verifier on a dataset's multiple-choice questions (issue 10, item 3).

Runs what the ``verify_questions`` asset runs (:func:`~retrieval_pipeline.core.verifier.questions.check_questions`:
the library probe, every question proven in the sandbox, then the fixes proposed for the flagged ones
and re-verified), writing its reports into a temporary folder. Prints the number of questions, the
proofs run and the sandbox processes started (the probe counted apart), the seconds of each phase and
the load average before and after (a loaded machine inflates the seconds: compare runs made back to
back). ``--verdicts FILE`` writes every question's verdict and the state of each of its options as
JSON, and ``--compare FILE`` checks them against such a file (exit status 1 when a verdict or an
option's state differs).

    .venv/bin/python benchmarks/verifier_speed.py                         # the stdlib sample, 32 questions
    .venv/bin/python benchmarks/verifier_speed.py --dataset adk_v1_24_1   # the real ADK suite (.venvs/adk)
    .venv/bin/python benchmarks/verifier_speed.py --verify-only --verdicts /tmp/before.json
    .venv/bin/python benchmarks/verifier_speed.py --cache-dir /tmp/vc   # twice: cold, then an unchanged re-run

``--cache-dir DIR`` uses the verdict cache there, as the asset does with the project's cache folder
(:mod:`~retrieval_pipeline.core.verifier.verdicts.verdict_cache`); it prints how many verdicts were reused and proven.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.datasets.suite.reader import load_suite
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.core.services.sandbox import bubblewrap as sandbox_module
from retrieval_pipeline.core.verifier import questions as questions_module
from retrieval_pipeline.core.verifier import verify as verify_module
from retrieval_pipeline.core.verifier.verdicts.verdict import Verdict


@dataclass
class Counts:
    """Sandbox processes started and proof files run in them, per phase (thread-safe)."""

    phase: str = "probe"
    processes: dict[str, int] = field(default_factory=dict)
    proofs: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_process(self, argv: Sequence[str]) -> None:
        """Count one sandbox process: ``probe`` when it runs the environment probe, else the current phase."""
        phase = "probe" if any("probe_environment" in str(a) for a in argv) else self.phase
        with self.lock:
            self.processes[phase] = self.processes.get(phase, 0) + 1

    def add_proofs(self, number: int) -> None:
        """Count proofs run in the current phase."""
        with self.lock:
            self.proofs[self.phase] = self.proofs.get(self.phase, 0) + number


def mc_cases(dataset: str) -> list[Case]:
    """The multiple-choice cases of a registry dataset's suites."""
    config = load_registry().get(dataset)
    root = getattr(config, "suite_files_root", None)
    cases: list[Case] = []
    for path in config.suites:
        cases += [c for c in load_suite(path, files_root=root).cases if c.benchmark_type == "multiple_choice"]
    return cases


@contextmanager
def counting(counts: Counts) -> Iterator[None]:
    """Count sandbox processes (``run_in_sandbox``) and proofs run; time the verification and remediation phases.

    A batch of proofs (``run_pytest_batch``, where it exists) is one process running several proofs; a
    proof run alone (``run_pytest``) is one process running one.
    """
    # every sandboxed process goes through sandboxed where it exists (run_in_sandbox and the batch alike)
    entry = "sandboxed" if hasattr(sandbox_module, "sandboxed") else "run_in_sandbox"
    real_run = getattr(sandbox_module, entry)
    real_single, real_batch = verify_module.run_pytest, getattr(verify_module, "run_pytest_batch", None)
    fixes_name = "propose_fixes" if hasattr(questions_module, "propose_fixes") else "remediate"
    real_verify, real_fixes = questions_module.run_verification, getattr(questions_module, fixes_name)

    def run_in_sandbox(files: Any, argv: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        counts.add_process(argv)
        return real_run(files, argv, *args, **kwargs)

    def run_pytest(*args: Any, **kwargs: Any) -> Any:
        counts.add_proofs(1)
        return real_single(*args, **kwargs)

    def run_pytest_batch(tests: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        counts.add_proofs(len(tests))
        return real_batch(tests, *args, **kwargs)  # type: ignore[misc]

    def timed(phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts.phase = phase
            started = time.monotonic()
            try:
                return function(*args, **kwargs)
            finally:
                counts.seconds[phase] = round(counts.seconds.get(phase, 0.0) + time.monotonic() - started, 2)

        return wrapper

    setattr(sandbox_module, entry, run_in_sandbox)
    verify_module.run_pytest = run_pytest
    if real_batch is not None:
        verify_module.run_pytest_batch = run_pytest_batch
    questions_module.run_verification = timed("verify", real_verify)
    setattr(questions_module, fixes_name, timed("remediate", real_fixes))
    try:
        yield
    finally:
        setattr(sandbox_module, entry, real_run)
        verify_module.run_pytest = real_single
        if real_batch is not None:
            verify_module.run_pytest_batch = real_batch
        questions_module.run_verification = real_verify
        setattr(questions_module, fixes_name, real_fixes)


def verdict_states(verdicts: Sequence[Verdict]) -> dict[str, dict[str, Any]]:
    """Case id -> its verdict and the state of every option: what a before/after comparison looks at."""
    return {v.case_id: {"verdict": v.verdict, "options": {e.letter: e.state for e in v.evidence}} for v in verdicts}


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """Lines naming every question whose verdict or option states differ (empty when identical)."""
    lines = []
    for case_id in sorted(set(before) | set(after)):
        old, new = before.get(case_id), after.get(case_id)
        if old != new:
            lines.append(f"{case_id}: {old} -> {new}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="stdlib", help="registry dataset (default: stdlib)")
    parser.add_argument("--verify-only", action="store_true", help="skip the remediation of flagged questions")
    parser.add_argument("--verdicts", type=Path, help="write the verdicts and option states as JSON here")
    parser.add_argument("--compare", type=Path, help="compare with verdicts written earlier by --verdicts")
    parser.add_argument("--reports", type=Path, help="keep quality_report.json/.md (and proposals) in this folder")
    parser.add_argument("--cache-dir", type=Path, help="use the verdict cache in this folder (default: none, every question proven)")
    args = parser.parse_args(argv)

    config = load_registry().get(args.dataset)
    cases = mc_cases(args.dataset)
    counts = Counts()
    load_before = os.getloadavg()
    started = time.monotonic()
    real_remediate = questions_module.remediate
    if args.verify_only:
        questions_module.remediate = lambda *a, **k: []
    try:
        with tempfile.TemporaryDirectory(prefix="rp_verifier_speed_") as scratch, counting(counts):
            out = args.reports or Path(scratch)
            checked = questions_module.check_questions(
                cases,
                config.verifier,
                dataset=args.dataset,
                report_path=Path(out) / "quality_report.json",
                proposals_path=Path(out) / "proposed_fixes.yaml",
                cache_dir=args.cache_dir,
            )
            report_md = (Path(out) / "quality_report.md").read_text()
            probe_seconds = json.loads((Path(out) / "quality_report.json").read_text())["meta"].get("probe_seconds")
    finally:
        questions_module.remediate = real_remediate
    total = time.monotonic() - started
    load_after = os.getloadavg()

    states = {row.case_id: {"verdict": row.verdict} for row in checked.verdicts.itertuples()}
    for case_id, entry in states.items():
        evidence = json.loads(checked.verdicts.set_index("case_id").loc[case_id, "evidence"]).get("evidence", [])
        entry["options"] = {e["letter"]: e["state"] for e in evidence}
    verdict_counts = {k.split("/", 1)[1]: v for k, v in checked.verdicts_metadata.items() if k.startswith("verdict/")}
    print(f"dataset:            {args.dataset} ({report_md.splitlines()[0].lstrip('# ')})")
    print(f"cpu cores:          {os.cpu_count()}")
    print(f"load average:       {' '.join(f'{x:.2f}' for x in load_before)} before, {' '.join(f'{x:.2f}' for x in load_after)} after")
    print(f"questions:          {len(checked.verdicts)}  {verdict_counts}")
    if args.cache_dir is not None:
        reused, proven = checked.verdicts_metadata.get("verdicts_reused", 0), checked.verdicts_metadata.get("verdicts_proven", 0)
        print(f"verdict cache:      {reused} reused, {proven} proven now ({args.cache_dir})")
    if probe_seconds is not None:
        print(f"probe seconds:      {probe_seconds} (inside the verify phase)")
    for phase in ("probe", "verify", "remediate"):
        if phase in counts.processes or phase in counts.seconds:
            print(f"{phase + ':':<19} {counts.proofs.get(phase, 0):4d} proofs run, {counts.processes.get(phase, 0):4d} sandbox processes"
                  + (f", {counts.seconds[phase]:7.2f} s" if phase in counts.seconds else ""))  # fmt: skip
    proofs, processes = sum(counts.proofs.values()), sum(counts.processes.values())
    print(f"total:              {proofs:4d} proofs run, {processes:4d} sandbox processes, {total:7.2f} s")
    if args.verdicts:
        args.verdicts.write_text(json.dumps(states, indent=1, sort_keys=True))
        print(f"verdicts written to {args.verdicts}")
    if args.compare:
        differences = compare(json.loads(args.compare.read_text()), states)
        print(
            f"compared with {args.compare}: "
            + ("identical verdicts and option states" if not differences else f"{len(differences)} differ")
        )
        for line in differences:
            print("  " + line)
        return 1 if differences else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
