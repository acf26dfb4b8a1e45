"""Verify the ADK multiple-choice questions through the dataset registry's own verifier setting.

Loads ``data/config/datasets.yaml``, takes the dataset (``adk_v1_24_1``), reads its cases the way
``raw_cases`` does, keeps the multiple-choice ones and runs the question check the ``verify_questions``
asset runs (:func:`retrieval_pipeline.core.verifier.questions.check_questions`: probe, prove every
option in the sandbox, decide, propose fixes for Ambiguous/Incorrect). Prints the verdict counts, the
questions per verdict (with a one-line reason for Incorrect and Ambiguous), the probe's coverage and the
wall time. The reports go to ``--out`` (a temporary folder by default), never into the project.

    .venv/bin/python benchmarks/verify_adk_mc.py                                   # the registry's interpreter
    .venv/bin/python benchmarks/verify_adk_mc.py --python .venvs/adk120/bin/python # another google-adk
    .venv/bin/python benchmarks/verify_adk_mc.py --json after.json --baseline before.json  # what is newly decided

``--json`` also records, per question, every option's claim kind, state and the prover that decided it;
``--baseline`` (an earlier ``--json``) lists the questions that were Unverifiable there and are decided now, with
the claims that decided them, and any new Incorrect. ``--prover llm`` with ``--llm-base-url``/``--llm-model``
(or ``RETRIEVAL_LLM_BASE_URL``/``RETRIEVAL_LLM_MODEL``; the key only from ``RETRIEVAL_LLM_API_KEY``) asks an LLM
about what the offline proofs left open.

The two suites of questions about code (``diagnose_setup_errors_mc``, ``predict_runtime_behavior_mc``: each option
is decided against one run of the question's snippet) are verified with the dataset's own suites (``--suite`` names
others; ``--suite none`` none). Verdicts are counted per suite. ``--moved`` verifies a mutated copy instead: every
question's marked answer moved to the next option (cyclically; ``--skip-derived``: the next one that is not
"None/All of the above"), and reports how many copies are flagged (Incorrect or Ambiguous); no fixes are proposed
then. ``--moved --every-other`` decides every mutant: the marked answer moved to each other option in turn, and prints
the scorecard per half of the questions (:func:`half_of`: sha256 of the id, first hex digit even = ``design``, odd =
``check``): the unmodified verdicts, the next-option mutants flagged (what ``--moved`` flags), every mutant flagged, and
the false Valid (a mutant whose wrong mark comes out Valid). ``--half design|check`` verifies that half alone.

    .venv/bin/python benchmarks/verify_adk_mc.py --json after.json
    .venv/bin/python benchmarks/verify_adk_mc.py --moved --json moved.json
    .venv/bin/python benchmarks/verify_adk_mc.py --moved --every-other --json card.json          # the scorecard per half

Run one at a time: every option is a pytest run in bubblewrap.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.datasets.inputs import load_cases
from retrieval_pipeline.core.datasets.suite.loading import load_suites, suite_name
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS
from retrieval_pipeline.core.verifier.questions import check_questions
from retrieval_pipeline.core.verifier.verdicts.verdict import VERDICTS, decide
from retrieval_pipeline.core.verifier.verify import run_verification

#: The suites of questions about code, beside the dataset's own (``<suite_files_root>/benchmark_definitions/<name>``).
SNIPPET_SUITES = ("diagnose_setup_errors_mc", "predict_runtime_behavior_mc")


#: The halves of the dev questions: rules are designed on one and measured on the other (docs/verifier.md).
HALVES = ("design", "check")


def half_of(case_id: str) -> str:
    """``design`` when the first hex digit of sha256(case id) is even, else ``check``: a fixed split of the questions,
    so rules are designed on one half and their effect is measured on the other, never looked at."""
    return HALVES[int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[0], 16) % 2]


def next_letter(letters: list[str], marked: str) -> str:
    """The option after ``marked`` (cyclically): where ``--moved`` puts the mark."""
    return letters[(letters.index(marked) + 1) % len(letters)]


def scorecard(unmodified: list[dict[str, Any]], mutants: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per half (and ``all``): the unmodified verdicts, the next-option mutants flagged, every mutant flagged, and the
    false Valid: a mutant whose (wrong) moved mark comes out Valid.

    ``unmodified``: ``{case_id, verdict}`` rows; ``mutants``: ``{case_id, mark, next, verdict}`` rows (``next``: the mark
    is the option after the marked one, the ``--moved`` copy). A mutant of a question that is Incorrect unmodified
    may be the right answer on this version of the library (the key drifted): its Valid is counted apart, as
    ``valid_after_drift``, not as false.
    """
    incorrect = {row["case_id"] for row in unmodified if row["verdict"] == "Incorrect"}
    card: dict[str, dict[str, Any]] = {}
    for half in (*HALVES, "all"):
        rows = [r for r in unmodified if half in ("all", half_of(r["case_id"]))]
        muts = [m for m in mutants if half in ("all", half_of(m["case_id"]))]
        nxt = [m for m in muts if m["next"]]
        flagged = lambda ms: sum(m["verdict"] in ("Incorrect", "Ambiguous") for m in ms)  # noqa: E731
        valid = [m for m in muts if m["verdict"] == "Valid"]
        card[half] = {
            "questions": len(rows),
            **{v: sum(r["verdict"] == v for r in rows) for v in VERDICTS},
            "unverifiable_share": round(sum(r["verdict"] == "Unverifiable" for r in rows) / max(1, len(rows)), 3),
            "moved_flagged": flagged(nxt),
            "moved_total": len(nxt),
            "every_flagged": flagged(muts),
            "every_total": len(muts),
            "false_valid": [f"{m['case_id']}:{m['mark']}" for m in valid if m["case_id"] not in incorrect],
            "valid_after_drift": [f"{m['case_id']}:{m['mark']}" for m in valid if m["case_id"] in incorrect],
            "incorrect": sorted(r["case_id"] for r in rows if r["verdict"] == "Incorrect"),
        }
    return card


def print_scorecard(card: dict[str, dict[str, Any]]) -> None:
    """The scorecard as a table, one row per half."""
    print(
        f"\n{'half':7} {'n':>3} {'V':>3} {'A':>3} {'I':>3} {'U':>3} {'U%':>5} {'moved flagged':>14} {'every flagged':>14} {'false Valid':>11}"
    )
    for half, c in card.items():
        print(f"{half:7} {c['questions']:>3} {c['Valid']:>3} {c['Ambiguous']:>3} {c['Incorrect']:>3} {c['Unverifiable']:>3} "
              f"{c['unverifiable_share']:>5.0%} {c['moved_flagged']:>5} of {c['moved_total']:<5} {c['every_flagged']:>5} of "
              f"{c['every_total']:<5} {len(c['false_valid']):>11}")  # fmt: skip
    for half, c in card.items():
        if half != "all" and (c["false_valid"] or c["incorrect"] or c["valid_after_drift"]):
            print(f"  {half}: false Valid {c['false_valid']}; Incorrect unmodified {c['incorrect']}; "
                  f"Valid mutants of an Incorrect question {c['valid_after_drift']}")  # fmt: skip


def one_line(text: str, width: int = 220) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


def option_table(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """Case id -> letter -> the option's claim kind, state, decided_by and hypothesis (from the report evidence)."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for _, row in frame.iterrows():
        entry = json.loads(row["evidence"]) if row["evidence"] else {}
        table[row["case_id"]] = {
            e["letter"]: {"kind": e["claim"]["kind"], "state": e["state"], "decided_by": e.get("decided_by"),
                          "hypothesis": e["claim"]["hypothesis"]}
            for e in entry.get("evidence", [])
        }  # fmt: skip
    return table


def deciding_claims(options: dict[str, dict[str, Any]]) -> str:
    """``A=consistent[compound], B=false[cli_option], E=true[derived]``: what settled each option."""
    return ", ".join(
        f"{letter}={o['state']}[{o['kind'] if o['kind'] != 'none_of_the_above' else 'derived'}]"
        for letter, o in options.items()
        if o["state"] != "undecided"
    )


def compare(summary: dict[str, Any], baseline_path: Path) -> dict[str, Any]:
    """What changed against an earlier ``--json``: questions newly decided (with their claims) and new Incorrect."""
    before = json.loads(baseline_path.read_text(encoding="utf-8"))
    was = {case: verdict for verdict, cases in before["by_verdict"].items() for case in cases}
    now = {case: verdict for verdict, cases in summary["by_verdict"].items() for case in cases}
    newly = [
        {"case_id": case, "verdict": verdict, "claims": deciding_claims(summary["options"].get(case, {}))}
        for case, verdict in now.items()
        if verdict != "Unverifiable" and was.get(case) == "Unverifiable"
    ]
    lost = [case for case, verdict in now.items() if verdict == "Unverifiable" and was.get(case) not in (None, "Unverifiable")]
    new_incorrect = [case for case, verdict in now.items() if verdict == "Incorrect" and was.get(case) != "Incorrect"]
    return {"baseline": str(baseline_path), "before": before["counts"], "after": summary["counts"], "newly_decided": newly,
            "no_longer_decided": lost, "new_incorrect": new_incorrect}  # fmt: skip


def extra_suites(config: Any, named: list[str] | None) -> list[Path]:
    """The suite files verified besides the dataset's: ``--suite`` paths, else the snippet suites beside its files."""
    if named == ["none"]:
        return []
    if named:
        return [Path(p) for p in named]
    root = getattr(config, "suite_files_root", None)
    if root is None:
        return []
    found = [Path(root) / "benchmark_definitions" / name / "benchmark.yaml" for name in SNIPPET_SUITES]
    return [p for p in found if p.is_file() and p.resolve() not in {Path(s).resolve() for s in config.suites}]


#: "None of the above", "All of the above": options that name no answer of their own.
_DERIVED = re.compile(r"^\s*(?:none|all)\s+of\s+the\s+above\b", re.I)


def moved(cases: list[Case], skip_derived: bool = False) -> list[Case]:
    """Each multiple-choice case with its marked answer moved to the next option (cyclically): a copy to be flagged.

    ``skip_derived``: move it to the next option that is not "None/All of the above" (where there is one).
    """
    out = []
    for case in cases:
        if case.benchmark_type == "multiple_choice" and case.options and case.correct_answer in case.options:
            letters = list(case.options)
            order = letters[letters.index(case.correct_answer) + 1 :] + letters[: letters.index(case.correct_answer)]
            if skip_derived:
                order = [x for x in order if not _DERIVED.match(case.options[x])] or order
            case = dataclasses.replace(case, correct_answer=order[0])
        out.append(case)
    return out


def per_suite(frame: pd.DataFrame, suites: dict[str, str]) -> dict[str, dict[str, int]]:
    """Suite -> verdict -> count (and ``total``)."""
    table: dict[str, dict[str, int]] = {}
    for _, row in frame.iterrows():
        counts = table.setdefault(suites.get(row["case_id"], "?"), {**{v: 0 for v in VERDICTS}, "total": 0})
        counts[row["verdict"]] += 1
        counts["total"] += 1
    return table


def print_suites(table: dict[str, dict[str, int]]) -> None:
    print(f"\n{'suite':34} " + " ".join(f"{v:>12}" for v in VERDICTS) + f" {'total':>6} {'decided':>8}")
    for suite, counts in table.items():
        decided = counts["total"] - counts["Unverifiable"]
        print(f"{suite:34} " + " ".join(f"{counts[v]:>12}" for v in VERDICTS) + f" {counts['total']:>6} {decided:>8}")


@contextlib.contextmanager
def llm_client(args: argparse.Namespace) -> Iterator[LLMClient | None]:
    """An LLM client when an endpoint is given (flags, else RETRIEVAL_LLM_*), else None."""
    base_url = args.llm_base_url or os.environ.get("RETRIEVAL_LLM_BASE_URL")
    model = args.llm_model or os.environ.get("RETRIEVAL_LLM_MODEL")
    if not (base_url and model):
        yield None
        return
    settings = LLMSettings(base_url=base_url, model=model, api_key=os.environ.get("RETRIEVAL_LLM_API_KEY"), max_tokens=2048,
                           timeout_s=120.0)  # fmt: skip
    with LLMClient(settings, LLMCache(args.llm_cache)) as client:
        yield client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY_PATH)
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--python", type=Path, default=None, help="override verifier.python (kept as given, not resolved)")
    parser.add_argument("--out", type=Path, default=None, help="folder for quality_report.json/.md and proposed_fixes.yaml")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary as JSON here")
    parser.add_argument("--baseline", type=Path, default=None, help="an earlier --json: list what is newly decided")
    parser.add_argument("--prover", choices=("offline", "llm"), default=None, help="override verifier.prover")
    parser.add_argument("--llm-base-url", default=None, help="OpenAI-compatible endpoint for --prover llm")
    parser.add_argument("--llm-model", default=None, help="model name for --prover llm")
    parser.add_argument("--llm-cache", type=Path, default=Path(tempfile.gettempdir()) / "verify_adk_mc_llm.sqlite")
    parser.add_argument(
        "--suite",
        action="append",
        default=None,
        help="a suite file verified besides the dataset's (repeatable; default: the snippet suites; 'none': none)",
    )
    parser.add_argument("--moved", action="store_true", help="verify copies with every marked answer moved to the next option")
    parser.add_argument("--skip-derived", action="store_true", help="with --moved: never move it to 'None/All of the above'")
    parser.add_argument(
        "--every-other",
        action="store_true",
        help="with --moved: every mutant, the marked answer moved to each other option in turn (the questions are "
        "proven once: no claim sees the marked answer, so each mutant is the same evidence decided for another mark)",
    )
    parser.add_argument(
        "--half",
        choices=HALVES,
        default=None,
        help="verify only that half of the questions (sha256 of the id: first hex digit even = design)",
    )
    args = parser.parse_args(argv)

    started = time.monotonic()
    registry = load_registry(args.registry)
    config = registry.get(args.dataset)
    settings = config.verifier
    if args.python is not None:
        settings = settings.model_copy(update={"python": args.python.absolute()})
    if args.prover is not None:
        settings = settings.model_copy(update={"prover": args.prover})
    loaded = load_cases(config)
    extra = load_suites(extra_suites(config, args.suite), files_root=getattr(config, "suite_files_root", None))
    cases = list(loaded.cases) + list(extra.cases)
    if extra.rejects:
        print(f"rejects in the extra suites: {[(r.case_id, one_line(r.reason, 160)) for r in extra.rejects]}")
    if args.moved and not args.every_other:
        cases = moved(cases, skip_derived=args.skip_derived)
    if args.half:
        cases = [c for c in cases if c.benchmark_type != "multiple_choice" or half_of(c.case_id) == args.half]
    questions = [c for c in cases if c.benchmark_type == "multiple_choice"]
    suites = {c.case_id: c.suite or suite_name(Path(c.source_file)) for c in questions}
    out = args.out or Path(tempfile.mkdtemp(prefix="verify_adk_mc_"))
    print(f"registry {args.registry}  dataset {args.dataset}")
    print(f"verifier: python={settings.python} library={settings.library} import_name={settings.import_name} "
          f"timeout_s={settings.timeout_s} memory_mb={settings.memory_mb}")  # fmt: skip
    print(f"cases {len(loaded.cases)} (rejects {len(loaded.rejects)}), multiple choice {len(questions)}", flush=True)

    if args.moved and args.every_other:
        return verify_every_other(questions, settings, suites, args, started)
    if args.moved:
        return verify_moved(questions, settings, suites, args, started)
    with llm_client(args) as client:
        checked = check_questions(
            cases,
            settings,
            dataset=args.dataset,
            report_path=out / "quality_report.json",
            proposals_path=out / "proposed_fixes.yaml",
            inputs=config.input_paths(),
            registry_path=str(registry.path),
            llm=client,
        )
    wall = time.monotonic() - started
    report = json.loads((out / "quality_report.json").read_text(encoding="utf-8"))
    meta = report.get("meta", {})
    frame = checked.verdicts

    print(f"\nlibrary {meta.get('library')} {meta.get('library_version')}  python {meta.get('python')} "
          f"({meta.get('python_version')})  prover {meta.get('prover')}")  # fmt: skip
    if meta.get("prover_warning"):
        print(f"warning: {meta['prover_warning']}")
    counts = {v: int((frame["verdict"] == v).sum()) for v in VERDICTS}
    print("verdicts: " + "  ".join(f"{v} {n}" for v, n in counts.items()) + f"  (of {len(frame)})")
    by_suite = per_suite(frame, suites)
    print_suites(by_suite)
    print_suites(per_suite(frame, {case: half_of(case) for case in frame["case_id"]}))
    for v in VERDICTS:
        rows = frame[frame["verdict"] == v]
        print(f"\n{v} ({len(rows)}):")
        for _, row in rows.iterrows():
            if v in ("Incorrect", "Ambiguous"):
                reason = one_line("; ".join(row["reasons"])) if len(row["reasons"]) else ""
                print(f"  {row['case_id']}  marked {row['marked']}, true {list(row['proven_true'])}: {reason}")
            else:
                print(f"  {row['case_id']}")
    probe = meta.get("probe") or {}
    print("\nprobe:", probe.get("summary"), f"({probe.get('cpu_seconds')} CPU s, {probe.get('seconds')} s);",
          f"import_name {probe.get('import_name')} from {probe.get('import_name_source')}")  # fmt: skip
    for cause, n in list((probe.get("failure_causes") or {}).items())[:5]:
        print(f"  {n} x {one_line(cause, 160)}")
    print(f"\n{timing_line(meta, wall, len(checked.flagged))}; reports in {out}")
    summary = {
        "library_version": meta.get("library_version"),
        "python": meta.get("python"),
        "prover": meta.get("prover"),
        "counts": counts,
        "by_suite": by_suite,
        "unverifiable_share": round(counts["Unverifiable"] / len(frame), 3) if len(frame) else None,
        "by_verdict": {v: frame[frame["verdict"] == v]["case_id"].tolist() for v in VERDICTS},
        "reasons": {r["case_id"]: list(r["reasons"]) for _, r in frame.iterrows() if r["verdict"] in ("Incorrect", "Ambiguous")},
        "options": option_table(frame),
        "probe": probe.get("summary"),
        "verification_s": meta.get("total_seconds"),
        "wall_s": round(wall, 1),
    }
    if args.baseline:
        summary["comparison"] = change = compare(summary, args.baseline)
        print(f"\nagainst {args.baseline}: {change['before']} -> {change['after']}")
        print(f"newly decided ({len(change['newly_decided'])}):")
        for row in change["newly_decided"]:
            print(f"  {row['case_id']}  {row['verdict']}: {row['claims']}")
        print(f"no longer decided: {change['no_longer_decided'] or 'none'}; new Incorrect: {change['new_incorrect'] or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return 0


def timing_line(meta: dict[str, Any], wall: float, proposals: int) -> str:
    """``proposals 3; verification 52.1 s (remediation 9.8 s); wall 61.0 s``: the seconds the report's meta records."""
    seconds = meta.get("total_seconds")
    shown = "not recorded" if seconds is None else f"{seconds} s"
    fixes = f" (remediation {meta['remediation_seconds']} s)" if meta.get("remediation_seconds") else ""
    return f"proposals {proposals}; verification {shown}{fixes}; wall {wall:.1f} s"


def verify_offline(questions: list[Case], settings: Any) -> Any:
    """The questions proven with the dataset's verifier settings (no fixes proposed): :func:`run_verification`'s result."""
    sandbox = SandboxSettings(python=Path(settings.python), timeout_s=settings.timeout_s, memory_mb=settings.memory_mb)
    return run_verification(questions, sandbox_settings=sandbox, library=settings.library, import_name=settings.import_name)


def verify_moved(questions: list[Case], settings: Any, suites: dict[str, str], args: argparse.Namespace, started: float) -> int:
    """Verify the copies with moved answers (no fixes proposed); print and record how many are flagged, per suite."""
    run = verify_offline(questions, settings)
    frame = pd.DataFrame([{"case_id": v.case_id, "verdict": v.verdict, "marked": v.marked, "reasons": v.reasons} for v in run.verdicts])
    by_suite = per_suite(frame, suites)
    where = "the next option other than None/All of the above" if args.skip_derived else "the next option"
    print(f"moved answers: every marked answer moved to {where}")
    print_suites(by_suite)
    print_suites(per_suite(frame, {case: half_of(case) for case in frame["case_id"]}))
    flagged = frame[frame["verdict"].isin(["Incorrect", "Ambiguous"])]
    print(f"\nflagged {len(flagged)} of {len(frame)} ({len(flagged) / max(1, len(frame)):.0%}); wall {time.monotonic() - started:.1f} s")
    for suite, counts in by_suite.items():
        print(f"  {suite}: {counts['Incorrect'] + counts['Ambiguous']} of {counts['total']} flagged")
    if args.json:
        summary = {"mode": "moved" + ("_skip_derived" if args.skip_derived else ""), "by_suite": by_suite, "flagged": len(flagged), "total": len(frame),
                   "by_verdict": {v: frame[frame["verdict"] == v]["case_id"].tolist() for v in VERDICTS},
                   "reasons": {r["case_id"]: list(r["reasons"]) for _, r in flagged.iterrows()}}  # fmt: skip
        args.json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return 0


def verify_every_other(questions: list[Case], settings: Any, suites: dict[str, str], args: argparse.Namespace, started: float) -> int:
    """Prove the questions once, then decide every mutant (each other option marked in turn) on that evidence:
    how many of all the mutants are flagged (Incorrect or Ambiguous), per suite and by where the mark moved."""
    run = verify_offline(questions, settings)
    rows = []
    for v in run.verdicts:
        letters = [e.letter for e in v.evidence]
        for e in v.evidence:
            if e.letter != v.marked:
                verdict = decide(v.case_id, e.letter, copy.deepcopy(v.evidence)).verdict
                rows.append({"case_id": v.case_id, "suite": suites.get(v.case_id, "?"), "mark": e.letter,
                             "onto": "derived" if e.claim.kind in DERIVED_KINDS else "regular", "verdict": verdict,
                             "flagged": verdict in ("Incorrect", "Ambiguous"),
                             "next": v.marked in letters and e.letter == next_letter(letters, v.marked)})  # fmt: skip
    frame = pd.DataFrame(rows)
    unmodified = pd.DataFrame([{"case_id": v.case_id, "verdict": v.verdict} for v in run.verdicts])
    card = scorecard(unmodified.to_dict("records"), rows)
    print("the unmodified questions:")
    print_suites(per_suite(unmodified, suites))
    print("\nmoved answers: every marked answer moved to each other option in turn (one mutant per other option)")
    print(f"\nflagged {int(frame['flagged'].sum())} of {len(frame)} mutants ({frame['flagged'].mean():.0%}) of {len(run.verdicts)} questions; "
          f"wall {time.monotonic() - started:.1f} s")  # fmt: skip
    for key in ("suite", "onto"):
        for name, group in frame.groupby(key):
            print(f"  {key} {name}: {int(group['flagged'].sum())} of {len(group)} flagged ({group['flagged'].mean():.0%})")
    print_scorecard(card)
    if args.json:
        summary = {"mode": "moved_every_other", "flagged": int(frame["flagged"].sum()), "total": len(frame),
                   "questions": len(run.verdicts), "unmodified": per_suite(unmodified, suites), "mutants": rows,
                   "scorecard": card, "wall_s": round(time.monotonic() - started, 1),
                   "verdicts": {v.case_id: {"verdict": v.verdict, "marked": v.marked, "half": half_of(v.case_id),
                                            "reasons": v.reasons,
                                            "options": {e.letter: {"state": e.state, "kind": e.claim.kind,
                                                                   "note": e.note} for e in v.evidence}}
                                for v in run.verdicts}}  # fmt: skip
        args.json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
