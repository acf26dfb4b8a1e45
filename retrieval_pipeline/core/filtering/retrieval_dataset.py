"""Verified tuples in the ``retrieval_dataset.jsonl`` shape.

One record per kept pair::

    {id, source, query,
     positive_ctxs: [{fqn, text, rank_relevance}],
     negative_ctxs: [{fqn, text, is_hard_negative, kind}],
     metadata: {...}}

``rank_relevance`` is the qrels grade: 1 for suite golds, NQ answers and similarity matches (all
equally relevant); BEIR's graded judgements (1..3) as given. Hard negatives are siblings and BM25
near misses; the judge's random contexts are added as easy negatives (``is_hard_negative: false``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.asset_metadata import Markdown, StageResult, md_preview
from retrieval_pipeline.core.common.atomic import atomic_write
from retrieval_pipeline.core.common.types import Document, Qrels


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
            for g, grade in zip(gold_doc_ids, gold_grades or [1] * len(gold_doc_ids))
            if g in docs
        ],
        "negative_ctxs": negatives,
        "metadata": dict(metadata),
    }


def dataset_records(verified: pd.DataFrame, documents: Sequence[Document], dataset: str) -> list[dict[str, Any]]:
    """One record per kept row of a ``verified_pairs`` table, in table order.

    Args:
        verified: The ``verified_pairs`` table (list columns as lists or arrays).
        documents: The corpus the positives' and negatives' texts come from.
        dataset: The dataset's name: the records' ``source`` prefix and ``metadata.dataset``.
    """
    docs = {d.doc_id: d for d in documents}
    kept = verified[verified["keep"]] if len(verified) else verified
    return [
        build_record(
            query_id=pair.query_id,
            source=f"{dataset}/{pair.suite}",
            query=pair.query,
            gold_doc_ids=list(pair.gold_doc_ids),
            gold_grades=list(pair.gold_grades),
            docs=docs,
            sibling_ids=list(pair.sibling_negatives),
            bm25_ids=list(pair.bm25_negatives),
            random_ids=list(pair.random_doc_ids),
            metadata={
                "benchmark_type": pair.benchmark_type,
                "gold_method": pair.gold_method,
                "judge": pair.judge,
                "judge_reason": pair.reason,
                "dataset": dataset,
            },
        )
        for pair in kept.itertuples(index=False)
    ]


@dataclass(kw_only=True)
class DatasetResult(StageResult):
    """The dataset as a table (``metadata`` as sorted JSON text) and where its JSONL was written."""

    path: Path


def build_dataset(verified: pd.DataFrame, documents: Sequence[Document], dataset: str, path: Path) -> DatasetResult:
    """The verified retrieval dataset: records of the kept pairs, written to ``path`` as JSONL.

    Args:
        verified: The ``verified_pairs`` table.
        documents: The corpus.
        dataset: The dataset's name.
        path: Where ``retrieval_dataset.jsonl`` goes (written atomically).

    Returns:
        The table; summary metadata ``tuples``, ``jsonl_path``, ``positives_per_query`` and
        ``negatives_per_query``; details ``preview`` (Markdown).

    Raises:
        ValueError: the filter kept no pair (nothing is written).
    """
    records = dataset_records(verified, documents, dataset)
    if not records:
        raise ValueError(
            f"dataset {dataset}: the filter kept no pair, nothing to evaluate "
            f"({len(verified)} pairs judged; see verified_pairs for the reasons)"
        )
    write_jsonl(records, path)
    frame = pd.DataFrame(records)
    frame["metadata"] = frame["metadata"].map(lambda m: json.dumps(m, sort_keys=True))
    return DatasetResult(
        frame=frame,
        path=path,
        summary={
            "tuples": len(frame),
            "jsonl_path": path,
            "positives_per_query": float(frame["positive_ctxs"].map(len).mean()),
            "negatives_per_query": float(frame["negative_ctxs"].map(len).mean()),
        },
        details={"preview": Markdown(md_preview(frame[["id", "query"]]))},
    )


def write_jsonl(records: Iterable[Mapping[str, Any]], path: Path) -> int:
    """Write records one per line, atomically (a uniquely named temp file, then a rename); returns the count."""

    n = 0

    def write(temp: Path) -> None:
        nonlocal n
        with temp.open("w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
                n += 1

    atomic_write(path, write)
    return n


def qrels_from_records(records: Iterable[Mapping[str, Any]]) -> Qrels:
    """``{query_id: {fqn: rank_relevance}}`` from dataset records."""
    return {r["id"]: {p["fqn"]: int(p["rank_relevance"]) for p in r["positive_ctxs"]} for r in records}
