"""``kind: openai_embeddings``: dense retrieval with the vectors of any OpenAI-compatible ``/v1/embeddings`` server.

vLLM, Hugging Face TEI, Ollama, llama.cpp and OpenAI itself serve ``POST {base_url}/embeddings``. The
corpus is embedded once (in batches of ``batch_size``, through the embedding cache), indexed exactly
like ``dense`` (FAISS flat inner product over L2-normalised vectors, see
:mod:`retrieval_pipeline.core.retrieval.engines.dense_search`), and queries are embedded at search time::

    retrievers:
      dense_bge_small_vllm:
        kind: openai_embeddings
        base_url: http://127.0.0.1:8000/v1
        model: BAAI/bge-small-en-v1.5
        batch_size: 64
        query_prefix: "Represent this sentence for searching relevant passages: "
      dense_openai_te3_small_256:
        kind: openai_embeddings
        base_url: https://api.openai.com/v1
        model: text-embedding-3-small
        api_key_env: OPENAI_API_KEY      # the NAME of the variable; the key itself is never in a file
        dimensions: 256

Settings:

* ``base_url``, ``model``: the server and the model it serves.
* ``api_key_env``: the name of the environment variable holding the API key (none: no key). The spec,
  ``params.json``, the cache and every log line and error hold only that name; the value is read from
  the environment when the encoder is made (the Dagster layer passes it through ``dg.EnvVar``).
* ``batch_size``: texts per request; ``timeout_s``: per request; ``max_retries``, ``backoff_base_s``,
  ``backoff_max_s``: the LLM client's retry policy (timeouts, connection errors, 429 with
  ``Retry-After``, 5xx are re-sent; other 4xx are final).
* ``dimensions``: asked of models that can shorten their vectors (OpenAI ``text-embedding-3-*``).
* ``query_prefix`` / ``passage_prefix``: prepended to queries / documents (E5: ``"query: "`` and
  ``"passage: "``; BGE: an instruction before queries only). The prefixed text is what is embedded
  and cached.

Vectors are cached in ``cache_dir/embeddings.sqlite`` under the model id
``openai:<base_url>/<model>[/<dimensions>]`` (queries too), so a rebuild of an unchanged corpus sends
no request; a build saves its vectors every ``SAVE_EVERY_BATCHES`` batches, so one that fails late
resumes where it stopped. A server that times out for good, or answers garbage (not JSON, the wrong number of
vectors, non-numeric or non-finite values, a dimension other than before), raises
:class:`EmbeddingServerError` naming the base_url and the model (the factory adds the retriever and
the dataset).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.engines.embedding_server import OpenAIEmbeddingEncoder, OpenAIEmbeddingsRetriever, embedding_model_id
from retrieval_pipeline.core.retrieval.engines.remote import ENV_NAME, RetryPolicy, chunks, secret_from_env
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind

logger = logging.getLogger(__name__)

#: The embedding cache file inside ``ctx.cache_dir``.
CACHE_FILE = "embeddings.sqlite"
#: The dense index (its own ``params.json``, ``index.faiss``, ``doc_ids.json``) lives in this sub-folder of the index folder.
DENSE_DIR = "dense"
#: While building, new vectors are written to the cache every this many batches, so a build that fails
#: late (a server gone, a quota reached) keeps what it paid for and the next build resumes from there.
SAVE_EVERY_BATCHES = 16


@register_kind
class OpenAIEmbeddingsSpec(RetrieverSpec):
    kind: Literal["openai_embeddings"] = "openai_embeddings"
    EMBEDS: ClassVar[bool] = True
    base_url: str = Field(pattern=r"^https?://\S+$")
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(None, pattern=ENV_NAME)
    batch_size: int = Field(64, ge=1, le=4096)
    timeout_s: float = Field(30.0, gt=0, le=3600)
    max_retries: int = Field(4, ge=0, le=20)
    backoff_base_s: float = Field(0.5, ge=0, le=60)
    backoff_max_s: float = Field(8.0, ge=0, le=600)
    dimensions: int | None = Field(None, ge=1)
    query_prefix: str = ""
    passage_prefix: str = ""

    @property
    def model_id(self) -> str:
        """The embedding cache and index identity of this spec's model."""
        return embedding_model_id(self.base_url, self.model, self.dimensions)

    def encoder(self, dim: int | None = None, environ: Mapping[str, str] | None = None, **kwargs: Any) -> OpenAIEmbeddingEncoder:
        """The encoder of this spec (the API key read from ``api_key_env`` now).

        Args:
            dim: The expected dimension, when known.
            environ: Where ``api_key_env`` is looked up (``os.environ`` by default).
            **kwargs: Passed to :class:`OpenAIEmbeddingEncoder` (``client``, ``sleep``, ``rng``).
        """
        key = secret_from_env(self.api_key_env, "api_key_env", environ) if self.api_key_env else None
        policy = RetryPolicy(self.max_retries, self.backoff_base_s, self.backoff_max_s)
        return OpenAIEmbeddingEncoder(
            self.base_url,
            self.model,
            api_key=key,
            batch_size=self.batch_size,
            timeout_s=self.timeout_s,
            policy=policy,
            dimensions=self.dimensions,
            dim=dim,
            **kwargs,
        )

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        """Embed the corpus (through the cache) and save a dense index into ``ctx.index_dir/dense``."""
        texts = [self.passage_prefix + t for t in ctx.texts]
        with EmbeddingCache(ctx.cache_dir / CACHE_FILE) as cache, self.encoder(dim=cache.stored_dim(self.model_id)) as encoder:
            embedded_now, from_cache = self._fill_cache(cache, encoder, texts)
            dense = DenseRetriever(self.name).build(ctx.doc_ids, texts, encoder, cache)  # every vector from the cache now
            dense.save(ctx.index_dir / DENSE_DIR)
            requests, retries = encoder.requests, encoder.retries
        dim = int(_saved_params(ctx)["dim"])
        logger.info("%s: %d texts embedded now, %d from the cache, %d request(s)", self.model_id, embedded_now, from_cache, requests)
        return {
            "model_id": self.model_id,
            "dim": dim,
            "embedded_now": embedded_now,
            "from_cache": from_cache,
            "requests": requests,
            "retries": retries,
        }

    def _fill_cache(self, cache: EmbeddingCache, encoder: OpenAIEmbeddingEncoder, texts: list[str]) -> tuple[int, int]:
        """Embed the distinct texts the cache lacks, saving every ``SAVE_EVERY_BATCHES`` batches.

        Returns:
            ``(embedded_now, from_cache)`` over distinct texts.
        """
        embedded_now = from_cache = 0
        for part in chunks(list(dict.fromkeys(texts)), self.batch_size * SAVE_EVERY_BATCHES):
            _, stats = cache.get_or_encode(encoder, list(part))
            embedded_now, from_cache = embedded_now + stats.misses, from_cache + stats.hits
        return embedded_now, from_cache

    def load(self, ctx: RetrieverContext) -> OpenAIEmbeddingsRetriever:
        """The saved dense index with this spec's encoder (queries cached too)."""
        encoder = self.encoder(dim=int(_saved_params(ctx)["dim"]))
        cache = EmbeddingCache(ctx.cache_dir / CACHE_FILE)
        try:
            dense = DenseRetriever.load(ctx.index_dir / DENSE_DIR, encoder, cache)
        except BaseException:
            encoder.close()
            cache.close()
            raise
        dense.name = self.name
        return OpenAIEmbeddingsRetriever(self.name, dense, encoder, cache, self.query_prefix)


def _saved_params(ctx: RetrieverContext) -> dict[str, Any]:
    """The dense index's own ``params.json`` (model id, dim, sizes)."""
    return dict(json.loads((ctx.index_dir / DENSE_DIR / "params.json").read_text(encoding="utf-8")))
