"""Deterministic, dependency-free encoder fakes for unit tests: no model, no torch.

* :class:`KeywordEncoder`: a normalised bag of keywords (exact score ties where the tie-break tests need them);
* :class:`KeywordScorer`: a fake cross-encoder counting shared query words;
* :class:`CountingEncoder`: wraps any encoder and counts what reaches it, to prove a cache never re-embeds.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval_pipeline.core.retrieval.models.encoders import Encoder, describe_model

_TOKEN = re.compile(r"\w+")


class KeywordScorer:
    """A deterministic fake cross-encoder for unit tests: the number of distinct query words in the passage.

    .. math::  \\mathrm{score}(q, p) = |\\,\\mathrm{words}(q) \\cap \\mathrm{words}(p)\\,|

    with words the lower-cased ``\\w+`` tokens. It counts what it is asked, to check that a reranker
    scores only its ``top_n``.

    Attributes:
        calls: Number of :meth:`score` calls.
        pairs: Every pair scored, in order.
    """

    def __init__(self, model_id: str = "keyword-scorer/v1") -> None:
        self.model_id = model_id
        self.calls = 0
        self.pairs: list[tuple[str, str]] = []

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """See the class formula."""
        self.calls += 1
        self.pairs.extend((q, p) for q, p in pairs)
        words = [(set(_TOKEN.findall(q.lower())), set(_TOKEN.findall(p.lower()))) for q, p in pairs]
        return np.array([len(q & p) for q, p in words], dtype=np.float64)

    def __repr__(self) -> str:
        return f"KeywordScorer(model_id={self.model_id!r})"


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

    def describe(self) -> dict[str, Any]:
        """The wrapped encoder's identity (see :func:`describe_model`)."""
        return describe_model(self.inner)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Count, then delegate to the wrapped encoder."""
        self.calls += 1
        self.texts_encoded += len(texts)
        self.batches.append(list(texts))
        return self.inner.encode(texts)
