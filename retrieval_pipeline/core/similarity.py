"""Similarity-based relevance: which chunks hold a QA pair's expected context.

Context-QA data (question, answer, the passage the answer came from) has no usable chunk ids, so
relevance is judged by text similarity between the expected context and each chunk of the corpus:

* ``ratio(a, b) = 2 * M / (len(a) + len(b))``, difflib's :meth:`~difflib.SequenceMatcher.ratio`,
  where ``M`` is the number of characters in the matching blocks of ``a`` (the expected context)
  and ``b`` (the chunk text), both normalised by :func:`normalise_text` when ``normalise`` is set;
* a chunk is relevant (grade 1) when ``ratio >= threshold``.

The settings change the answer on real data, so they are a value (:class:`SimilaritySettings`) that is
recorded with every result (:meth:`SimilaritySettings.as_dict`):

* ``autojunk``: in a chunk of 200+ characters, difflib treats every character that occurs more than
  ``len // 100 + 1`` times as "popular" (spaces, ``e``, ``t``...): a match can no longer start on it,
  only extend over it, so matches made of common characters are lost and the ratio drops. It is off
  by default so the ratio is the plain matching-blocks measure. Measured on the insurance data with
  800-character chunks: autojunk turns 18 of the 80 relevant (context, chunk) pairs irrelevant and
  leaves 4 of the 64 QA pairs with no relevant chunk at all.
* Length bounds the ratio: ``ratio <= 2 * min(la, lb) / (la + lb)``, so a chunk more than three
  times as long as the context can never reach 0.5. Chunk size decides which contexts can be found
  at all; :func:`relevance_ceiling` reports that share.

**Fast path.** Computing ``ratio`` for every (context, chunk) pair is quadratic in the text lengths
(about 1.7 ms a pair on the insurance data). :func:`similarity_rows` first checks two exact upper
bounds of the ratio. difflib's matching blocks are increasing and non-overlapping in both texts, so
their ``M`` characters form a common subsequence:

* ``2 * min(la, lb) / (la + lb)`` (difflib's ``real_quick_ratio``), free;
* ``2 * LCS(a, b) / (la + lb)``, with the longest common subsequence computed bit-parallel
  (:func:`lcs_length`, about 30 µs a pair); much tighter than difflib's ``quick_ratio``
  (character multiset overlap), which prunes almost nothing on English text.

A pair whose bound is below the threshold cannot be relevant, so its exact ratio is not computed and
the chunk is left out of the similarity row. Every stored value is an exact ratio, and the relevant
set is the same as the brute-force one (``exhaustive=True``); ``test_similarity.py`` checks this on
the real insurance data and on random strings. Rows made this way are complete for any threshold
``>= settings.threshold`` only: do not derive qrels at a lower threshold from them. Use
:func:`similarity_of` for exact values on demand (for example the few retrieved chunks in context
coverage).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher

from retrieval_pipeline.core.types import Document, Qrels

#: ``{query_id: {doc_id: ratio}}``: exact ratios; a missing doc id was proven below the threshold.
SimilarityRows = dict[str, dict[str, float]]

SIMILARITY_METHODS = ("difflib",)


@dataclass(frozen=True)
class SimilaritySettings:
    """How relevance is judged by similarity; record :meth:`as_dict` with every result.

    Attributes:
        threshold: A chunk is relevant when ``ratio >= threshold``; in ``[0, 1]``.
        autojunk: difflib's autojunk heuristic (popular characters of 200+ character texts are junk).
        normalise: Compare :func:`normalise_text` forms instead of the raw texts.
        method: The similarity measure; only ``"difflib"`` (``SequenceMatcher.ratio``) exists.
    """

    threshold: float = 0.5
    autojunk: bool = False
    normalise: bool = True
    method: str = "difflib"

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"similarity threshold must be in [0, 1], got {self.threshold}")
        if self.method not in SIMILARITY_METHODS:
            raise ValueError(f"unknown similarity method {self.method!r}; known: {', '.join(SIMILARITY_METHODS)}")

    def as_dict(self) -> dict[str, object]:
        """The settings as a plain dict, for metadata and result files."""
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
_RULE = re.compile(r"^\s*([-*_=~^])(\s*\1){2,}\s*$", re.MULTILINE)  # --- *** ___ and reST underlines
_HEADING = re.compile(r"^\s*#{1,6}\s+", re.MULTILINE)
_BLOCKQUOTE = re.compile(r"^\s*(>\s*)+", re.MULTILINE)
_BULLET = re.compile(r"^\s*[-*+]\s+", re.MULTILINE)
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"\*+|`+")
_CHARACTER_MAP = str.maketrans(
    {"‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"', "–": "-", "—": "-", "‐": "-", "‑": "-"}
)


def normalise_text(text: str) -> str:
    """The comparable form of a text: markdown syntax out, case and whitespace folded.

    Rules, in order:

    1. Code-fence lines (```` ``` ````, ``~~~``) and rule lines (``---``, ``***``, ``___``, reST
       underlines such as ``====``) are removed.
    2. Line-start markers are removed: headings (``#`` to ``######``), blockquotes (``>``) and
       bullets (``-``, ``*``, ``+``). Ordered-list numbers are kept: "3.1." is content.
    3. ``[text](url)`` and ``![alt](url)`` become ``text`` / ``alt``.
    4. Emphasis and code markers are removed: every run of ``*`` and of backticks. Underscores are
       kept, because they are part of identifiers (``__debug__``); ``_emphasis_`` stays as written.
    5. Typographic quotes and dashes become ASCII (``’`` → ``'``, ``“`` → ``"``, ``—`` → ``-``).
    6. Lowercase (:meth:`str.casefold`): capitalisation is not content, and contexts are often
       re-capitalised when cut out of a sentence.
    7. Every run of whitespace becomes one space; leading and trailing whitespace is dropped.

    Words, digits and all other punctuation are kept. The function is idempotent.

    Args:
        text: Markdown or plain text.

    Returns:
        The normalised text.
    """
    text = _FENCE.sub("", text)
    text = _RULE.sub("", text)
    text = _HEADING.sub("", text)
    text = _BLOCKQUOTE.sub("", text)
    text = _BULLET.sub("", text)
    text = _IMAGE_OR_LINK.sub(r"\1", text)
    text = _EMPHASIS.sub("", text)
    text = text.translate(_CHARACTER_MAP).casefold()
    return " ".join(text.split())


def _prepare(text: str, settings: SimilaritySettings) -> str:
    return normalise_text(text) if settings.normalise else text


# --------------------------------------------------------------------------------------------------
# Exact similarity
# --------------------------------------------------------------------------------------------------


def similarity(a: str, b: str, settings: SimilaritySettings = SimilaritySettings()) -> float:
    """difflib ratio of two texts under the settings.

    Formula::

        ratio = 2 * M / (len(a') + len(b'))      (1.0 when both are empty)

    where ``a'``, ``b'`` are the texts after :func:`normalise_text` (when ``settings.normalise``) and
    ``M`` is the number of matched characters found by
    ``SequenceMatcher(None, a', b', autojunk=settings.autojunk)``. The order matters slightly:
    ``a`` is the expected context, ``b`` the chunk (autojunk looks at ``b``).

    Args:
        a: The expected context.
        b: The chunk text.
        settings: Threshold is not used here; ``autojunk`` and ``normalise`` are.

    Returns:
        The ratio, in ``[0, 1]``.
    """
    return SequenceMatcher(None, _prepare(a, settings), _prepare(b, settings), autojunk=settings.autojunk).ratio()


def similarity_of(expected: str, chunk: Document, settings: SimilaritySettings = SimilaritySettings()) -> float:
    """Exact :func:`similarity` of an expected context to one chunk's text (for values on demand)."""
    return similarity(expected, chunk.text, settings)


# --------------------------------------------------------------------------------------------------
# Similarity rows (fast path with exact upper bounds)
# --------------------------------------------------------------------------------------------------


def _char_masks(text: str) -> dict[str, int]:
    """Bit mask per character: bit ``i`` is set where ``text[i]`` is that character."""
    masks: dict[str, int] = {}
    for position, char in enumerate(text):
        masks[char] = masks.get(char, 0) | (1 << position)
    return masks


def _lcs_from_masks(a: str, b_masks: Mapping[str, int], b_len: int) -> int:
    """LCS length of ``a`` and the text ``b_masks`` was built from (bit-parallel, see :func:`lcs_length`)."""
    full = (1 << b_len) - 1
    row = full
    for char in a:
        matched = row & b_masks.get(char, 0)
        row = ((row + matched) | (row - matched)) & full
    return b_len - row.bit_count()


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence of two texts, bit-parallel.

    Hyyrö's form of the Allison-Dix / Crochemore et al. bit-vector algorithm, with a Python int as the
    bit vector over ``b``: start with ``V = 2^len(b) - 1``; for each character ``c`` of ``a``,
    ``U = V & mask_b(c)`` and ``V = ((V + U) | (V - U)) & (2^len(b) - 1)``; then
    ``LCS = len(b) - popcount(V)``. Cost: ``O(len(a))`` big-integer operations on ``len(b)`` bits.

    Used as an exact upper bound of difflib's matches: the matching blocks are increasing and
    non-overlapping in both texts, so together they are a common subsequence and ``M <= LCS``.
    """
    return _lcs_from_masks(a, _char_masks(b), len(b))


@dataclass
class _Prepared:
    """A chunk ready for many comparisons: its matcher (``b`` side cached) and its character masks."""

    doc_id: str
    matcher: SequenceMatcher
    length: int
    masks: dict[str, int]


def _prepare_chunks(chunks: Sequence[Document], settings: SimilaritySettings) -> list[_Prepared]:
    prepared = []
    for chunk in chunks:
        text = _prepare(chunk.text, settings)
        matcher = SequenceMatcher(None, "", text, autojunk=settings.autojunk)
        prepared.append(_Prepared(chunk.doc_id, matcher, len(text), _char_masks(text)))
    return prepared


def _bound_below(a: str, chunk: _Prepared, threshold: float) -> bool:
    """Whether an exact upper bound of the ratio is below the threshold (so the pair is not relevant).

    First ``real_quick_ratio = 2 * min(la, lb) / T``, then ``2 * LCS(a, b) / T``; both are at least
    ``2 * M / T`` computed with the same float expression, so a bound below the threshold proves
    ``ratio < threshold``.
    """
    total = len(a) + chunk.length
    if total == 0:
        return 1.0 < threshold
    if 2.0 * min(len(a), chunk.length) / total < threshold:
        return True
    return 2.0 * _lcs_from_masks(a, chunk.masks, chunk.length) / total < threshold


def _row(expected: str, prepared: Sequence[_Prepared], settings: SimilaritySettings, exhaustive: bool) -> dict[str, float]:
    """Exact ratios of one expected context against the prepared chunks (all, or those whose bound passes)."""
    text = _prepare(expected, settings)
    row: dict[str, float] = {}
    for chunk in prepared:
        if not exhaustive and _bound_below(text, chunk, settings.threshold):
            continue
        chunk.matcher.set_seq1(text)
        row[chunk.doc_id] = chunk.matcher.ratio()
    return row


def similarity_rows(
    expected: Mapping[str, str],
    chunks: Sequence[Document],
    settings: SimilaritySettings = SimilaritySettings(),
    *,
    exhaustive: bool = False,
) -> SimilarityRows:
    """Similarity rows for many expected contexts against one corpus (chunks prepared once).

    Args:
        expected: ``{query_id: expected_context}``.
        chunks: The corpus chunks.
        settings: Similarity settings; the threshold drives the fast path.
        exhaustive: Compute the exact ratio of every pair (brute force) instead of skipping pairs
            whose upper bound is below the threshold.

    Returns:
        ``{query_id: {doc_id: ratio}}`` with exact ratios. Fast path: only chunks whose upper bound
        reaches the threshold are present (every relevant chunk is); exhaustive: every chunk.
    """
    prepared = _prepare_chunks(chunks, settings)
    return {query_id: _row(text, prepared, settings, exhaustive) for query_id, text in expected.items()}


def relevance(
    expected_context: str,
    chunks: Sequence[Document],
    settings: SimilaritySettings = SimilaritySettings(),
    *,
    exhaustive: bool = False,
) -> dict[str, float]:
    """The similarity row of one expected context against all chunks.

    Fast path (default): exact ratios for the chunks whose upper bound (see the module docstring)
    reaches ``settings.threshold``; the others are provably below it and are left out. With
    ``exhaustive=True`` every chunk gets its exact ratio. The relevant set ``{d : row[d] >= threshold}``
    is the same either way.

    Args:
        expected_context: The QA pair's expected context.
        chunks: The corpus chunks.
        settings: Similarity settings.
        exhaustive: Brute force: compute every ratio.

    Returns:
        ``{doc_id: ratio}``.
    """
    return similarity_rows({"": expected_context}, chunks, settings, exhaustive=exhaustive)[""]


# --------------------------------------------------------------------------------------------------
# From similarity to qrels and the ceiling
# --------------------------------------------------------------------------------------------------


def qrels_from_similarity(sim_rows: Mapping[str, Mapping[str, float]], threshold: float) -> Qrels:
    """Grade-1 qrels from similarity rows: a chunk is relevant when ``ratio >= threshold``.

    Every query is kept, also those with no relevant chunk (an empty judgement): they stay in the
    evaluation and score 0, so a mean hit rate can never exceed :func:`relevance_ceiling`.

    Args:
        sim_rows: ``{query_id: {doc_id: ratio}}`` (fast-path or exhaustive rows).
        threshold: The relevance threshold; with fast-path rows, at least the threshold they were
            computed with (lower ratios were never computed).

    Returns:
        ``{query_id: {doc_id: 1}}``.
    """
    return {query_id: {doc_id: 1 for doc_id, ratio in row.items() if ratio >= threshold} for query_id, row in sim_rows.items()}


def relevance_ceiling(sim_rows: Mapping[str, Mapping[str, float]], threshold: float) -> float:
    """Share of QA pairs for which any chunk of the corpus reaches the threshold.

    Formula::

        ceiling = |{q : max_d ratio(q, d) >= threshold}| / |queries|

    It is the highest hit rate any retriever can reach on these qrels.

    Args:
        sim_rows: ``{query_id: {doc_id: ratio}}``.
        threshold: The relevance threshold; with fast-path rows, at least the threshold they were
            computed with.

    Returns:
        The ceiling, in ``[0, 1]``.

    Raises:
        ValueError: If ``sim_rows`` is empty.
    """
    if not sim_rows:
        raise ValueError("sim_rows is empty: there are no QA pairs to compute a relevance ceiling for")
    reachable = sum(any(ratio >= threshold for ratio in row.values()) for row in sim_rows.values())
    return reachable / len(sim_rows)
