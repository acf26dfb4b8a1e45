"""Extraction of (query, gold target) pairs for one dataset: its kind's pair builder, or suite gold resolution.

Benchmark-suite cases are paired by :func:`~retrieval_pipeline.core.pairs.build_pairs` (golds resolved
against the corpus, fix_error targets inferred by the AST, or by an LLM reconciled with the AST when a
client is given); any other kind's cases by its adapter's pair builder. The result carries the
``qa_pairs`` table, the counts of :func:`~retrieval_pipeline.core.pairs.pairs_report` plus the kind's
own, and every pair's warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_pipeline.core.asset_metadata import Markdown, StageResult
from retrieval_pipeline.core.datasets import adapter_for
from retrieval_pipeline.core.frames import to_frame
from retrieval_pipeline.core.llm.client import LLMClient
from retrieval_pipeline.core.mining.fix_targets import AstTargetInferer, TargetInferer
from retrieval_pipeline.core.mining.gold import CorpusLookup
from retrieval_pipeline.core.mining.llm_targets import LLMTargetInferer
from retrieval_pipeline.core.pairs import PAIR_JSON_FIELDS, QAPair, build_pairs, pairs_report
from retrieval_pipeline.core.registry import DatasetConfig, TargetSettings
from retrieval_pipeline.core.reports import md_preview
from retrieval_pipeline.core.types import Case, Document

NO_ENDPOINT_WARNING = "targets.inferer is llm but no LLM endpoint is configured: using the AST inferer"


def needs_llm(cases: Sequence[Case], settings: TargetSettings) -> bool:
    """Whether target inference may use an LLM: the inferer is not ``ast`` and there are fix_error cases."""
    return settings.inferer != "ast" and any(c.benchmark_type == "fix_error" for c in cases)


@dataclass(kw_only=True)
class PairsResult(StageResult):
    """The ``qa_pairs`` table (one row per case), the pairs themselves and the target inferer's name."""

    pairs: list[QAPair]
    inferer: str


def extract_pairs(
    cases: Sequence[Case],
    documents: Sequence[Document],
    config: DatasetConfig,
    client: LLMClient | None = None,
) -> PairsResult:
    """One pair per case, in input order, with the dataset's counts.

    Args:
        cases: The dataset's validated cases.
        documents: The corpus the golds are resolved against.
        config: The dataset's settings: its kind (which pair builder) and ``targets.inferer``.
        client: An open LLM client for fix_error target inference, or None (the AST inferer decides).

    Returns:
        The table; summary metadata: every scalar count of the report and ``target_inferer``; details:
        ``ast_llm_disagreements_list`` (when the LLM and the AST disagreed), ``api_gold_by_method``
        (JSON) and ``unresolved_cases`` (Markdown). Warnings: the inferer fallback, then each pair's.
    """
    adapter = adapter_for(config)
    pair_case = adapter.pair_builder(config, documents)  # None: suite cases, paired by gold resolution and target inference
    use_llm = client is not None and needs_llm(cases, config.targets)
    warnings = [NO_ENDPOINT_WARNING] if config.targets.inferer == "llm" and not use_llm else []
    inferer: TargetInferer = LLMTargetInferer(client) if use_llm and client is not None else AstTargetInferer()
    pairs = build_pairs(cases, CorpusLookup.from_documents(documents), inferer, pair_case)
    warnings += [w for p in pairs for w in p.warnings]
    report = {**pairs_report(pairs), **adapter.pairs_report(pairs)}
    frame = to_frame(pairs, QAPair, PAIR_JSON_FIELDS)
    unresolved = frame[frame["status"] == "unresolved"][["query_id", "benchmark_type", "method", "warnings"]]
    disagreements = [
        {"case": p.query_id, "ast": p.evidence.get("ast"), "llm": p.evidence.get("llm"), "kept": p.gold_doc_ids}
        for p in pairs
        if p.evidence.get("agree") is False
    ]
    details: dict[str, Any] = {"ast_llm_disagreements_list": disagreements} if disagreements else {}
    details |= {"api_gold_by_method": report["api_gold_by_method"], "unresolved_cases": Markdown(md_preview(unresolved, n=50))}
    return PairsResult(
        frame=frame,
        pairs=pairs,
        inferer=inferer.name,
        summary={**{k: v for k, v in report.items() if not isinstance(v, dict)}, "target_inferer": inferer.name},
        details=details,
        warnings=warnings,
    )
