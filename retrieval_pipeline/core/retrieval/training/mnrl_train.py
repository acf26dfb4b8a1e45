"""The training loop of :mod:`~retrieval_pipeline.core.retrieval.training.finetune`: ``MultipleNegativesRankingLoss``
over (anchor, positive[, negative]) texts, with nothing but torch, numpy and sentence-transformers.

Kept free of the project's other modules (and of pydantic) so that ``benchmarks/gpu_encoding.py`` and
``benchmarks/finetune_select.py --from-split`` can run it on a machine that has only torch and
sentence-transformers (a GPU box with no project environment).

Loop: AdamW (weight decay 0.01), the learning rate rising linearly over ``warmup_ratio`` of the steps
then falling linearly to 0, gradients clipped at norm 1, seeded shuffling; a batch never holds one
document twice (:func:`plan_batches`), so none of an anchor's in-batch negatives is another copy of its
positive. sentence-transformers' ``SentenceTransformerTrainer`` would need the ``datasets`` and
``accelerate`` packages.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def plan_batches(groups: Sequence[set[str]], batch_size: int, seed: int) -> list[list[int]]:
    """Seeded, shuffled batches of indexes into ``groups`` in which no two members share a document.

    ``groups[i]`` holds the documents of pair ``i`` (its positive, and its negative if any). A pair that
    would repeat a document in the open batch waits for a later one (greedy: the shuffle's order
    otherwise). Every pair is in one batch, except that batches of one pair are dropped (no negative).
    """
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)
    out: list[list[int]] = []
    pending = order
    while pending:
        batch: list[int] = []
        used: set[str] = set()
        rest: list[int] = []
        for i in pending:
            if len(batch) < batch_size and not (groups[i] & used):
                batch.append(i)
                used |= groups[i]
            else:
                rest.append(i)
        out.append(batch)
        pending = rest
    return [b for b in out if len(b) > 1]


def _on(device: str, features: dict[str, Any]) -> dict[str, Any]:
    """The tokenizer's output with its tensors on ``device`` (other entries as they are)."""
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}


def train_pairs(
    base_folder: str | Path,
    anchors: Sequence[str],
    positives: Sequence[str],
    groups: Sequence[set[str]],
    *,
    negatives: Sequence[str] | None = None,
    epochs: int = 1,
    batch_size: int = 32,
    learning_rate: float = 3e-5,
    warmup_ratio: float = 0.1,
    scale: float = 20.0,
    max_seq_length: int = 256,
    seed: int = 13,
    device: str = "cpu",
    out_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Fine-tune the sentence-transformers model in ``base_folder``; save it into ``out_dir`` when given.

    Args:
        anchors, positives: The pairs' texts, aligned.
        groups: Each pair's documents (for :func:`plan_batches`).
        negatives: One hard negative text per pair, or ``None`` (in-batch negatives only).

    Returns:
        ``steps``, ``first_loss`` / ``last_loss`` (means of the first and last 10 steps), ``seconds`` (the
        loop alone), the torch and sentence-transformers versions, and ``model`` (the trained model, not
        JSON; popped by callers that record the rest).
    """
    import time

    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.losses import MultipleNegativesRankingLoss

    if not (len(anchors) == len(positives) == len(groups)) or (negatives is not None and len(negatives) != len(anchors)):
        raise ValueError("anchors, positives, groups (and negatives) must have one entry per pair")
    seed_everything(seed)
    model = SentenceTransformer(str(base_folder), device=device)
    model.max_seq_length = max_seq_length
    loss_fn = MultipleNegativesRankingLoss(model, scale=scale)
    plan = [b for epoch in range(epochs) for b in plan_batches(groups, batch_size, seed + epoch)]
    optimizer, scheduler = optimiser(model, learning_rate, len(plan), warmup_ratio)
    prepare = getattr(model, "preprocess", None) or model.tokenize  # ST 6 renamed tokenize
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    for batch in plan:
        columns = [[anchors[i] for i in batch], [positives[i] for i in batch]]
        if negatives is not None:
            columns.append([negatives[i] for i in batch])
        features = [_on(device, prepare(column)) for column in columns]
        losses.append(step(model, loss_fn(features, None), optimizer, scheduler))
    return finish(model, losses, started, device, out_dir)


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's generators."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def optimiser(model: Any, learning_rate: float, steps: int, warmup_ratio: float) -> tuple[Any, Any]:
    """AdamW (weight decay 0.01) and its schedule: linear warm-up over ``warmup_ratio`` of ``steps``, then
    linear decay to 0."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    warmup = int(steps * warmup_ratio)

    def rate(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (steps - step) / max(1, steps - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, rate)


def step(model: Any, loss: Any, optimizer: Any, scheduler: Any) -> float:
    """One optimisation step on ``loss`` (gradients clipped at norm 1); the loss's value."""
    import torch

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    return float(loss.detach())


def finish(model: Any, losses: Sequence[float], started: float, device: str, out_dir: str | Path | None) -> dict[str, Any]:
    """Put ``model`` in eval mode, save it into ``out_dir`` when given, and summarise the run (see :func:`train_pairs`)."""
    import time

    import sentence_transformers
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    model.eval()
    if out_dir is not None:
        model.save(str(out_dir))
    head, tail = losses[:10], losses[-10:]
    return {
        "steps": len(losses),
        "first_loss": round(sum(head) / max(1, len(head)), 4),
        "last_loss": round(sum(tail) / max(1, len(tail)), 4),
        "loop_seconds": round(seconds, 2),
        "torch_version": torch.__version__,
        "sentence_transformers_version": sentence_transformers.__version__,
    }
