"""Verified tuples in the ``retrieval_dataset.jsonl`` shape.

One record per kept pair::

    {id, source, query,
     positive_ctxs: [{fqn, text, rank_relevance}],
     negative_ctxs: [{fqn, text, is_hard_negative, kind}],
     metadata: {...}}

``rank_relevance`` is the qrels grade: 1 for suite golds, NQ answers and similarity matches (all
equally relevant); BEIR's graded judgements (1..3) as given. Hard negatives are siblings and BM25 near misses; the judge's random contexts are added as
easy negatives (``is_hard_negative: false``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.types import Document, Qrels


def build_record(
    *,
    query_id: str,
    source: str,
    query: str,
    gold_doc_ids: Sequence[str],
    docs: Mapping[str, Document],
    gold_grades: Sequence[int] | None = None,
    sibling_ids: Sequence[str],
    bm25_ids: Sequence[str],
    random_ids: Sequence[str],
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """One tuple; negatives are de-duplicated across kinds (sibling, bm25, random, in that order)."""
    negatives: list[dict[str, Any]] = []
    seen = set(gold_doc_ids)
    for kind, ids, hard in (("sibling", sibling_ids, True), ("bm25", bm25_ids, True), ("random", random_ids, False)):
        for doc_id in ids:
            if doc_id in seen or doc_id not in docs:
                continue
            seen.add(doc_id)
            negatives.append({"fqn": doc_id, "text": docs[doc_id].text, "is_hard_negative": hard, "kind": kind})
    return {
        "id": query_id,
        "source": source,
        "query": query,
        "positive_ctxs": [
            {"fqn": g, "text": docs[g].text, "rank_relevance": int(grade)}
            for g, grade in zip(gold_doc_ids, gold_grades or [1] * len(gold_doc_ids)) if g in docs
        ],
        "negative_ctxs": negatives,
        "metadata": dict(metadata),
    }


def write_jsonl(records: Iterable[Mapping[str, Any]], path: Path) -> int:
    """Write records one per line (atomically); returns the count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
            n += 1
    tmp.replace(path)
    return n


def qrels_from_records(records: Iterable[Mapping[str, Any]]) -> Qrels:
    """``{query_id: {fqn: rank_relevance}}`` from dataset records."""
    return {r["id"]: {p["fqn"]: int(p["rank_relevance"]) for p in r["positive_ctxs"]} for r in records}
