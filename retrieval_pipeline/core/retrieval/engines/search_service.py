"""The search-service client behind ``kind: http``: batches of queries POSTed as JSON, retried, parsed into hits.

The protocol, the retry rule and what becomes a ``QueryError`` are described with the kind's settings in
:mod:`retrieval_pipeline.core.retrieval.kinds.http`; the request, deadline and retry plumbing shared with the
embedding server is :mod:`retrieval_pipeline.core.retrieval.engines.remote`.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult
from retrieval_pipeline.core.retrieval.engines.remote import (
    GaveUp,
    RetryPolicy,
    call_with_retries,
    chunks,
    classify_http_error,
    describe_http_error,
    post_json,
    scrub,
)

logger = logging.getLogger(__name__)

_SNIPPET = 160

#: ``post(url, payload, headers, timeout_s) -> decoded JSON``.
Poster = Callable[[str, Any, Mapping[str, str], float], Any]


class SearchServiceError(RuntimeError):
    """The search service failed the build probe; the message names the url."""


@dataclass
class HttpStats:
    """What an :class:`HttpRetriever` has done so far.

    Attributes:
        requests: POSTs sent (retries included).
        retries: Re-sends after a retryable failure.
        failed_batches: Batches that failed for good (every query of them became a ``QueryError``).
        query_errors: Queries answered with a ``QueryError`` (failed batches, service errors, garbage).
    """

    requests: int = 0
    retries: int = 0
    failed_batches: int = 0
    query_errors: int = 0


class HttpRetriever:
    """Ask a search service (see the module's protocol); failures become per-query ``QueryError``.

    Args:
        name: The retriever's name.
        url: The endpoint.
        headers: Extra request headers (their values are scrubbed from every message).
        timeout_s: Seconds per request, a deadline for the whole exchange.
        batch_size: Queries per POST.
        policy: Retry budget and backoff.
        post: Sends one request (injectable for tests).
        sleep: Waits between retries.
        rng: Jitter source.
    """

    def __init__(
        self,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        batch_size: int = 32,
        policy: RetryPolicy | None = None,
        post: Poster = post_json,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.name = name
        self.url = url
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self.policy = policy or RetryPolicy()
        self.stats = HttpStats()
        self._headers = dict(headers or {})
        self._post = post
        self._sleep = sleep
        self._rng = rng or random.Random()

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        """One answer per query, in order: its hits (best first, at most ``k``) or a ``QueryError``."""
        answers: list[QueryResult] = []
        for batch in chunks(list(queries), self.batch_size):
            answers.extend(self._search_batch(list(batch), k))
        return answers

    def _search_batch(self, batch: list[str], k: int) -> list[QueryResult]:
        try:
            payload = call_with_retries(
                lambda: self._send(batch, k),
                self.policy,
                classify_http_error,
                self._describe,
                sleep=self._sleep,
                rng=self._rng,
                on_retry=self._count_retry,
                what=f"search request to {self.url}",
            )
        except GaveUp as exc:
            self.stats.failed_batches += 1
            logger.warning("search service %s: a batch of %d queries failed: %s", self.url, len(batch), exc)
            return self._failed(batch, f"search service {self.url}: request failed: {exc}")
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list) or len(results) != len(batch):
            got = f"{len(results)} result lists" if isinstance(results, list) else _snippet(payload)
            return self._failed(
                batch, f"search service {self.url}: garbage answer: expected {{'results': [...]}} with {len(batch)} entries, got {got}"
            )
        answers = [parse_entry(entry, k) for entry in results]
        failed = [a for a in answers if isinstance(a, QueryError)]
        self.stats.query_errors += len(failed)
        return [QueryError(self._scrub(f"search service {self.url}: {a.message}")) if isinstance(a, QueryError) else a for a in answers]

    def _send(self, batch: list[str], k: int) -> Any:
        self.stats.requests += 1
        return self._post(self.url, {"queries": batch, "k": k}, self._headers, self.timeout_s)

    def _failed(self, batch: list[str], reason: str) -> list[QueryResult]:
        self.stats.query_errors += len(batch)
        error = QueryError(self._scrub(reason))
        return [error for _ in batch]

    def _count_retry(self, attempt: int, reason: str) -> None:
        self.stats.retries += 1

    def _describe(self, exc: Exception) -> str:
        return self._scrub(describe_http_error(exc))

    def _scrub(self, text: str) -> str:
        return scrub(text, self._headers.values())

    def __repr__(self) -> str:
        return f"HttpRetriever({self.name!r}, url={self.url!r}, batch_size={self.batch_size})"


def parse_entry(entry: Any, k: int) -> QueryResult:
    """One query's entry of ``results``: hits sorted by score (stable) and cut at ``k``, or a ``QueryError``."""
    if isinstance(entry, dict) and "error" in entry:
        return QueryError(f"the service reported an error: {str(entry['error'])[:_SNIPPET]}")
    if not isinstance(entry, list):
        return QueryError(f"garbage entry: expected a list of hits or {{'error': ...}}, got {_snippet(entry)}")
    hits: list[Hit] = []
    for hit in entry:
        parsed = _parse_hit(hit)
        if isinstance(parsed, QueryError):
            return parsed
        hits.append(parsed)
    hits.sort(key=lambda h: -h[1])
    return hits[: max(k, 0)]


def _parse_hit(hit: Any) -> Hit | QueryError:
    if not isinstance(hit, dict) or not isinstance(hit.get("doc_id"), str):
        return QueryError(f"garbage hit: expected {{'doc_id': str, 'score': number}}, got {_snippet(hit)}")
    score = hit.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return QueryError(f"garbage hit: the score of {hit['doc_id'][:80]!r} is not a finite number: {_snippet(score)}")
    return hit["doc_id"], float(score)


def _snippet(value: Any) -> str:
    return repr(value)[:_SNIPPET]
