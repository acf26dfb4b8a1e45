"""Run a retriever over queries one at a time, timing each query as a user would see it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from retrieval_pipeline.core.common.types import Hit, Run
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult, Retriever


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
    """Inverse of :func:`runs_to_frame`.

    One pass over the rows sorted by (retriever, query, rank), as plain Python values: a pandas group per query
    made this a second or more of every warm run (a dozen steps read the runs of every retriever).
    """
    ordered = frame.sort_values(["retriever", "query_id", "rank"], kind="stable")
    errors_column = ordered["error"].tolist() if "error" in ordered else [None] * len(ordered)
    columns = [ordered[c].tolist() for c in ("retriever", "query_id", "rank", "doc_id", "score", "latency_ms")]
    out: dict[str, TimedRun] = {}
    for (retriever, qid), group in itertools.groupby(zip(*columns, errors_column), key=lambda row: (row[0], row[1])):
        rows = list(group)
        timed = out.setdefault(str(retriever), TimedRun(str(retriever), {}, {}, {}))
        _, _, _, _, _, latency, error = rows[0]
        if pd.notna(latency):
            timed.latency_ms[qid] = float(latency)
        if isinstance(error, str):
            timed.errors[qid] = error
        timed.run[qid] = [(doc, float(score)) for _, _, rank, doc, score, _, _ in rows if rank > 0]
    return out
