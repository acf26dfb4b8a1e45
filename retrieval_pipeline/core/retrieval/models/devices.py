"""Where torch models run: the ``device: auto | cpu | cuda`` and ``precision: fp32 | fp16`` settings.

``cpu`` is the default everywhere (CI has no GPU). ``auto`` is ``cuda`` when ``torch.cuda.is_available()``
and ``cpu`` otherwise; deciding it imports torch, so a ``cpu`` setting never does. ``fp16`` halves a
model's weights on a GPU (about twice the throughput); on CPU a model always runs in fp32, so ``fp16``
there means fp32. What a setting resolves to, not the setting, is part of an encoder's ``model_id``
(``;device=cuda;precision=fp16``), since GPU and half-precision vectors differ from CPU ones in their
last digits: the embedding cache and saved indexes never mix them.
"""

from __future__ import annotations

from typing import Literal

Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["fp32", "fp16"]


def resolve_device(device: str) -> str:
    """``cpu`` or ``cuda`` for a ``device`` setting (``auto``: cuda when torch sees a GPU).

    Raises:
        ValueError: ``cuda`` on a machine where torch sees no GPU, or an unknown setting.
    """
    if device == "cpu":
        return "cpu"
    if device not in ("auto", "cuda"):
        raise ValueError(f"unknown device {device!r}; choose auto, cpu or cuda")
    import torch

    available = bool(torch.cuda.is_available())
    if device == "cuda" and not available:
        raise ValueError("device cuda was asked for but torch sees no GPU (torch.cuda.is_available() is False)")
    return "cuda" if available else "cpu"


def resolve_precision(precision: str, device: str) -> str:
    """``fp16`` only on a resolved ``cuda`` device; ``fp32`` otherwise."""
    if precision not in ("fp32", "fp16"):
        raise ValueError(f"unknown precision {precision!r}; choose fp32 or fp16")
    return "fp16" if precision == "fp16" and device == "cuda" else "fp32"
