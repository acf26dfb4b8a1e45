"""Extracted (query, gold target) pairs: suites' cases resolved against the target corpus.

* ``api_understanding``: the case's gold FQNs resolved by exact, alias and suffix matching, then, for
  the golds still unresolved and in one call for the whole dataset, by a :class:`GoldImporter`
  (importing them in the library's environment; method ``import``).
* ``fix_error``: the primary subject inferred by a :class:`TargetInferer` (AST by default; the seam
  where an LLM-based inferer plugs in). The AST's :class:`TargetRecord` says whether the target came
  from code or from the description, and whether the two agree.
* ``multiple_choice``: not a retrieval pair; routed to the question verifier and counted as such.
* Every other kind's cases (NQ, context QA, BEIR, ...): its adapter's pair builder
  (:meth:`retrieval_pipeline.core.datasets.DatasetAdapter.pair_builder`).

Every case yields exactly one :class:`QAPair`; unresolved ones stay in the table with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.types import Case, QAPair
from retrieval_pipeline.core.datasets.base import gold_pair
from retrieval_pipeline.core.pairs.fix_targets import TargetInference, TargetInferer, TargetRecord
from retrieval_pipeline.core.pairs.gold import (
    RESOLUTION_METHODS,
    CorpusLookup,
    GoldImporter,
    GoldResolution,
    resolution_shares,
    resolve_case_golds,
    resolve_golds,
)


def _api_pair(case: Case, lookup: CorpusLookup, resolved: Mapping[str, GoldResolution]) -> QAPair:
    resolutions = resolve_case_golds(case, lookup, resolved)
    doc_ids = list(dict.fromkeys(r.doc_id for r in resolutions if r.doc_id))
    methods = sorted({r.method for r in resolutions if r.doc_id})
    unresolved = [r for r in resolutions if not r.doc_id]
    return gold_pair(
        case,
        doc_ids,
        "+".join(methods) if methods else "none",
        {"resolutions": [asdict(r) for r in resolutions]},
        [f"gold {r.gold!r} of case {case.case_id!r} ({case.source_file}) is not in the corpus: {r.note}" for r in unresolved],
    )


def _fix_pair(case: Case, inference: TargetInference, inferer: TargetInferer) -> QAPair:
    return gold_pair(
        case,
        [inference.target] if inference.target else [],
        f"{inferer.name}:{inference.method}",
        dict(inference.evidence),
        inference.warnings,
    )


def build_pairs(
    cases: Sequence[Case],
    lookup: CorpusLookup,
    inferer: TargetInferer,
    pair_case: Callable[[Case], QAPair] | None = None,
    importer: GoldImporter | None = None,
) -> list[QAPair]:
    """One pair per case, in input order.

    Args:
        pair_case: The dataset kind's pair builder (its adapter's ``pair_builder``): when given, every
            case goes through it. Otherwise the cases are benchmark-suite cases, paired here.
        importer: Asked once, about every api_understanding gold the corpus indexes leave unresolved.

    Raises:
        ValueError: without ``pair_case``, a case is not of a benchmark-suite type.
    """
    if pair_case is not None:
        return [pair_case(case) for case in cases]
    fix_cases = [c for c in cases if c.benchmark_type == "fix_error"]
    batch = getattr(inferer, "infer_all", None)  # an LLM inferer answers all cases concurrently
    inferred = batch(fix_cases, lookup) if batch else [inferer.infer(c, lookup) for c in fix_cases]
    inference_of = {c.case_id: i for c, i in zip(fix_cases, inferred)}
    api_golds = (g for c in cases if c.benchmark_type == "api_understanding" for g in c.gold_fqns)
    resolved = resolve_golds(api_golds, lookup, importer)
    pairs = []
    for case in cases:
        if case.benchmark_type == "api_understanding":
            pairs.append(_api_pair(case, lookup, resolved))
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
    by_method = dict.fromkeys(RESOLUTION_METHODS, 0) | Counter(r["method"] for r in golds) if golds else {}
    resolved_golds = sum(1 for r in golds if r["doc_id"])
    fix = [p for p in pairs if p.benchmark_type == "fix_error"]
    shares = {f"api_gold_share_{method}": share for method, share in resolution_shares(by_method).items()} if golds else {}
    return {
        "total": len(pairs),
        "resolved": status["resolved"],
        "unresolved": status["unresolved"],
        "not_retrieval": status["not_retrieval"],
        "api_gold_strings": len(golds),
        "api_gold_resolved": resolved_golds,
        "api_gold_resolution_rate": resolved_golds / len(golds) if golds else float("nan"),
        **shares,
        "api_gold_by_method": by_method,
        "fix_error_cases": len(fix),
        "fix_error_targets_found": sum(1 for p in fix if p.status == "resolved"),
        **fix_source_report(fix_target_records(fix)),
        **_agreement_report(fix),
    }


def fix_target_records(pairs: Sequence[QAPair]) -> list[TargetRecord]:
    """The :class:`TargetRecord` of every fix_error pair that carries one (the AST inferer's), in order."""
    records = (TargetRecord.from_evidence(p.evidence) for p in pairs if p.benchmark_type == "fix_error")
    return [r for r in records if r is not None]


def fix_source_report(records: Sequence[TargetRecord]) -> dict[str, Any]:
    """How many fix_error targets came from code and from the description, and how often code agreed with it.

    Agreement is counted over the cases whose target came from code and whose description also names a
    document; ``fix_error_code_description_disagreements`` lists every other answer with both sides.
    Empty when no record exists (no fix_error case, or an inferer that keeps none).
    """
    if not records:
        return {}
    compared = [r for r in records if r.agrees is not None]
    agreeing = sum(1 for r in compared if r.agrees)
    return {
        "fix_error_targets_from_code": sum(1 for r in records if r.from_code),
        "fix_error_targets_from_description": sum(1 for r in records if r.source == "description"),
        "fix_error_targets_none": sum(1 for r in records if r.target is None),
        "fix_error_unparsed_files": sum(1 for r in records for f in r.file_problems if f.get("line") is not None),
        "fix_error_code_description_compared": len(compared),
        "fix_error_code_description_agreement_rate": agreeing / len(compared) if compared else float("nan"),
        "fix_error_code_description_disagreements": [
            {"case": r.case_id, "code": r.target, "source": r.source, "description": r.description_target} for r in compared if not r.agrees
        ],
    }


def fix_target_table(records: Sequence[TargetRecord]) -> pd.DataFrame:
    """One row per fix_error case: ``case``, ``target``, ``source``, ``description_target``, ``agreement``, ``file_problems``.

    ``agreement`` is ``agree``, ``disagree``, or ``n/a`` (target from the description, or either side missing);
    ``file_problems`` names each file tried and not used (``role:line: problem``), ``;``-separated.
    """
    verdict = {True: "agree", False: "disagree", None: "n/a"}
    rows = [
        {
            "case": r.case_id,
            "target": r.target,
            "source": r.source,
            "description_target": r.description_target,
            "agreement": verdict[r.agrees],
            "file_problems": "; ".join(f"{f['role']}:{f['line'] or '-'}: {f['problem']}" for f in r.file_problems),
        }
        for r in records
    ]
    columns = ["case", "target", "source", "description_target", "agreement", "file_problems"]
    return pd.DataFrame(rows, columns=columns)


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
