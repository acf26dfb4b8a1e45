"""The forward-RAG filter over extracted pairs: every retrieval pair kept, dropped or undecided, with hard negatives.

* **judge**: sufficiency and necessity are decided by an LLM when a client is given (and the settings
  allow one), else by ``offline_lexical``, a deterministic stand-in; ``judge: none`` keeps every
  resolved pair. A pair whose LLM calls failed is undecided: kept out, with the error.
* **unresolved** pairs (no gold target) are dropped without asking the judge.
* **hard negatives** for kept pairs: sibling objects of the gold's module and the top BM25 non-gold hits
  of a default BM25 built in memory from the corpus (independent of the retrievers under evaluation).

Every pair yields one row, so ``kept + dropped + undecided == pairs``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.asset_metadata import Markdown, StageResult, md_preview
from retrieval_pipeline.core.common.types import Document, QAPair
from retrieval_pipeline.core.filtering.judges.llm import LLMForwardRagJudge
from retrieval_pipeline.core.filtering.judges.offline import FilterDecision, OfflineLexicalJudge, passthrough_decision
from retrieval_pipeline.core.filtering.negatives import SiblingIndex, bm25_negatives
from retrieval_pipeline.core.filtering.settings import FilterSettings, NegativeSettings
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever
from retrieval_pipeline.core.services.llm.client import LLMClient

#: What the ``judge_note`` metadata says about each judge; any other judge is an LLM.
JUDGE_NOTES = {"none": "filter off", "offline_lexical": "offline_lexical is a deterministic stand-in for an LLM judge"}
LLM_JUDGE_NOTE = "an LLM decided; answers and rationales in judge_details"
NO_ENDPOINT_WARNING = "filter.judge is llm but no LLM endpoint is configured: using offline_lexical"


def needs_llm(settings: FilterSettings) -> bool:
    """Whether the judge setting may use an LLM (``auto`` or ``llm``): only then is a client worth opening."""
    return settings.judge in ("auto", "llm")


@dataclass
class JudgeDecisions:
    """The judge that decided, its decisions (one per resolved pair, in order) and warnings."""

    judge: str
    decisions: list[FilterDecision]
    warnings: list[str] = field(default_factory=list)


def judge_pairs(
    resolved: Sequence[tuple[str, str, Sequence[str]]],
    texts: Mapping[str, str],
    settings: FilterSettings,
    client: LLMClient | None = None,
) -> JudgeDecisions:
    """Decide every resolved pair with the judge the settings and the client select.

    Args:
        resolved: ``(query_id, query, gold_doc_ids)`` per resolved pair.
        texts: The corpus, ``{doc_id: text}``.
        settings: The dataset's filter settings.
        client: An open LLM client, or None when no endpoint is configured.

    Returns:
        ``none`` (filter off), the LLM judge (a client and ``judge`` ``auto``/``llm``), else ``offline_lexical``.
    """
    warnings = [NO_ENDPOINT_WARNING] if settings.judge == "llm" and client is None else []
    if settings.judge == "none":
        return JudgeDecisions("none", [passthrough_decision(q) for q, _, _ in resolved], warnings)
    if client is not None and needs_llm(settings):
        judge = LLMForwardRagJudge(client, texts, random_contexts=settings.random_contexts, seed=settings.seed)
        return JudgeDecisions(judge.name, judge.decide_all(resolved), warnings)
    offline = OfflineLexicalJudge(
        texts,
        random_contexts=settings.random_contexts,
        min_description_tokens=settings.min_description_tokens,
        max_random_coverage=settings.max_random_coverage,
        seed=settings.seed,
    )
    return JudgeDecisions(offline.name, [offline.decide(q, text, golds) for q, text, golds in resolved], warnings)


class HardNegatives:
    """Sibling and BM25 near misses for a query, from a default BM25 built in memory over the corpus."""

    def __init__(self, documents: Sequence[Document], settings: NegativeSettings) -> None:
        self.settings = settings
        self._siblings = SiblingIndex(documents)
        self._bm25 = BM25Retriever.build([d.doc_id for d in documents], [d.text for d in documents])

    def for_query(self, query: str, gold_doc_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """``(siblings, bm25)``: up to ``per_query_siblings`` and ``per_query_bm25`` non-gold ids, no id in both."""
        golds = list(gold_doc_ids)
        sib = self._siblings.siblings(golds, self.settings.per_query_siblings)
        depth = self.settings.per_query_bm25 + len(golds) + len(sib)
        return sib, bm25_negatives(self._bm25.search([query], depth)[0], golds, self.settings.per_query_bm25, sib)


def verified_row(pair: QAPair, decision: FilterDecision | None, negatives: HardNegatives) -> dict[str, Any]:
    """The ``verified_pairs`` row of one pair; ``decision`` is None for a pair whose gold is unresolved."""
    golds = list(pair.gold_doc_ids)
    if decision is None:
        verdict: dict[str, Any] = {
            "keep": False,
            "undecided": False,
            "judge": "none",
            "reason": f"dropped: gold target unresolved ({pair.method})",
            "sufficiency": None,
            "best_random": None,
            "random_doc_ids": [],
            "judge_details": "{}",
        }
    else:
        verdict = {
            "keep": decision.keep,
            "undecided": decision.undecided,
            "judge": decision.judge,
            "reason": decision.reason,
            "sufficiency": decision.sufficiency,
            "best_random": decision.best_random,
            "random_doc_ids": decision.random_doc_ids,
            "judge_details": json.dumps(decision.details, default=str),
        }
    sib, hard = negatives.for_query(pair.query, golds) if verdict["keep"] else ([], [])
    return {
        "query_id": pair.query_id,
        "suite": pair.suite,
        "benchmark_type": pair.benchmark_type,
        "query": pair.query,
        "gold_doc_ids": golds,
        "gold_grades": pair.grades(),
        "gold_method": pair.method,
        **verdict,
        "sibling_negatives": sib,
        "bm25_negatives": hard,
    }


@dataclass(kw_only=True)
class FilterResult(StageResult):
    """The ``verified_pairs`` table (one row per retrieval pair) and the judge that decided."""

    judge: str


def filter_pairs(
    pairs: Sequence[QAPair],
    documents: Sequence[Document],
    filter_settings: FilterSettings,
    negative_settings: NegativeSettings,
    client: LLMClient | None = None,
) -> FilterResult:
    """Judge every retrieval pair and give the kept ones hard negatives.

    Args:
        pairs: The extracted pairs; ``not_retrieval`` ones (multiple choice) are left out.
        documents: The corpus.
        filter_settings: Which judge, and its parameters.
        negative_settings: How many sibling and BM25 negatives per kept pair.
        client: An open LLM client for the LLM judge, or None.

    Returns:
        The table, with summary metadata ``pairs``, ``kept``, ``dropped``, ``undecided``, ``judge`` and
        ``judge_note``, and details ``decisions_by_reason`` (JSON) and ``dropped_pairs`` (Markdown).
    """
    retrieval = [p for p in pairs if p.status != "not_retrieval"]
    resolved = [(p.query_id, p.query, list(p.gold_doc_ids)) for p in retrieval if p.status == "resolved"]
    judged = judge_pairs(resolved, {d.doc_id: d.text for d in documents}, filter_settings, client)
    decision_of = {d.query_id: d for d in judged.decisions}
    negatives = HardNegatives(documents, negative_settings)
    frame = pd.DataFrame([verified_row(p, decision_of.get(p.query_id), negatives) for p in retrieval])
    kept = int(frame["keep"].sum()) if len(frame) else 0
    undecided = int(frame["undecided"].sum()) if len(frame) else 0
    reasons = frame["reason"].str.split(":").str[0].value_counts().to_dict() if len(frame) else {}
    dropped = frame[~frame["keep"]][["query_id", "reason"]] if len(frame) else frame
    return FilterResult(
        frame=frame,
        judge=judged.judge,
        summary={
            "pairs": len(frame),
            "kept": kept,
            "dropped": len(frame) - kept - undecided,
            "undecided": undecided,
            "judge": judged.judge,
            "judge_note": JUDGE_NOTES.get(judged.judge, LLM_JUDGE_NOTE),
        },
        details={"decisions_by_reason": {str(k): int(v) for k, v in reasons.items()}, "dropped_pairs": Markdown(md_preview(dropped, n=50))},
        warnings=judged.warnings,
    )
