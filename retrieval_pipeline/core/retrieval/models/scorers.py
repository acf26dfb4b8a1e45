"""Relevance scorers behind the ``rerank`` kind: a cross-encoder, or a bi-encoder's cosine where none ships.

A :class:`~retrieval_pipeline.core.retrieval.models.encoders.Scorer` maps ``(query, passage)`` pairs to one
relevance score each. :class:`CrossEncoderScorer` wraps sentence-transformers' ``CrossEncoder`` (torch
imported on first use only) and refuses a folder without a one-label relevance head;
:class:`BiEncoderScorer` re-scores with an :class:`~retrieval_pipeline.core.retrieval.models.encoders.Encoder`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_pipeline.core.common.progress import Progress
from retrieval_pipeline.core.retrieval.models.devices import resolve_device
from retrieval_pipeline.core.retrieval.models.encoders import Encoder, LocalModel, describe_model, l2_normalise
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource, set_hf_offline

#: Pairs a cross-encoder scores between two progress reports (rounded down to whole batches): reranking the top 50
#: of 1,656 NQ questions is 82,800 pairs, tens of minutes on 2 CPU cores, and said nothing until it ended.
SCORE_CHUNK_PAIRS = 2048


class CrossEncoderScorer(LocalModel):
    """A sentence-transformers ``CrossEncoder``: ``(query, passage)`` pairs in, one score each.

    Scores are the model's raw logits (no sigmoid): the same order as its probabilities, without the
    ties a sigmoid makes in float32 when it saturates near 0 or 1.

    The folder must hold a trained relevance head: its ``config.json`` must name a
    ``...ForSequenceClassification`` architecture with one label. A bi-encoder folder would otherwise
    load with a silently random head (sentence-transformers converts it), and an NLI model has three
    labels, not a relevance score; both are refused by :meth:`check`, before torch is imported.

    Args:
        model_path: Folder of the cross-encoder.
        batch_size: Pairs per forward pass.
        max_length: Truncate each pair to this many tokens (default: the model's own setting).
        device: torch device (``"cpu"`` or ``"cuda"``); part of ``model_id`` when not CPU.
        name: The model's name in ``model_id``; default: the folder name.
        model_id: An explicit identifier (default: derived, see :func:`~retrieval_pipeline.core.retrieval.models.model_source.make_model_id`).
    """

    def __init__(
        self,
        model_path: str | Path,
        batch_size: int = 32,
        max_length: int | None = None,
        device: str = "cpu",
        name: str | None = None,
        model_id: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_length is not None and max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        super().__init__(model_path, name, model_id, device)
        self.batch_size = batch_size
        self.max_length = max_length

    @classmethod
    def from_source(
        cls, source: ModelSource, batch_size: int = 32, max_length: int | None = None, device: str = "cpu"
    ) -> CrossEncoderScorer:
        """The scorer of the model ``source`` points at (resolved now: a missing folder fails here)."""
        resolved = source.resolve()
        scorer = cls(resolved.path, batch_size=batch_size, max_length=max_length, device=device, name=resolved.name)
        scorer.origin = dict(resolved.origin)
        return scorer

    def identity_settings(self) -> dict[str, Any]:
        # the device only when not CPU, so the ids of earlier indexes stay valid
        return {"max_length": self.max_length, **({"device": self.device} if self.device != "cpu" else {})}

    def check(self) -> None:
        """Refuse a folder that is not a one-label cross-encoder, then load the model.

        Raises:
            ValueError: No sequence-classification head, or not exactly one label.
        """
        check_cross_encoder_config(self.folder)
        _ = self.model

    def _load(self) -> Any:
        check_cross_encoder_config(self.folder)
        set_hf_offline()
        from sentence_transformers import CrossEncoder  # slow import: keep it here

        model = CrossEncoder(str(self.folder), device=self.device, max_length=self.max_length)
        if model.num_labels != 1:
            raise ValueError(f"{self.folder}: the cross-encoder has {model.num_labels} labels; a reranker needs one relevance score")
        return model

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The relevance logit of every pair, in order.

        Args:
            pairs: ``(query, passage)`` pairs.

        Returns:
            A float64 array of shape ``(len(pairs),)``.
        """
        if len(pairs) == 0:
            return np.zeros(0, dtype=np.float64)
        import torch

        chunk = max(self.batch_size, SCORE_CHUNK_PAIRS // self.batch_size * self.batch_size)
        parts: list[np.ndarray] = []
        with Progress(self.name, verb="scored", noun="pairs", unit="pairs") as progress:
            for start in range(0, len(pairs), chunk):
                scores = self.model.predict(
                    [[q, p] for q, p in pairs[start : start + chunk]],
                    batch_size=self.batch_size,
                    activation_fn=torch.nn.Identity(),
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                parts.append(np.asarray(scores, dtype=np.float64).reshape(-1))
                progress(min(start + chunk, len(pairs)), len(pairs))
        return np.concatenate(parts)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_length": self.max_length}

    def __repr__(self) -> str:
        return f"CrossEncoderScorer(name={self.name!r}, batch_size={self.batch_size})"


def check_cross_encoder_config(folder: Path) -> None:
    """Refuse a model folder whose ``config.json`` has no one-label sequence-classification head.

    Raises:
        FileNotFoundError: No ``config.json``.
        ValueError: Not a ``...ForSequenceClassification`` architecture, or not exactly one label.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no config.json: not a Hugging Face cross-encoder folder")
    config = json.loads(path.read_text(encoding="utf-8"))
    architectures = config.get("architectures") or []
    if not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        raise ValueError(
            f"{folder} is not a cross-encoder: config.json architectures {architectures} have no sequence-classification "
            "head (a bi-encoder folder would get an untrained, random head)"
        )
    labels = config.get("num_labels") or len(config.get("id2label") or {}) or 1
    if int(labels) != 1:
        raise ValueError(f"{folder}: the cross-encoder has {labels} labels (an NLI or classification model?); a reranker needs one score")


@functools.lru_cache(maxsize=8)
def cross_encoder(source: ModelSource, batch_size: int, max_length: int | None, device: str = "cpu") -> CrossEncoderScorer:
    """The (shared) scorer of ``source`` on ``device`` (``cpu``, ``cuda`` or ``auto``: resolved here)."""
    return CrossEncoderScorer.from_source(source, batch_size=batch_size, max_length=max_length, device=resolve_device(device))


class BiEncoderScorer:
    """Scores ``(query, passage)`` pairs by the cosine of a bi-encoder's embeddings.

    The stand-in reranker where no cross-encoder ships: it re-scores a base retriever's candidates with
    another embedding model. Passage vectors go through the embedding cache when one is attached
    (:meth:`attach_cache`), so passages a dense index already embedded cost nothing.

    .. math::  \\mathrm{score}(q, p) = E(q) \\cdot E(p) \\quad (\\lVert E(\\cdot) \\rVert = 1)
    """

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.model_id = f"bi-encoder:{encoder.model_id}"
        self._cache: Any | None = None

    def attach_cache(self, cache: Any) -> None:
        """Use ``cache`` (an :class:`~retrieval_pipeline.core.retrieval.models.embed_cache.EmbeddingCache`) for passages."""
        self._cache = cache

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Cosine of each pair's query and passage vectors."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        queries = list(dict.fromkeys(q for q, _ in pairs))
        passages = list(dict.fromkeys(p for _, p in pairs))
        q_vec = dict(zip(queries, l2_normalise(self.encoder.encode(queries))))
        if self._cache is not None:
            p_matrix, _ = self._cache.get_or_encode(self.encoder, passages)
        else:
            p_matrix = self.encoder.encode(passages)
        p_vec = dict(zip(passages, l2_normalise(p_matrix)))
        return np.array([float(q_vec[q] @ p_vec[p]) for q, p in pairs], dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        """The bi-encoder's identity (weights hash included), under this scorer's ``model_id``."""
        return {**describe_model(self.encoder), "model_id": self.model_id, "scorer": "bi_encoder"}

    def __repr__(self) -> str:
        return f"BiEncoderScorer(model_id={self.model_id!r})"
