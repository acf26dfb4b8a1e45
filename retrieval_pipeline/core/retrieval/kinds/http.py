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

import re
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from retrieval_pipeline.core.retrieval.base import QueryError
from retrieval_pipeline.core.retrieval.engines.remote import ENV_NAME, RetryPolicy, secret_from_env
from retrieval_pipeline.core.retrieval.engines.search_service import HttpRetriever, SearchServiceError
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind

#: Hits asked for by the build's probe query.
PROBE_K = 10
_HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"


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
