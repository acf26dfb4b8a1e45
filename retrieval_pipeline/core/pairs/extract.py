"""Extraction of (query, gold target) pairs for one dataset: its kind's pair builder, or suite gold resolution.

Benchmark-suite cases are paired by :func:`~retrieval_pipeline.core.pairs.build.build_pairs` (golds resolved
against the corpus, then, when the dataset names a library environment (``verifier.python``), the rest by
importing them there: :class:`~retrieval_pipeline.core.pairs.import_resolver.ImportResolver`; fix_error
targets inferred by the AST, or by an LLM reconciled with the AST when a client is given); any other
kind's cases by its adapter's pair builder. The result carries the ``qa_pairs`` table, the counts of
:func:`~retrieval_pipeline.core.pairs.build.pairs_report` plus the kind's own, and every pair's warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.asset_metadata import Markdown, StageResult, md_preview
from retrieval_pipeline.core.common.frames import to_frame
from retrieval_pipeline.core.common.types import PAIR_JSON_FIELDS, Case, Document, QAPair
from retrieval_pipeline.core.datasets import adapter_for
from retrieval_pipeline.core.pairs.build import build_pairs, fix_target_records, fix_target_table, pairs_report
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer, TargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.pairs.import_resolver import ASKED_NOTE_PREFIXES, ImportResolver
from retrieval_pipeline.core.pairs.llm_targets import LLMTargetInferer
from retrieval_pipeline.core.pairs.settings import PairedSettings, TargetSettings
from retrieval_pipeline.core.services.llm.client import LLMClient

NO_ENDPOINT_WARNING = "targets.inferer is llm but no LLM endpoint is configured: using the AST inferer"


def needs_llm(cases: Sequence[Case], settings: TargetSettings) -> bool:
    """Whether target inference may use an LLM: the inferer is not ``ast`` and there are fix_error cases."""
    return settings.inferer != "ast" and any(c.benchmark_type == "fix_error" for c in cases)


def gold_importer(config: PairedSettings) -> ImportResolver | None:
    """The import resolver of a dataset that names a library environment (``verifier.python``), else None.

    Only golds under ``verifier.import_name`` (when set) are imported; the environment is started only
    when some gold stays unresolved by the corpus indexes.
    """
    if config.verifier.python is None:
        return None
    return ImportResolver(python=config.verifier.python, dataset=config.name, import_name=config.verifier.import_name)


@dataclass(kw_only=True)
class PairsResult(StageResult):
    """The ``qa_pairs`` table (one row per case), the pairs themselves and the target inferer's name."""

    pairs: list[QAPair]
    inferer: str


def extract_pairs(
    cases: Sequence[Case],
    documents: Sequence[Document],
    config: PairedSettings,
    client: LLMClient | None = None,
) -> PairsResult:
    """One pair per case, in input order, with the dataset's counts.

    Args:
        cases: The dataset's validated cases.
        documents: The corpus the golds are resolved against.
        config: The dataset's settings: its kind (which pair builder) and ``targets.inferer``.
        client: An open LLM client for fix_error target inference, or None (the AST inferer decides).

    Returns:
        The table; summary metadata: every scalar of the report (the golds' share per resolution method
        ``api_gold_share_<method>``, fix_error targets from code / from the description and their agreement),
        ``target_inferer`` and, when golds were imported, ``gold_import_python``; details:
        ``ast_llm_disagreements_list`` (when the LLM and the AST disagreed), ``api_gold_by_method`` (JSON),
        ``fix_error_code_description_disagreements`` (JSON: case, code target, its source, description
        target), ``fix_error_targets`` (Markdown: case, target, source, description target, agreement) and
        ``unresolved_cases`` (Markdown). Warnings: the inferer fallback, then each pair's.

    Raises:
        LibraryEnvironmentError: Golds had to be imported and ``verifier.python`` is missing or broken.
    """
    adapter = adapter_for(config)
    pair_case = adapter.pair_builder(config, documents)  # None: suite cases, paired by gold resolution and target inference
    use_llm = client is not None and needs_llm(cases, config.targets)
    warnings = [NO_ENDPOINT_WARNING] if config.targets.inferer == "llm" and not use_llm else []
    inferer: TargetInferer = LLMTargetInferer(client) if use_llm and client is not None else AstTargetInferer()
    importer = gold_importer(config) if pair_case is None else None
    pairs = build_pairs(cases, CorpusLookup.from_documents(documents), inferer, pair_case, importer)
    warnings += [w for p in pairs for w in p.warnings]
    report = {**pairs_report(pairs), **adapter.pairs_report(pairs)}
    frame = to_frame(pairs, QAPair, PAIR_JSON_FIELDS)
    summary = {k: v for k, v in report.items() if not isinstance(v, (dict, list))} | {"target_inferer": inferer.name}
    if _imported_any(pairs) and importer is not None:
        summary["gold_import_python"] = str(importer.python)
    return PairsResult(
        frame=frame, pairs=pairs, inferer=inferer.name, summary=summary, details=_details(pairs, report, frame), warnings=warnings
    )


def _imported_any(pairs: Sequence[QAPair]) -> bool:
    """Whether the library environment was asked about some gold (a resolution's note says so)."""
    notes = (r.get("note", "") for p in pairs for r in p.evidence.get("resolutions", []))
    return any(n.startswith(ASKED_NOTE_PREFIXES) for n in notes)


def _details(pairs: Sequence[QAPair], report: dict[str, Any], frame: pd.DataFrame) -> dict[str, Any]:
    """The larger metadata values: disagreement lists, per-method counts and the Markdown tables."""
    disagreements = [
        {"case": p.query_id, "ast": p.evidence.get("ast"), "llm": p.evidence.get("llm"), "kept": p.gold_doc_ids}
        for p in pairs
        if p.evidence.get("agree") is False
    ]
    details: dict[str, Any] = {"ast_llm_disagreements_list": disagreements} if disagreements else {}
    details["api_gold_by_method"] = report["api_gold_by_method"]
    if "fix_error_code_description_disagreements" in report:
        details["fix_error_code_description_disagreements"] = report["fix_error_code_description_disagreements"]
        details["fix_error_targets"] = Markdown(md_preview(fix_target_table(fix_target_records(pairs)), n=200))
    unresolved = frame[frame["status"] == "unresolved"][["query_id", "benchmark_type", "method", "warnings"]]
    details["unresolved_cases"] = Markdown(md_preview(unresolved, n=50))
    return details
