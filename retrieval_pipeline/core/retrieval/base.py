"""The one retriever interface: a batch of query strings in, ranked ``(doc_id, score)`` lists out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from retrieval_pipeline.core.common.types import Hit


@dataclass(frozen=True)
class QueryError:
    """A query the retriever could not answer (a timed-out HTTP call, a failed request).

    A retriever may put one in place of a query's hit list. It is recorded with the query and the
    query counts as not found: it is never dropped silently.
    """

    message: str


#: What a retriever returns for one query: its hits, best first, or why there are none.
QueryResult = list[Hit] | QueryError


@runtime_checkable
class Retriever(Protocol):
    """A built index that answers queries.

    ``search`` returns, for each query, at most ``k`` hits sorted by score descending (ties broken
    deterministically, e.g. by corpus position), each doc id once and every doc id from the corpus.
    A retriever that can fail per query (a remote service) may return a :class:`QueryError` in place
    of that query's list.
    """

    name: str

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]: ...


class RetrieverError(RuntimeError):
    """A retriever failed or broke its contract; the message names the retriever and the dataset."""


def each_from_base(
    base: Retriever, queries: Sequence[str], k: int, depth: int, answer: Callable[[str, list[Hit], int], list[Hit]]
) -> list[QueryResult]:
    """What a retriever built on another one answers: ``answer(query, hits, k)`` per query.

    ``base`` is searched ``max(depth, k)`` deep in one batch; a query it failed on keeps its
    :class:`QueryError`; no query, or ``k <= 0``, asks the base nothing.
    """
    if not queries:
        return []
    if k <= 0:
        return [[] for _ in queries]
    answers = base.search(queries, max(depth, k))
    return [hits if isinstance(hits, QueryError) else answer(query, list(hits), k) for query, hits in zip(queries, answers)]
