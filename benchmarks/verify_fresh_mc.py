"""Score the question verifier against questions written after its rules, by someone who did not read them.

``benchmarks/fresh_mc/`` holds multiple-choice questions of the three ADK suites' kinds (configure, diagnose,
predict) whose truth was established by running google-adk 2.13 and 1.20 (``truth.yaml``, re-checked by
``fresh_mc/check_truth.py``), not by the verifier. This script proves every option once with the dataset's verifier
settings (as ``verify_adk_mc.py --moved --every-other`` does), decides the unmodified question and every mutant (the
mark moved to each other option), and scores both against that truth for the library version it ran:

- per option: proven ``true`` although the truth says it is not (a false true), proven ``false`` although it is true
  (a false false); ``consistent`` and ``undecided`` are no claim;
- per question: the verdicts, a **false Incorrect** (the key is true, the verdict says it is disproven), a **false
  Ambiguous** (the distractor it names as also working is not true), a **false Valid** (the mark is not true);
- per mutant whose mark is not true: flagged (Incorrect or Ambiguous), and false Valid;
- "None of the above" (or "All of the above") proven true from the other options: how often that is right.

    .venv/bin/python benchmarks/verify_fresh_mc.py                                    # google-adk 2.13 (the registry's)
    .venv/bin/python benchmarks/verify_fresh_mc.py --python .venvs/adk120/bin/python  # google-adk 1.20
    .venv/bin/python benchmarks/verify_fresh_mc.py --root benchmarks/fresh_mc7 --counts-only   # the held-out set
    .venv/bin/python benchmarks/verify_fresh_mc.py --root benchmarks/fresh_mc --root benchmarks/fresh_mc2 --halves

``--root`` may be given several times: the sets are proven in one run and scored together. ``--halves`` adds a
scorecard per half of the questions (``verify_adk_mc.half_of``: the first hex digit of sha256(case id) even or odd),
so sets that are design material now can serve as a design half and a check half as the dev questions do.

Each set is held out until it is scored once (``--counts-only``: counts, never which question); then its failures are
looked at and may become rules, and a new set is written (``docs/verifier.md``, "Questions written after the rules").
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from verify_adk_mc import HALVES, half_of, verify_offline  # noqa: E402

from retrieval_pipeline.core.datasets.suite.loading import load_suites  # noqa: E402
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry  # noqa: E402
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS  # noqa: E402
from retrieval_pipeline.core.verifier.verdicts.verdict import VERDICTS, decide  # noqa: E402

FRESH = Path(__file__).resolve().parent / "fresh_mc"
FLAGS = ("Incorrect", "Ambiguous")


def suite_files(root: Path = FRESH) -> list[Path]:
    """The fresh suites' YAML files, laid out as the ADK data is (``<root>/benchmark_definitions/<suite>/benchmark.yaml``)."""
    return sorted((root / "benchmark_definitions").glob("*/benchmark.yaml"))


def library_version(python: Path) -> str:
    """``2.13``: google-adk's major.minor version in that interpreter."""
    code = "import importlib.metadata as m; print(m.version('google-adk'))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    return ".".join(out.strip().split(".")[:2])


def score(results: list[dict[str, Any]], truth: dict[str, set[str]]) -> dict[str, Any]:
    """Score proven questions against the truth of one library version.

    ``results``: per question ``{case_id, marked, verdict, states: {letter: state}, mutants: {letter: verdict}}``;
    ``truth``: case id -> the letters true on this version. A question without a truth entry is an error: the truth
    file must cover every question.
    """
    missing = [r["case_id"] for r in results if r["case_id"] not in truth]
    if missing:
        raise ValueError(f"truth.yaml has no entry for {missing}")
    card: dict[str, Any] = {"questions": len(results), **{v: 0 for v in VERDICTS}}
    errors: dict[str, list[str]] = {"false_true": [], "false_false": [], "false_incorrect": [], "false_ambiguous": [],
                                    "false_valid": [], "false_valid_mutant": []}  # fmt: skip
    key_wrong = mutants = flagged = 0
    derived_true = {"right": 0, "wrong": 0}
    for r in results:
        case, true = r["case_id"], truth[r["case_id"]]
        card[r["verdict"]] += 1
        for letter in r.get("derived", []):  # "None/All of the above" decided from the other options
            if r["states"].get(letter) == "true":
                derived_true["right" if letter in true else "wrong"] += 1
        for letter, state in r["states"].items():
            if state == "true" and letter not in true:
                errors["false_true"].append(f"{case}:{letter}")
            if state == "false" and letter in true:
                errors["false_false"].append(f"{case}:{letter}")
        if r["marked"] not in true:
            key_wrong += 1
        if r["verdict"] == "Incorrect" and r["marked"] in true:
            errors["false_incorrect"].append(case)
        if r["verdict"] == "Ambiguous" and any(r["states"].get(x) == "true" and x not in true for x in r["states"]):
            errors["false_ambiguous"].append(case)
        if r["verdict"] == "Valid" and r["marked"] not in true:
            errors["false_valid"].append(case)
        for mark, verdict in r["mutants"].items():
            if mark in true:
                continue  # another true letter: not a wrong mark
            mutants += 1
            flagged += verdict in FLAGS
            if verdict == "Valid":
                errors["false_valid_mutant"].append(f"{case}:{mark}")
    card["unverifiable_share"] = round(card["Unverifiable"] / max(1, len(results)), 3)
    card["keys_not_true"] = key_wrong
    card["wrong_mutants"] = mutants
    card["wrong_mutants_flagged"] = flagged
    card["errors"] = errors
    card["derived_true"] = derived_true
    return card


def report(card: dict[str, Any], version: str, counts_only: bool) -> None:
    """Print a scorecard: the verdicts, keys not true, wrong marks flagged, and each kind of error (its questions too,
    unless ``counts_only``)."""
    print("verdicts: " + "  ".join(f"{v} {card[v]}" for v in VERDICTS) + f"  (Unverifiable {card['unverifiable_share']:.0%})")
    print(f"keys not true on {version}: {card['keys_not_true']}")
    print(f"wrong-mark mutants flagged: {card['wrong_mutants_flagged']} of {card['wrong_mutants']}")
    print(f"'None/All of the above' proven true: right {card['derived_true']['right']}, wrong {card['derived_true']['wrong']}")
    for name, found in card["errors"].items():
        print(f"{name.replace('_', ' ')}: {len(found)}" + (f"  {found}" if found and not counts_only else ""))


def _counts(card: dict[str, Any]) -> dict[str, Any]:
    """The scorecard with each kind of error as a count, not its questions (a held-out set's)."""
    return {**card, "errors": {name: len(found) for name, found in card["errors"].items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY_PATH)
    parser.add_argument("--dataset", default="adk_v1_24_1", help="whose verifier settings to use")
    parser.add_argument("--python", type=Path, default=None, help="override verifier.python")
    parser.add_argument("--root", type=Path, action="append", help="a fresh set's files root (repeat for several)")
    parser.add_argument("--halves", action="store_true", help="also score the design half and the check half apart")
    parser.add_argument("--json", type=Path, default=None, help="also write the scorecard and every question's states here")
    parser.add_argument(
        "--counts-only",
        action="store_true",
        help="a held-out set: print and write counts only, never which question (its failures are not to be looked at)",
    )
    args = parser.parse_args(argv)

    started = time.monotonic()
    settings = load_registry(args.registry).get(args.dataset).verifier
    if args.python is not None:
        settings = settings.model_copy(update={"python": args.python.absolute()})
    version = library_version(Path(settings.python))
    roots = args.root or [FRESH]
    truth: dict[str, set[str]] = {}
    questions = []
    for root in roots:
        raw = yaml.safe_load((root / "truth.yaml").read_text(encoding="utf-8"))
        truth |= {case: set(entry["truth"][version]) for case, entry in raw.items()}
        loaded = load_suites(suite_files(root), files_root=root)
        if loaded.rejects:
            raise SystemExit(f"rejected cases in {root}: {[(r.case_id, r.reason) for r in loaded.rejects]}")
        questions += [c for c in loaded.cases if c.benchmark_type == "multiple_choice"]
    print(f"google-adk {version} ({settings.python}); {len(questions)} questions from {', '.join(map(str, roots))}", flush=True)
    run = verify_offline(questions, settings)
    results = []
    for v in run.verdicts:
        results.append({
            "case_id": v.case_id, "marked": v.marked, "verdict": v.verdict,
            "states": {e.letter: e.state for e in v.evidence},
            "derived": [e.letter for e in v.evidence if e.claim.kind in DERIVED_KINDS],
            "mutants": {e.letter: decide(v.case_id, e.letter, copy.deepcopy(v.evidence)).verdict
                        for e in v.evidence if e.letter != v.marked},
            "notes": {e.letter: f"{e.state} [{e.claim.kind}] {e.note}"[:300] for e in v.evidence},
        })  # fmt: skip
    card = score(results, truth)
    print()
    report(card, version, args.counts_only)
    halves = {half: score([r for r in results if half_of(r["case_id"]) == half], truth) for half in HALVES} if args.halves else {}
    for half, half_card in halves.items():
        print(f"\n{half} half ({half_card['questions']} questions):")
        report(half_card, version, args.counts_only)
    print(f"wall {time.monotonic() - started:.1f} s")
    if args.json:
        if args.counts_only:  # which questions erred stays unwritten: only how many
            card, halves = _counts(card), {half: _counts(c) for half, c in halves.items()}
        kept = {"version": version, "scorecard": card, **({"halves": halves} if halves else {}),
                **({} if args.counts_only else {"questions": results})}  # fmt: skip
        args.json.write_text(json.dumps(kept, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
