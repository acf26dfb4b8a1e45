"""The encoder and retriever behind ``kind: openai_embeddings``: vectors from an OpenAI-compatible ``/v1/embeddings`` server.

:class:`OpenAIEmbeddingEncoder` sends batches of texts, retries as the LLM client does, and refuses garbage (the
wrong number of vectors, non-finite values, a changed dimension) with :class:`EmbeddingServerError`;
:class:`OpenAIEmbeddingsRetriever` prefixes the queries and searches the dense index built from its vectors. The
settings, the cache identity and the build are the kind's: :mod:`retrieval_pipeline.core.retrieval.kinds.openai_embeddings`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from retrieval_pipeline.core.common.closing import Closing
from retrieval_pipeline.core.retrieval.base import QueryResult
from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.engines.remote import (
    GaveUp,
    RetryPolicy,
    call_with_retries,
    chunks,
    scrub,
)
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.models.encoders import l2_normalise
from retrieval_pipeline.core.services.llm.transport import classify_error, describe_error

#: The text embedded to learn the dimension when nothing else tells it (an empty corpus).
DIM_PROBE = "dimension probe"
_SNIPPET = 200


class EmbeddingServerError(RuntimeError):
    """The embedding server failed for good or answered garbage; the message names its base_url and model."""


def embedding_model_id(base_url: str, model: str, dimensions: int | None = None) -> str:
    """The cache and index identity of a served model: ``openai:<base_url>/<model>[/<dimensions>]``."""
    suffix = f"/{dimensions}" if dimensions is not None else ""
    return f"openai:{base_url.rstrip('/')}/{model}{suffix}"


class OpenAIEmbeddingEncoder(Closing):
    """An :class:`~retrieval_pipeline.core.retrieval.models.encoders.Encoder` backed by an OpenAI-compatible server.

    Texts are sent ``batch_size`` at a time with ``encoding_format="float"`` (what every compatible
    server supports); each request is retried per ``policy``; answers are validated and L2-normalised.

    Args:
        base_url: The server's OpenAI ``base_url`` (``http://host:port/v1``).
        model: The model name.
        api_key: The key (``None``: the server needs none). Never stored in a repr or a message.
        batch_size: Texts per request.
        timeout_s: Seconds per request, a deadline for the whole exchange (not per read).
        policy: Retry budget and backoff.
        dimensions: Asked of the server when set (and then the expected dimension).
        dim: The expected dimension when known (from a saved index or the cache); learnt from the first
            answer otherwise.
        client: A ready ``openai.OpenAI`` (or look-alike); built when ``None``.
        sleep: Waits between retries (injectable for tests).
        rng: Jitter source.

    Attributes:
        requests: HTTP requests sent (retries included).
        retries: Re-sends after a retryable failure.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        policy: RetryPolicy | None = None,
        dimensions: int | None = None,
        dim: int | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if dimensions is not None and dim is not None and dim != dimensions:
            raise ValueError(f"dim {dim} disagrees with dimensions {dimensions}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_id = embedding_model_id(base_url, model, dimensions)
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.policy = policy or RetryPolicy()
        self.dimensions = dimensions
        self._api_key = api_key
        self._dim = dimensions if dimensions is not None else dim
        self._owns_client = client is None
        self._client = client if client is not None else self._build_client()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.requests = 0
        self.retries = 0

    def _build_client(self) -> Any:
        """An ``openai.OpenAI`` with its own retries off (this class retries)."""
        import openai

        from retrieval_pipeline.core.services.llm.transport import DeadlineTransport  # timeout_s bounds the whole request

        http_client = openai.DefaultHttpxClient(transport=DeadlineTransport(self.timeout_s), timeout=self.timeout_s)
        return openai.OpenAI(
            base_url=self.base_url, api_key=self._api_key or "not-needed", timeout=self.timeout_s, max_retries=0, http_client=http_client
        )

    @property
    def dim(self) -> int:  # type: ignore[override]
        """The vector length: given, learnt from the first answer, or asked with one probe text."""
        if self._dim is None:
            self.encode([DIM_PROBE])
        assert self._dim is not None
        return self._dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size``.

        Args:
            texts: The texts, in order.

        Returns:
            An ``(len(texts), dim)`` float32 array with unit-norm rows.

        Raises:
            EmbeddingServerError: A batch failed for good or its answer is garbage.
        """
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = [self._embed_batch(list(batch)) for batch in chunks(list(texts), self.batch_size)]
        return l2_normalise(np.vstack(rows))

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        """One batch: request (with retries), validate, return a ``(len(batch), dim)`` float64 array."""
        try:
            response = call_with_retries(
                lambda: self._request(batch),
                self.policy,
                classify_error,
                self._describe,
                sleep=self._sleep,
                rng=self._rng,
                on_retry=self._count_retry,
                what=f"embedding request to {self.base_url}",
            )
        except GaveUp as exc:
            raise self._error(f"request of {len(batch)} text(s) failed: {exc}") from exc
        return self._vectors_from(response, len(batch))

    def _request(self, batch: list[str]) -> Any:
        self.requests += 1
        kwargs: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        return self._client.embeddings.create(**kwargs)

    def _count_retry(self, attempt: int, reason: str) -> None:
        self.retries += 1

    def _describe(self, exc: Exception) -> str:
        return scrub(describe_error(exc), [self._api_key or ""])

    # -- validation ------------------------------------------------------------------------------

    def _vectors_from(self, response: Any, n: int) -> np.ndarray:
        """The vectors of one answer in input order, or :class:`EmbeddingServerError` for garbage."""
        data = getattr(response, "data", None)
        if not isinstance(data, list):
            raise self._error(f"the answer is not an embeddings list: {_snippet(response)}")
        if len(data) != n:
            raise self._error(f"returned {len(data)} embeddings for {n} input text(s)")
        rows = [self._row(getattr(item, "embedding", None), i) for i, item in enumerate(_in_input_order(data, self._error))]
        lengths = sorted({len(r) for r in rows})
        if len(lengths) != 1:
            raise self._error(f"returned vectors of different lengths {lengths} in one answer")
        self._check_dim(lengths[0])
        return np.asarray(rows, dtype=np.float64)

    def _row(self, values: Any, i: int) -> list[float]:
        if not isinstance(values, list) or not values:
            raise self._error(f"embedding {i} is not a non-empty list of numbers: {_snippet(values)}")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            bad = next(v for v in values if not isinstance(v, (int, float)) or isinstance(v, bool))
            raise self._error(f"embedding {i} holds a non-numeric value {_snippet(bad)}")
        if not np.all(np.isfinite(values)):
            raise self._error(f"embedding {i} holds a non-finite value (NaN or infinity)")
        return [float(v) for v in values]

    def _check_dim(self, dim: int) -> None:
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            origin = "the dimensions setting" if self.dimensions is not None else "the index, the cache or earlier answers"
            raise self._error(f"returned vectors of dimension {dim}, expected {self._dim} (from {origin})")

    def _error(self, what: str) -> EmbeddingServerError:
        return EmbeddingServerError(scrub(f"embedding server {self.base_url} (model {self.model!r}): {what}", [self._api_key or ""]))

    def close(self) -> None:
        """Close the HTTP client if this encoder built it."""
        if self._owns_client:
            self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingEncoder(model_id={self.model_id!r}, batch_size={self.batch_size})"


def _in_input_order(data: list[Any], error: Callable[[str], Exception]) -> list[Any]:
    """The items sorted by their ``index`` (OpenAI's order field) when every item has one."""
    indexes = [getattr(item, "index", None) for item in data]
    if any(i is None for i in indexes):
        return data
    if sorted(indexes) != list(range(len(data))):
        raise error(f"the embedding indexes {indexes[:10]} are not 0..{len(data) - 1}")
    return [item for _, item in sorted(zip(indexes, data), key=lambda pair: pair[0])]


def _snippet(value: Any) -> str:
    return repr(value)[:_SNIPPET]


class OpenAIEmbeddingsRetriever(Closing):
    """A loaded ``openai_embeddings`` index: prefixes the queries, then searches the dense index.

    Args:
        name: The retriever's name.
        dense: The loaded dense index (its encoder and query cache included).
        encoder: The encoder (closed with this retriever).
        cache: The embedding cache (closed with this retriever).
        query_prefix: Prepended to every query.
    """

    def __init__(
        self, name: str, dense: DenseRetriever, encoder: OpenAIEmbeddingEncoder, cache: EmbeddingCache | None, query_prefix: str = ""
    ) -> None:
        self.name = name
        self.dense = dense
        self.encoder = encoder
        self.cache = cache
        self.query_prefix = query_prefix

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        """Top-``k`` documents per query (see :meth:`DenseRetriever.search`)."""
        return list(self.dense.search([self.query_prefix + q for q in queries], k))

    def close(self) -> None:
        """Close the encoder's HTTP client and the cache."""
        self.encoder.close()
        if self.cache is not None:
            self.cache.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingsRetriever({self.name!r}, model_id={self.encoder.model_id!r})"
