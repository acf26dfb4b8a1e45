"""A cross-encoder trained on one corpus's mined pairs: the ``rerank`` kind's ``model: {finetuned_cross_encoder: ...}``.

No PyPI package ships a trained cross-encoder, so this one is made from the bundled all-MiniLM-L6-v2
bi-encoder: its encoder weights with a new one-label relevance head, trained with sentence-transformers'
``BinaryCrossEntropyLoss`` (:mod:`~retrieval_pipeline.core.retrieval.training.ce_train`) on the corpus's own pairs
(:func:`~retrieval_pipeline.core.retrieval.training.mined_pairs.mine_pairs`: docstring sentence -> object, method
sentence -> class, heading -> chunk; never a query):

* every mined ``(anchor, document)`` is a positive (label 1);
* the best ``negatives`` BM25 hits of each anchor that are a positive of no pair with that anchor are its
  negatives (label 0; :func:`~retrieval_pipeline.core.retrieval.training.mined_pairs.anchor_negatives`).

The anchors are the bi-encoder fine-tune's (:mod:`~retrieval_pipeline.core.retrieval.training.finetune`), so the
leakage test of the mined pairs covers this training set too; the negatives are corpus documents.

Caching is :func:`~retrieval_pipeline.core.retrieval.training.finetune.ensure_finetuned`'s: the model is saved
under ``<cache_dir>/finetuned/<key>/`` with its ``finetune.json``, the key hashing the base weights, the
corpus, every setting, the device and :data:`RECIPE` (``cross_encoder/1``, so no bi-encoder fine-tune
ever shares a key). The saved folder names ``BertForSequenceClassification`` with one label, so
:class:`~retrieval_pipeline.core.retrieval.models.scorers.CrossEncoderScorer` accepts it, and its ``model_id``
hashes its own weights.

Tests pass a fake ``trainer`` and a keyword scorer; the real trainer imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource, set_hf_offline
from retrieval_pipeline.core.retrieval.models.scorers import CrossEncoderScorer
from retrieval_pipeline.core.retrieval.training.ce_train import train_labelled
from retrieval_pipeline.core.retrieval.training.finetune import Finetuned, Trainer, TrainingSettings
from retrieval_pipeline.core.retrieval.training.mined_pairs import MinedPair, anchor_negatives, normalised

#: The cache key's recipe of a cross-encoder fine-tune (bumped when the same settings would train another model).
RECIPE = "cross_encoder/1"


class CrossEncoderFinetuneSettings(TrainingSettings):
    """How a base encoder becomes a corpus's cross-encoder (every field is part of the cache key).

    Attributes:
        base: The model whose encoder weights start the training (a bi-encoder folder is fine: a one-label
            head is added).
        mining: Which pairs are mined (``hard_negatives`` is unused: ``negatives`` says how many).
        negatives: BM25 negatives per anchor (label 0), beside its positives (label 1).
        epochs: Passes over the examples.
        batch_size: Examples per step.
        learning_rate: AdamW's peak learning rate.
        warmup_ratio: Share of the steps over which the rate rises linearly from 0 (then falls linearly to 0).
        max_length: Tokens per (anchor, passage) pair while training (longer pairs are cut); the scorer's
            default too.
        seed: Seeds the new head, the shuffling and torch.
        device: Where training runs: ``cpu`` (default), ``cuda`` or ``auto`` (cuda when available).
    """

    RECIPE: ClassVar[int | str] = RECIPE
    TAG: ClassVar[str] = "ce"

    negatives: int = Field(3, ge=1)
    epochs: int = Field(1, ge=1)
    batch_size: int = Field(16, ge=2)
    learning_rate: float = Field(2e-5, gt=0)
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    max_length: int = Field(128, ge=8)

    def trainer(self) -> Trainer:
        return train_cross_encoder

    def load(self, base: Any, folder: Path, name: str) -> Any:
        """A :class:`~retrieval_pipeline.core.retrieval.models.scorers.CrossEncoderScorer` with the base scorer's batch
        size and device (``max_length``: the base scorer's, else the training's)."""
        return CrossEncoderScorer(
            folder, batch_size=base.batch_size, max_length=base.max_length or self.max_length, device=base.device, name=name
        )


class FinetunedCrossEncoderSource(Finetuned):
    """``model: {finetuned_cross_encoder: {...}}`` in a rerank entry: a cross-encoder trained on the dataset's corpus."""

    finetuned_cross_encoder: CrossEncoderFinetuneSettings


def base_of(model: ModelSource | FinetunedCrossEncoderSource) -> ModelSource:
    """The model a rerank entry loads first: itself, or the base of a fine-tuned cross-encoder."""
    return model.finetuned_cross_encoder.base if isinstance(model, FinetunedCrossEncoderSource) else model


def labelled_examples(pairs: Sequence[MinedPair], documents: Sequence[Document], negatives: int) -> list[tuple[str, str, int]]:
    """``(anchor, doc_id, label)``: every mined pair (1), then each pair's BM25 negatives (0), in corpus order;
    one example per (normalised anchor, document)."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str, int]] = []
    for pair, wrong in zip(pairs, anchor_negatives(pairs, documents, negatives)):
        for doc_id, label in [(pair.doc_id, 1)] + [(d, 0) for d in wrong]:
            key = (normalised(pair.anchor), doc_id)
            if key not in seen:
                seen.add(key)
                out.append((pair.anchor, doc_id, label))
    return out


def train_cross_encoder(
    base_folder: Path,
    pairs: Sequence[MinedPair],
    texts: dict[str, str],
    settings: CrossEncoderFinetuneSettings,
    device: str,
    out_dir: Path,
) -> dict[str, Any]:
    """The :data:`~retrieval_pipeline.core.retrieval.training.finetune.Trainer` of a cross-encoder: label the pairs
    (:func:`labelled_examples` over the ``texts``), train (imports torch), save into ``out_dir``.

    Returns:
        ``n_examples``, ``n_positives`` and :func:`~retrieval_pipeline.core.retrieval.training.ce_train.train_labelled`'s summary.
    """
    set_hf_offline()
    examples = labelled_examples(pairs, [Document(doc_id, text) for doc_id, text in texts.items()], settings.negatives)
    stats = train_labelled(
        base_folder,
        [anchor for anchor, _, _ in examples],
        [texts[doc_id] for _, doc_id, _ in examples],
        [label for _, _, label in examples],
        **settings.model_dump(include={"epochs", "batch_size", "learning_rate", "warmup_ratio", "max_length", "seed"}),
        device=device,
        out_dir=out_dir,
    )
    return {"n_examples": len(examples), "n_positives": sum(label for _, _, label in examples), **stats}
