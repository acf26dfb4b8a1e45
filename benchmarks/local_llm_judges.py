"""A local model as the forward-RAG judge and as the fix_error target inferrer, against the offline ones, on dev ADK.

    .venv/bin/python benchmarks/local_llm_judges.py --pairs 12 --fix 8 --seed 13 --json /tmp/local_judges.json

Builds the ADK dataset's corpus and pairs as the pipeline does (AST target inference), then, on a seeded sample:

* **forward-RAG**: ``--pairs`` resolved retrieval pairs decided by ``offline_lexical`` and by the LLM judge
  (:class:`~retrieval_pipeline.core.filtering.judges.llm.LLMForwardRagJudge`: a sufficiency call on the gold context
  and a necessity call on the same seeded random contexts); agreement on keep/drop, and on each of the two calls
  (offline sufficiency: the gold context has enough description; offline necessity: no random context covers the
  query as well as the gold);
* **fix_error targets**: ``--fix`` fix_error cases inferred by the AST and by the LLM
  (:class:`~retrieval_pipeline.core.pairs.llm_targets.LLMTargetInferer`, which reconciles the two); how often the
  LLM's answer resolves to the AST's target, and what reconciliation chose.

The model is served as in ``local_llm_prover.py``; every answer, rationale and disagreement is printed.
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

from retrieval_pipeline.core.datasets import adapter_for
from retrieval_pipeline.core.filtering.judges.llm import LLMForwardRagJudge
from retrieval_pipeline.core.filtering.judges.offline import FilterDecision, OfflineLexicalJudge
from retrieval_pipeline.core.pairs.build import build_pairs
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.pairs.llm_targets import LLMTargetInferer
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.services.llm.local_models import local_model_unavailable_reason, serve_local_model
from retrieval_pipeline.core.services.split_packages import default_cache_dir

ROOT = Path(__file__).resolve().parents[1]


def calls(decision: FilterDecision) -> tuple[bool | None, bool | None]:
    """``(sufficient, necessary)`` as the decision's judge saw them; None where its call failed."""
    if decision.judge.startswith("llm:"):
        gold, rand = (decision.details.get(k, {}).get("value") for k in ("sufficiency", "necessity"))
        return (None if gold is None else bool(gold["answerable"])), (None if rand is None else not rand["answerable"])
    sufficient = not decision.reason.startswith("dropped (insufficient)")
    necessary = not decision.reason.startswith("dropped (not necessary)")
    return sufficient, necessary


def agreement(pairs: list[tuple[FilterDecision, FilterDecision]]) -> dict[str, Any]:
    """Offline vs LLM on keep, sufficiency and necessity, over the pairs the LLM decided."""
    decided = [(o, m) for o, m in pairs if not m.undecided]
    out: dict[str, Any] = {"pairs": len(pairs), "llm_undecided": len(pairs) - len(decided)}
    out["keep_agree"] = sum(o.keep == m.keep for o, m in decided)
    out["kept_offline"] = sum(o.keep for o, _ in decided)
    out["kept_llm"] = sum(m.keep for _, m in decided)
    for i, name in enumerate(("sufficient", "necessary")):
        both = [(calls(o)[i], calls(m)[i]) for o, m in decided]
        out[f"{name}_agree"] = sum(a == b for a, b in both)
        out[f"{name}_llm_true"] = sum(bool(b) for _, b in both)
        out[f"{name}_offline_true"] = sum(bool(a) for a, _ in both)
    out["of"] = len(decided)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--model-cache", type=Path, default=default_cache_dir())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=12, help="retrieval pairs for the forward-RAG judge")
    parser.add_argument("--fix", type=int, default=8, help="fix_error cases for the target inferrer")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--llm-cache", type=Path, default=None, help="LLM answer cache (default: a fresh temporary one)")
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY_PATH)
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    reason = local_model_unavailable_reason(args.model)
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    config = load_registry(args.registry).get(args.dataset)
    adapter = adapter_for(config)
    documents = list(adapter.build_corpus(config).documents)
    cases = list(adapter.load_cases(config).cases)
    lookup = CorpusLookup.from_documents(documents)
    pairs = build_pairs(cases, lookup, AstTargetInferer(), adapter.pair_builder(config, documents), None)
    texts = {d.doc_id: d.text for d in documents}
    resolved = sorted((p for p in pairs if p.status == "resolved"), key=lambda p: p.query_id)
    rng = random.Random(args.seed)
    picked = sorted(rng.sample(resolved, min(args.pairs, len(resolved))), key=lambda p: p.query_id)
    fix_cases = sorted((c for c in cases if c.benchmark_type == "fix_error"), key=lambda c: c.case_id)
    fix_picked = sorted(rng.sample(fix_cases, min(args.fix, len(fix_cases))), key=lambda c: c.case_id)
    print(f"corpus {len(documents)} documents; {len(resolved)} resolved pairs, {len(fix_cases)} fix_error cases; "
          f"sample: {len(picked)} pairs, {len(fix_picked)} fix_error cases (seed {args.seed})", flush=True)  # fmt: skip
    settings = config.filter
    offline = OfflineLexicalJudge(texts, random_contexts=settings.random_contexts, min_description_tokens=settings.min_description_tokens,
                                  max_random_coverage=settings.max_random_coverage, seed=settings.seed)  # fmt: skip
    offline_decisions = [offline.decide(p.query_id, p.query, p.gold_doc_ids) for p in picked]

    cache = args.llm_cache or Path(tempfile.mkdtemp(prefix="local_llm_judges_")) / "llm.sqlite"
    with serve_local_model(args.model, args.model_cache, n_threads=args.threads) as server:
        print(f"server loaded {args.model} in {server.startup_s:.1f} s", flush=True)
        llm_settings = LLMSettings(base_url=server.base_url, model=server.model or "local", max_tokens=args.max_tokens, timeout_s=900.0,
                                   max_retries=1, max_concurrency=1)  # fmt: skip
        with LLMClient(llm_settings, LLMCache(cache)) as client:
            t0 = time.monotonic()
            judge = LLMForwardRagJudge(client, texts, random_contexts=settings.random_contexts, seed=settings.seed)
            llm_decisions = judge.decide_all([(p.query_id, p.query, list(p.gold_doc_ids)) for p in picked])
            judge_s = time.monotonic() - t0
            t0 = time.monotonic()
            inferred = LLMTargetInferer(client).infer_all(fix_picked, lookup)
            fix_s = time.monotonic() - t0
            usage = client.usage()

    print("\nforward-RAG (offline_lexical | llm):")
    for p, o, m in zip(picked, offline_decisions, llm_decisions):
        mark = "" if o.keep == m.keep else "  DISAGREE"
        print(
            f"  {p.query_id}: offline {'keep' if o.keep else 'drop'} | llm {'undecided' if m.undecided else 'keep' if m.keep else 'drop'}{mark}"
        )
        print(f"      offline: {o.reason[:150]}\n      llm:     {m.reason[:200]}")
    judged = agreement(list(zip(offline_decisions, llm_decisions)))
    print(f"agreement: {judged}; {judge_s:.0f} s ({judge_s / max(1, len(picked)):.1f} s per pair, 2 calls)")

    print("\nfix_error targets (ast | llm -> reconciled):")
    rows = []
    for case, result in zip(fix_picked, inferred):
        ev = result.evidence
        rows.append({"case_id": case.case_id, "ast": ev.get("ast"), "llm_answer": ev.get("llm_answer"), "llm": ev.get("llm"),
                     "agree": ev.get("agree"), "reconciled": ev.get("reconciled"), "target": result.target,
                     "ast_source": ev.get("source"), "llm_error": ev.get("llm_error"), "rationale": ev.get("llm_rationale")})  # fmt: skip
        print(f"  {case.case_id}: ast {ev.get('ast')} ({ev.get('source')}) | llm {ev.get('llm_answer')!r} -> {ev.get('llm')}; "
              f"{'agree' if ev.get('agree') else 'DISAGREE'}; {ev.get('reconciled')}")  # fmt: skip
    fix = {"cases": len(rows), "agree": sum(bool(r["agree"]) for r in rows), "llm_resolved": sum(r["llm"] is not None for r in rows),
           "reconciled": dict(Counter(str(r["reconciled"]).split(" (")[0] for r in rows)), "seconds": round(fix_s, 1)}  # fmt: skip
    print(f"agreement: {fix}; {fix_s / max(1, len(rows)):.1f} s per case")
    print(f"tokens {usage.get('prompt_tokens')} prompt + {usage.get('completion_tokens')} completion in {usage.get('calls')} calls")
    if args.json:
        summary = {"model": args.model, "seed": args.seed, "server_load_s": server.startup_s, "forward_rag": judged, "judge_s": round(judge_s, 1),
                   "pairs": [{"query_id": p.query_id, "offline": o.reason, "llm": m.reason, "llm_details": m.details}
                             for p, o, m in zip(picked, offline_decisions, llm_decisions)],
                   "fix_error": fix, "fix_rows": rows, "llm_usage": usage}  # fmt: skip
        args.json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
