"""Reranking a base retriever's hits with a scorer: the search behind ``kind: rerank``.

:class:`CrossEncoderReranker` rescores the base's first ``top_n`` hits of every query in one scorer call and
merges the rest below them; the rule (ties, placeholder scores, failed queries) is stated with the kind's
settings in :mod:`retrieval_pipeline.core.retrieval.kinds.rerank`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult, Retriever


class CrossEncoderReranker:
    """Reranks a base retriever's ``top_n`` hits with a scorer (see the module docstring for the rule).

    Args:
        name: The retriever's name in runs and reports.
        base: The retriever whose hits are reranked.
        scorer: Has ``score(pairs) -> scores`` over ``(query, document text)`` pairs.
        texts: Document text by doc id (every doc the base can return).
        top_n: How many of the base's hits are rescored.
    """

    def __init__(self, name: str, base: Retriever, scorer: Any, texts: Mapping[str, str], top_n: int) -> None:
        if top_n < 1:
            raise ValueError(f"top_n must be >= 1, got {top_n}")
        self.name = name
        self.base = base
        self.scorer = scorer
        self.top_n = top_n
        self._texts = texts

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        """The base's hits, the ``top_n`` of each query reranked by the scorer, cut at ``k``."""
        queries = list(queries)
        if not queries:
            return []
        if k <= 0:
            return [[] for _ in queries]
        answers = self.base.search(queries, max(self.top_n, k))
        heads = [[] if isinstance(a, QueryError) else list(a[: self.top_n]) for a in answers]
        scores = self._score(queries, heads)
        results: list[QueryResult] = []
        offset = 0
        for answer, head in zip(answers, heads):
            if isinstance(answer, QueryError):
                results.append(answer)
                continue
            results.append(_merge(head, scores[offset : offset + len(head)], list(answer[self.top_n :]), k))
            offset += len(head)
        return results

    def _score(self, queries: list[str], heads: list[list[Hit]]) -> np.ndarray:
        """Scores of every ``(query, text)`` pair of every head, in one scorer call."""
        pairs = [(query, self._texts[doc]) for query, head in zip(queries, heads) for doc, _ in head]
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        scores = np.asarray(self.scorer.score(pairs), dtype=np.float64).reshape(-1)
        if scores.shape[0] != len(pairs):
            raise ValueError(f"{self.name}: the scorer returned {scores.shape[0]} scores for {len(pairs)} pairs")
        return scores

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self.name!r}, base={getattr(self.base, 'name', self.base)!r}, top_n={self.top_n})"


def _merge(head: list[Hit], scores: np.ndarray, tail: list[Hit], k: int) -> list[Hit]:
    """``head`` sorted by ``(-score, base rank)``, then ``tail`` in base order below it, cut at ``k``."""
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    ranked = [(head[i][0], float(scores[i])) for i in order]
    room = k - len(ranked)
    if room > 0 and tail:
        floor = ranked[-1][1] if ranked else 0.0
        ranked.extend((doc, floor - (j + 1)) for j, (doc, _) in enumerate(tail[:room]))
    return ranked[:k]
