"""Run a retriever over queries one at a time, timing each query as a user would see it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult, Retriever
from retrieval_pipeline.core.types import Hit, Run


@dataclass
class TimedRun:
    """One retriever's ranked hits per query, latency on a sample, and the queries it failed on.

    A failed query has an empty hit list (so it counts as not found) and its error in ``errors``.
    """

    retriever: str
    run: Run
    latency_ms: dict[str, float]
    errors: dict[str, str] = field(default_factory=dict)


def _split(qid: str, answer: QueryResult, errors: dict[str, str]) -> list[Hit]:
    """The hits of one answer; a :class:`QueryError` is recorded in ``errors`` and gives no hits."""
    if isinstance(answer, QueryError):
        errors[qid] = answer.message
        return []
    return answer


def timed_run(retriever: Retriever, queries: Mapping[str, str], k: int) -> TimedRun:
    """Search each query alone (batch size 1) and record its wall time in milliseconds.

    One untimed warm-up query runs first, so lazy model loading and first-call costs do not land on
    the first real query's latency.
    """
    run: Run = {}
    latency: dict[str, float] = {}
    errors: dict[str, str] = {}
    if queries:
        retriever.search([next(iter(queries.values()))], k)
    for qid, text in queries.items():
        t0 = time.perf_counter()
        answer = retriever.search([text], k)[0]
        latency[qid] = (time.perf_counter() - t0) * 1000.0
        run[qid] = _split(qid, answer, errors)
    return TimedRun(retriever.name, run, latency, errors)


def batched_run(retriever: Retriever, queries: Mapping[str, str], k: int, latency_sample: int = 200) -> TimedRun:
    """Rank every query in one batched search; measure latency on the first ``latency_sample`` alone.

    Large query sets (NQ: 1,656 questions) are ranked in one batch, which is several times faster for
    the dense encoder. Latency is what one user sees, so it is measured by :func:`timed_run` on the
    first ``latency_sample`` queries, and only those have a ``latency_ms`` entry. Rankings are
    identical either way, because retrievers break ties deterministically.
    """
    ids = list(queries)
    answers = retriever.search([queries[q] for q in ids], k) if ids else []
    errors: dict[str, str] = {}
    run = {qid: _split(qid, answer, errors) for qid, answer in zip(ids, answers)}
    sample = {q: queries[q] for q in ids[:latency_sample]}
    latency = timed_run(retriever, sample, k).latency_ms if sample else {}
    return TimedRun(retriever.name, run, latency, errors)


RUN_COLUMNS = ["retriever", "query_id", "rank", "doc_id", "score", "latency_ms", "error"]


def runs_to_frame(runs: list[TimedRun]) -> pd.DataFrame:
    """Long format: one row per (retriever, query, rank); a query with no hits keeps one row with rank 0
    (and its error, when the retriever failed on it)."""
    rows = []
    for tr in runs:
        for qid, hits in tr.run.items():
            latency = tr.latency_ms.get(qid, float("nan"))
            if not hits:
                rows.append((tr.retriever, qid, 0, None, float("nan"), latency, tr.errors.get(qid)))
            for rank, (doc_id, score) in enumerate(hits, start=1):
                rows.append((tr.retriever, qid, rank, doc_id, float(score), latency, None))
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def frame_to_runs(frame: pd.DataFrame) -> dict[str, TimedRun]:
    """Inverse of :func:`runs_to_frame`."""
    out: dict[str, TimedRun] = {}
    for retriever, group in frame.sort_values(["retriever", "query_id", "rank"]).groupby("retriever", sort=False):
        run: Run = {}
        latency: dict[str, float] = {}
        errors: dict[str, str] = {}
        for qid, g in group.groupby("query_id", sort=False):
            if pd.notna(g["latency_ms"].iloc[0]):
                latency[qid] = float(g["latency_ms"].iloc[0])
            if "error" in g and isinstance(g["error"].iloc[0], str):
                errors[qid] = g["error"].iloc[0]
            run[qid] = [(d, float(s)) for d, s, r in zip(g["doc_id"], g["score"], g["rank"]) if r > 0]
        out[str(retriever)] = TimedRun(str(retriever), run, latency, errors)
    return out
