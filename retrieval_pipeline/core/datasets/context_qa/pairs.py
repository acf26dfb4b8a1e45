"""QA pairs with an expected context: relevant chunks are those similar enough to it.

Matching one expected context against a corpus is the slow part of ``qa_pairs`` for context-QA data (exact
difflib ratios, see :mod:`retrieval_pipeline.core.datasets.context_qa.similarity`), and its result (:class:`ContextMatch`) is a
pure function of the expected context, the chunks (ids and texts, in order), the similarity settings and the
algorithm. With a :class:`~retrieval_pipeline.core.common.cache.result_cache.ResultCache` it is stored under the content
key of exactly those inputs plus :data:`MATCH_VERSION`, so an unchanged re-run reads it back and any change
(a context, a chunk's text or id, a setting, the algorithm) misses and recomputes. The case's own fields
(id, file, row) are not part of the key: they are applied to the match afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_pipeline.core.common.cache.result_cache import ResultCache, content_key
from retrieval_pipeline.core.common.types import Case, Document, QAPair
from retrieval_pipeline.core.datasets.base import gold_pair
from retrieval_pipeline.core.datasets.context_qa.similarity import SimilarityIndex, SimilaritySettings, normalise_text

#: Version of what :meth:`ContextMatcher.match` computes; bump it whenever the same inputs would give another
#: :class:`ContextMatch` (similarity measure, normalisation, tie-breaking, the stored fields), so old entries miss.
MATCH_VERSION = "context-match/1"
#: The result cache namespace of context matches.
CACHE_NAMESPACE = "context_pairs"
#: An answer shorter than this (normalised) is not looked for in the chunks: "Yes." or "30 days" is in many.
MIN_ANSWER_CHARS = 40


@dataclass(frozen=True)
class ContextMatch:
    """Which chunks match one expected context, with exact ratios.

    Attributes:
        matches: ``(doc_id, ratio)`` for every chunk with ``ratio >= threshold``, highest ratio first, then by doc id.
        best: When nothing matches: the most similar chunk and its ratio over every chunk (ties to the largest
            doc id; ``(None, 0.0)`` for an empty corpus). None when something matches.
    """

    matches: tuple[tuple[str, float], ...]
    best: tuple[str | None, float] | None = None

    def to_json(self) -> dict[str, Any]:
        """The match as JSON data (ratios as exact floats)."""
        return {"matches": [list(m) for m in self.matches], "best": None if self.best is None else list(self.best)}

    @classmethod
    def from_json(cls, data: Any) -> ContextMatch:
        """The match back from :meth:`to_json` data, checking its shape.

        Raises:
            TypeError, ValueError, KeyError: The data is not a stored match (the cache then recomputes it).
        """
        matches = tuple((_doc_id(d, allow_none=False), _ratio(r)) for d, r in data["matches"])
        best = data["best"]
        if best is not None:
            doc_id, ratio = best
            best = (_doc_id(doc_id, allow_none=True), _ratio(ratio))
        if (best is None) == (not matches):
            raise ValueError("a match has either matched chunks or a best chunk, not both or neither")
        return cls(matches, best)


def _doc_id(value: Any, *, allow_none: bool) -> str | None:
    if isinstance(value, str) or (value is None and allow_none):
        return value
    raise TypeError(f"doc id must be a string, got {type(value).__name__}")


def _ratio(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"ratio must be a number in [0, 1], got {value!r}")
    return float(value)


class ContextMatcher:
    """Turns a context-QA case into a pair: every chunk whose similarity reaches the threshold is gold.

    The similarity settings are recorded in each pair's evidence with the matched chunks and ratios.
    A case whose expected context matches no chunk stays in the table, unresolved, with a warning that
    names the file, the row and the best ratio seen (computed exactly, over every chunk).

    Args:
        chunks: The corpus chunks.
        settings: Similarity settings.
        cache: Where matches are stored and read back (see the module docstring); None: always compute.
    """

    def __init__(self, chunks: Sequence[Document], settings: SimilaritySettings, cache: ResultCache | None = None) -> None:
        self.chunks = list(chunks)
        self.settings = settings
        self.cache = cache
        self.index = SimilarityIndex(self.chunks, settings)  # prepared on the first miss only
        self.hits = self.misses = 0
        self._corpus_key: str | None = None
        self._normalised: list[str] | None = None

    @property
    def corpus_key(self) -> str:
        """Content key of everything a match depends on besides the context: version, settings, chunks."""
        if self._corpus_key is None:
            chunks = [[c.doc_id, c.text] for c in self.chunks]
            self._corpus_key = content_key(MATCH_VERSION, self.settings.as_dict(), chunks)
        return self._corpus_key

    def compute(self, expected: str) -> ContextMatch:
        """The match of one expected context, computed now (no cache).

        Args:
            expected: The expected context.

        Returns:
            The matched chunks; when there are none, the best chunk over the whole corpus.
        """
        row = self.index.row(expected)
        matches = tuple(sorted(((d, r) for d, r in row.items() if r >= self.settings.threshold), key=lambda x: (-x[1], x[0])))
        return ContextMatch(matches, None if matches else self.index.best(expected))

    def match(self, expected: str) -> ContextMatch:
        """The match of one expected context: from the cache when stored, else computed (and stored)."""
        if self.cache is None:
            self.misses += 1
            return self.compute(expected)
        key = content_key(self.corpus_key, expected)
        found, hit = self.cache.get_or_compute(
            CACHE_NAMESPACE, key, lambda: self.compute(expected), encode=ContextMatch.to_json, decode=ContextMatch.from_json
        )
        self.hits += hit
        self.misses += not hit
        return found

    def answer_outside_gold(self, case: Case, gold: set[str]) -> list[str]:
        """Chunks that hold the case's answer verbatim (both normalised; answers of at least
        :data:`MIN_ANSWER_CHARS`) but are not in ``gold``, in corpus order: a label the similarity rule misses,
        because a chunk holding the answer sentence can hold too little of a long context to reach the threshold.
        Reported, not made gold: the relevance rule stays the one the settings name."""
        answer = case.extra.get("answer")
        needle = normalise_text(answer) if isinstance(answer, str) else ""
        if len(needle) < MIN_ANSWER_CHARS:
            return []
        if self._normalised is None:
            self._normalised = [normalise_text(c.text) for c in self.chunks]
        return [c.doc_id for c, text in zip(self.chunks, self._normalised) if needle in text and c.doc_id not in gold]

    def pair(self, case: Case) -> QAPair:
        """The case's pair: gold = the matched chunks; unresolved, with a warning, when none matches; a warning (and
        ``answer_outside_gold`` in the evidence) when a chunk outside the gold holds the answer verbatim."""
        expected = str(case.extra.get("expected_context", ""))
        found = self.match(expected)
        evidence: dict[str, Any] = {
            "similarity": self.settings.as_dict(),
            "matches": [{"chunk": d, "ratio": round(r, 4)} for d, r in found.matches],
        }
        warnings: list[str] = []
        outside = self.answer_outside_gold(case, {d for d, _ in found.matches})
        if outside:
            evidence["answer_outside_gold"] = outside
            warnings.append(
                f"{case.source_file} row {case.index + 1} ({case.case_id}): the answer is verbatim in {', '.join(outside)}, "
                f"which {'is' if len(outside) == 1 else 'are'} not gold (too little of the expected context for "
                f"similarity >= {self.settings.threshold:g}); retrieving {'it' if len(outside) == 1 else 'them'} counts as "
                "retrieving nothing relevant"
            )
        if found.best is not None:
            best_id, best = found.best
            evidence["best"] = {"chunk": best_id, "ratio": round(best, 4)}
            warnings.append(
                f"{case.source_file} row {case.index + 1} ({case.case_id}): the expected context matches no chunk "
                f"at threshold {self.settings.threshold:g} (best ratio {best:.3f} in {best_id})"
            )
        return gold_pair(
            case,
            [d for d, _ in found.matches],
            f"similarity>={self.settings.threshold:g}",
            evidence,
            warnings,
        )
