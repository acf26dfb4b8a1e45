"""Extracted (query, gold target) pairs: suites' cases resolved against the target corpus.

* ``api_understanding``: the case's gold FQNs resolved by exact, alias and suffix matching.
* ``fix_error``: the primary subject inferred by a :class:`TargetInferer` (AST by default; the seam
  where an LLM-based inferer plugs in).
* ``multiple_choice``: not a retrieval pair; routed to the question verifier and counted as such.
* Every other kind's cases (NQ, context QA, BEIR, ...): its adapter's pair builder
  (:meth:`retrieval_pipeline.core.datasets.DatasetAdapter.pair_builder`).

Every case yields exactly one :class:`QAPair`; unresolved ones stay in the table with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from retrieval_pipeline.core.mining.fix_targets import TargetInference, TargetInferer
from retrieval_pipeline.core.mining.gold import CorpusLookup, resolve_case_golds
from retrieval_pipeline.core.types import Case

#: :class:`QAPair` fields stored as JSON text in the ``qa_pairs`` frame (see :mod:`retrieval_pipeline.core.frames`).
PAIR_JSON_FIELDS = ("evidence", "warnings")


@dataclass
class QAPair:
    query_id: str
    suite: str
    benchmark_type: str
    source_file: str
    query: str
    gold_doc_ids: list[str]
    status: str  # resolved | unresolved | not_retrieval
    method: str  # how the gold was found: exact/alias/suffix mix, ast:..., description:..., none
    evidence: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    gold_grades: list[int] = field(default_factory=list)  # aligned with gold_doc_ids; empty means all 1

    def grades(self) -> list[int]:
        return list(self.gold_grades) or [1] * len(self.gold_doc_ids)


def _api_pair(case: Case, lookup: CorpusLookup) -> QAPair:
    resolutions = resolve_case_golds(case, lookup)
    doc_ids = list(dict.fromkeys(r.doc_id for r in resolutions if r.doc_id))
    methods = sorted({r.method for r in resolutions if r.doc_id})
    unresolved = [r.gold for r in resolutions if not r.doc_id]
    return QAPair(
        query_id=case.case_id,
        suite=case.suite,
        benchmark_type=case.benchmark_type,
        source_file=case.source_file,
        query=case.query,
        gold_doc_ids=doc_ids,
        status="resolved" if doc_ids else "unresolved",
        method="+".join(methods) if methods else "none",
        evidence={"resolutions": [asdict(r) for r in resolutions]},
        warnings=[f"gold {g!r} of case {case.case_id!r} ({case.source_file}) is not in the corpus" for g in unresolved],
    )


def _fix_pair(case: Case, inference: TargetInference, inferer: TargetInferer) -> QAPair:
    return QAPair(
        query_id=case.case_id,
        suite=case.suite,
        benchmark_type=case.benchmark_type,
        source_file=case.source_file,
        query=case.query,
        gold_doc_ids=[inference.target] if inference.target else [],
        status="resolved" if inference.target else "unresolved",
        method=f"{inferer.name}:{inference.method}",
        evidence=dict(inference.evidence),
        warnings=list(inference.warnings),
    )


def build_pairs(
    cases: Sequence[Case],
    lookup: CorpusLookup,
    inferer: TargetInferer,
    pair_case: Callable[[Case], QAPair] | None = None,
) -> list[QAPair]:
    """One pair per case, in input order.

    Args:
        pair_case: The dataset kind's pair builder (its adapter's ``pair_builder``): when given, every
            case goes through it. Otherwise the cases are benchmark-suite cases, paired here.

    Raises:
        ValueError: without ``pair_case``, a case is not of a benchmark-suite type.
    """
    if pair_case is not None:
        return [pair_case(case) for case in cases]
    fix_cases = [c for c in cases if c.benchmark_type == "fix_error"]
    batch = getattr(inferer, "infer_all", None)  # an LLM inferer answers all cases concurrently
    inferred = batch(fix_cases, lookup) if batch else [inferer.infer(c, lookup) for c in fix_cases]
    inference_of = {c.case_id: i for c, i in zip(fix_cases, inferred)}
    pairs = []
    for case in cases:
        if case.benchmark_type == "api_understanding":
            pairs.append(_api_pair(case, lookup))
        elif case.benchmark_type == "fix_error":
            pairs.append(_fix_pair(case, inference_of[case.case_id], inferer))
        elif case.benchmark_type == "multiple_choice":
            pairs.append(
                QAPair(
                    case.case_id,
                    case.suite,
                    case.benchmark_type,
                    case.source_file,
                    case.query,
                    [],
                    "not_retrieval",
                    "none",
                    {"routed_to": "question verifier"},
                )
            )
        else:
            raise ValueError(
                f"case {case.case_id!r} ({case.source_file}) is a {case.benchmark_type!r} case: its dataset kind's pair builder is needed"
            )
    return pairs


def pairs_report(pairs: Sequence[QAPair]) -> dict[str, Any]:
    """Counts that add up: resolved + unresolved + not_retrieval == total, plus gold resolution rates."""
    status = Counter(p.status for p in pairs)
    golds = [r for p in pairs if p.benchmark_type == "api_understanding" for r in p.evidence.get("resolutions", [])]
    by_method = Counter(r["method"] for r in golds)
    resolved_golds = sum(1 for r in golds if r["doc_id"])
    fix = [p for p in pairs if p.benchmark_type == "fix_error"]
    return {
        "total": len(pairs),
        "resolved": status["resolved"],
        "unresolved": status["unresolved"],
        "not_retrieval": status["not_retrieval"],
        "api_gold_strings": len(golds),
        "api_gold_resolved": resolved_golds,
        "api_gold_resolution_rate": resolved_golds / len(golds) if golds else float("nan"),
        "api_gold_by_method": dict(by_method),
        "fix_error_cases": len(fix),
        "fix_error_targets_found": sum(1 for p in fix if p.status == "resolved"),
        **_agreement_report(fix),
    }


def _agreement_report(fix: Sequence[QAPair]) -> dict[str, Any]:
    """When an LLM inferred fix_error targets: how often it agreed with the AST, over cases both answered."""
    both = [p for p in fix if "agree" in p.evidence and p.evidence.get("llm") and p.evidence.get("ast")]
    if not any("agree" in p.evidence for p in fix):
        return {}
    return {
        "ast_llm_compared": len(both),
        "ast_llm_agreement_rate": sum(p.evidence["agree"] for p in both) / len(both) if both else float("nan"),
        "ast_llm_disagreements": sum(not p.evidence["agree"] for p in both),
    }
