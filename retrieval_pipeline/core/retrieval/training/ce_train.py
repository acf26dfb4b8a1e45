"""The training loop of :mod:`~retrieval_pipeline.core.retrieval.training.cross_finetune`: a sentence-transformers
``CrossEncoder`` trained with ``BinaryCrossEntropyLoss`` on labelled ``(query, passage, 0 | 1)`` examples.

Like :mod:`~retrieval_pipeline.core.retrieval.training.mnrl_train` (whose seeding, optimiser, step and summary it
shares), it needs nothing but torch and sentence-transformers: ``CrossEncoderTrainer`` would need the
``datasets`` and ``accelerate`` packages, which this project does not install.

The model starts from any Hugging Face encoder folder (a bi-encoder's included): a folder without a
sequence-classification head gets a new one-label head, initialised from torch's generator after it is
seeded, so the same seed gives the same starting head. Loop: the examples shuffled with ``seed + epoch``,
cut into batches of ``batch_size``, AdamW with linear warm-up then decay, gradients clipped at norm 1.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.retrieval.training.mnrl_train import finish, optimiser, seed_everything, step


def plan_examples(n_examples: int, batch_size: int, epochs: int, seed: int) -> list[list[int]]:
    """Batches of example indexes: every epoch shuffles all of them with ``seed + epoch`` and cuts the order
    into ``batch_size`` pieces (the last one may be shorter)."""
    plan: list[list[int]] = []
    for epoch in range(epochs):
        order = list(range(n_examples))
        random.Random(seed + epoch).shuffle(order)
        plan.extend(order[i : i + batch_size] for i in range(0, n_examples, batch_size))
    return plan


def train_labelled(
    base_folder: str | Path,
    queries: Sequence[str],
    passages: Sequence[str],
    labels: Sequence[float],
    *,
    epochs: int = 1,
    batch_size: int = 16,
    learning_rate: float = 2e-5,
    warmup_ratio: float = 0.1,
    max_length: int = 256,
    seed: int = 13,
    device: str = "cpu",
    out_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Train a one-label cross-encoder from ``base_folder`` on the examples; save it into ``out_dir`` when given.

    Its parameters and loop mirror :func:`~retrieval_pipeline.core.retrieval.training.mnrl_train.train_pairs` (the
    bi-encoder's) on purpose: the model class, the loss and the batch plan differ; what is the same (seeding, the
    optimiser, a step, the result) is shared from there.

    Args:
        queries, passages, labels: The examples, aligned (label 1: the passage answers the query; 0: not).

    Returns:
        ``steps``, ``first_loss`` / ``last_loss`` (means of the first and last 10 steps), ``loop_seconds``,
        the torch and sentence-transformers versions.
    """
    import time

    import torch
    from sentence_transformers.cross_encoder import CrossEncoder
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    if not len(queries) == len(passages) == len(labels):
        raise ValueError("queries, passages and labels must have one entry per example")
    seed_everything(seed)  # before loading: a new head is drawn from torch's generator
    model = CrossEncoder(str(base_folder), num_labels=1, max_length=max_length, device=device)
    loss_fn = BinaryCrossEntropyLoss(model)
    plan = plan_examples(len(queries), batch_size, epochs, seed)
    optimizer, scheduler = optimiser(model, learning_rate, len(plan), warmup_ratio)
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    for batch in plan:
        stop.check()  # a signal to the runner stops the training between steps
        inputs = [[queries[i] for i in batch], [passages[i] for i in batch]]
        target = torch.tensor([float(labels[i]) for i in batch], device=device)
        losses.append(step(model, loss_fn(inputs, target), optimizer, scheduler))
    return finish(model, losses, started, device, out_dir)
