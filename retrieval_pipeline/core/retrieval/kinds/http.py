"""``kind: http``: a search service behind a URL (Elasticsearch/OpenSearch behind a shim, a vector DB, an in-house API).

Protocol (JSON over HTTP, one POST per batch of ``batch_size`` queries)::

    POST <url>
    Content-Type: application/json

    {"queries": ["how do I ...", "what is ..."], "k": 10}

    200 OK
    {"results": [
        [{"doc_id": "d17", "score": 12.5}, {"doc_id": "d3", "score": 9.0}],
        {"error": "query too long"}
    ]}

* ``results`` holds one entry per query, in query order: a list of hits (``doc_id`` a string,
  ``score`` a finite number; higher is better) or ``{"error": "..."}`` for a query the service could
  not answer. Hits are re-sorted by score (stable, so the service's order breaks ties) and cut at ``k``.
* Doc ids must be those of the dataset's corpus: the factory's ``CheckedRetriever`` fails the run,
  naming the retriever and the dataset, on an unknown or duplicate doc id. ``{dataset}`` in ``url``
  is replaced by the dataset name, for services that hold several corpora.
* Timeouts, connection errors, HTTP 429 (``Retry-After`` honoured, capped) and 5xx are retried with
  capped exponential backoff and jitter (the LLM client's policy); other 4xx are final.
* A query whose batch still fails, or whose entry is garbage, becomes a ``QueryError`` with the
  reason for that query (recorded with it and counted as not found); it is never dropped and never
  fails the whole run, even when every query fails (the evaluation asset counts them).
* Headers (e.g. ``Authorization``) come from environment variables named in ``headers_env``
  (header -> variable NAME); the spec, ``params.json`` and every message hold only the names.

Settings: ``url``, ``timeout_s`` (a deadline per request: connecting, the headers and the whole answer,
which is read up to 64 MB), ``max_retries``, ``backoff_base_s``, ``backoff_max_s``, ``batch_size`` (queries
per POST), ``headers_env``, ``probe_query``. There is nothing to index: building records the url and
sends ``probe_query`` once; a service that does not answer it (or answers doc ids outside the corpus)
fails the build with an error naming the url.

Example::

    retrievers:
      es_bm25_service:
        kind: http
        url: http://127.0.0.1:9300/search/{dataset}
        batch_size: 50
        timeout_s: 5
        headers_env: {Authorization: SEARCH_SERVICE_AUTH}   # the variable holds e.g. "Bearer ..."
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult
from retrieval_pipeline.core.retrieval.engines.remote import (
    ENV_NAME,
    GaveUp,
    RetryPolicy,
    call_with_retries,
    chunks,
    classify_http_error,
    describe_http_error,
    post_json,
    scrub,
    secret_from_env,
)
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind

logger = logging.getLogger(__name__)

#: Hits asked for by the build's probe query.
PROBE_K = 10
_HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
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


@register_kind
class HttpSpec(RetrieverSpec):
    kind: Literal["http"] = "http"
    url: str = Field(pattern=r"^https?://\S+$")
    timeout_s: float = Field(10.0, gt=0, le=3600)
    max_retries: int = Field(3, ge=0, le=20)
    backoff_base_s: float = Field(0.5, ge=0, le=60)
    backoff_max_s: float = Field(8.0, ge=0, le=600)
    batch_size: int = Field(32, ge=1, le=10_000)
    headers_env: dict[str, str] = Field(default_factory=dict)
    probe_query: str = Field("retrieval service probe", min_length=1)

    @field_validator("headers_env")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for header, variable in value.items():
            if not re.match(_HEADER_NAME, header):
                raise ValueError(f"{header!r} is not a valid HTTP header name")
            if not re.match(ENV_NAME, variable):
                raise ValueError(f"{variable!r} (for header {header!r}) is not an environment variable name")
        return value

    def endpoint(self, dataset: str) -> str:
        """``url`` with ``{dataset}`` replaced."""
        return self.url.replace("{dataset}", dataset)

    def retriever(self, dataset: str, environ: Mapping[str, str] | None = None, **kwargs: Any) -> HttpRetriever:
        """The retriever of this spec for ``dataset`` (header values read from the environment now).

        Args:
            dataset: The dataset name (for ``{dataset}`` in the url).
            environ: Where ``headers_env`` variables are looked up (``os.environ`` by default).
            **kwargs: Passed to :class:`HttpRetriever` (``post``, ``sleep``, ``rng``).
        """
        headers = {h: secret_from_env(v, f"headers_env.{h}", environ) for h, v in self.headers_env.items()}
        policy = RetryPolicy(self.max_retries, self.backoff_base_s, self.backoff_max_s)
        return HttpRetriever(
            self.name,
            self.endpoint(dataset),
            headers=headers,
            timeout_s=self.timeout_s,
            batch_size=self.batch_size,
            policy=policy,
            **kwargs,
        )

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        """Check that the service answers the probe query with corpus doc ids; record the url."""
        retriever = self.retriever(ctx.dataset)
        start = time.perf_counter()
        [answer] = retriever.search([self.probe_query], PROBE_K)
        seconds = time.perf_counter() - start
        if isinstance(answer, QueryError):
            raise SearchServiceError(
                f"search service {retriever.url} did not answer the probe query {self.probe_query!r}: {answer.message}"
            )
        known = set(ctx.doc_ids)
        unknown = [d for d, _ in answer if d not in known]
        if unknown:
            raise SearchServiceError(
                f"search service {retriever.url} answered the probe query with doc ids that are not in "
                f"the corpus of dataset {ctx.dataset!r}: {unknown[:5]}"
            )
        return {
            "url": retriever.url,
            "probe_hits": len(answer),
            "probe_seconds": round(seconds, 3),
            "probe_requests": retriever.stats.requests,
        }

    def load(self, ctx: RetrieverContext) -> HttpRetriever:
        """The HTTP retriever (nothing is read from the index folder but the factory's ``params.json``)."""
        return self.retriever(ctx.dataset)
