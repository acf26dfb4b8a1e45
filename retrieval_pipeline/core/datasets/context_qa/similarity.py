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
(about 1.7 ms a pair on the insurance data). :func:`similarity_rows` first checks an exact upper bound of
the ratio. difflib's matching blocks are increasing and non-overlapping in both texts, so their ``M``
characters form a common subsequence, and ``ratio <= 2 * LCS(a, b) / (la + lb)``, with the longest common
subsequence computed bit-parallel (:func:`lcs_length`); much tighter than difflib's ``quick_ratio``
(character multiset overlap), which prunes almost nothing on English text. A :class:`SimilarityIndex`
prepares the corpus once and computes this bound for every chunk at once (the chunks packed into one
bit vector per block, :class:`_PackedBlock`: 12 ms per context against the 1,834 chunks of the embedded
sample), then builds difflib's matcher only for the chunks whose bound passes.

A pair whose bound is below the threshold cannot be relevant, so its exact ratio is not computed and
the chunk is left out of the similarity row. Every stored value is an exact ratio, and the relevant
set is the same as the brute-force one (``exhaustive=True``); ``test_similarity.py`` checks this on
the real insurance data and on random strings. Rows made this way are complete for any threshold
``>= settings.threshold`` only: do not derive qrels at a lower threshold from them. Use
:func:`similarity_of` for exact values on demand (for example the few retrieved chunks in context
coverage), and :meth:`SimilarityIndex.best` for the exact best match over the whole corpus (branch and
bound on the same bound).

The measure and its fast path are one module: the bound is exact only for the ratio of the texts as
prepared here, so the two change together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher

import numpy as np

from retrieval_pipeline.core.common.cache.result_cache import ResultCache, content_key
from retrieval_pipeline.core.common.types import Document, Qrels

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

    Each value is remembered for the process (:data:`MEMO_LIMIT`): evaluation asks for the same
    (context, chunk) pair once per retriever that retrieved it.

    Args:
        a: The expected context.
        b: The chunk text.
        settings: Threshold is not used here; ``autojunk`` and ``normalise`` are.

    Returns:
        The ratio, in ``[0, 1]``.
    """
    key = (a, b, settings.autojunk, settings.normalise)
    found = _MEMO.get(key)
    if found is None:
        found = SequenceMatcher(None, _prepare(a, settings), _prepare(b, settings), autojunk=settings.autojunk).ratio()
        _remember(key, found)
    return found


def similarity_of(expected: str, chunk: Document, settings: SimilaritySettings = SimilaritySettings()) -> float:
    """Exact :func:`similarity` of an expected context to one chunk's text (for values on demand)."""
    return similarity(expected, chunk.text, settings)


#: Most exact similarities remembered by :func:`similarity` in one process; the memo is emptied when full.
MEMO_LIMIT = 50_000
_MEMO: dict[tuple[str, str, bool, bool], float] = {}
#: Version of :func:`similarity`'s value for given texts and settings; part of every persistent key.
SIMILARITY_VERSION = "difflib-ratio/1"
#: The result cache namespace of single similarities.
SIMILARITY_NAMESPACE = "similarity"


def _remember(key: tuple[str, str, bool, bool], value: float) -> None:
    if len(_MEMO) >= MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[key] = value


def similarity_key(a: str, b: str, settings: SimilaritySettings) -> str:
    """The persistent content key of ``similarity(a, b, settings)``: version, the settings that matter, both texts."""
    return content_key(SIMILARITY_VERSION, settings.method, settings.autojunk, settings.normalise, a, b)


def cached_similarities(pairs: Iterable[tuple[str, str]], settings: SimilaritySettings, cache: ResultCache) -> tuple[int, int]:
    """Make :func:`similarity` of many pairs instant: read them from a result cache, compute and store the rest.

    One lookup and one write transaction for all pairs; afterwards every pair is in the process memo, so
    code that calls :func:`similarity` (or :func:`similarity_of`) one pair at a time gets it at once. A stored
    value that is not a number in ``[0, 1]`` is treated as corrupt and recomputed.

    Args:
        pairs: ``(expected context, chunk text)`` pairs; duplicates allowed.
        settings: Similarity settings (the threshold plays no part).
        cache: Where the values are kept between runs.

    Returns:
        ``(hits, misses)`` over distinct pairs.
    """
    keys = {pair: similarity_key(*pair, settings) for pair in dict.fromkeys(pairs)}
    stored = cache.get_many(SIMILARITY_NAMESPACE, list(keys.values()), decode=_stored_ratio)
    computed: dict[str, float] = {}
    for (a, b), key in keys.items():
        if key in stored:
            _remember((a, b, settings.autojunk, settings.normalise), stored[key])
        else:
            computed[key] = similarity(a, b, settings)
    cache.put_many(SIMILARITY_NAMESPACE, computed)
    return len(keys) - len(computed), len(computed)


def _stored_ratio(data: object) -> float:
    """A stored similarity, checked (a bool, a string or a value outside ``[0, 1]`` is corrupt)."""
    if isinstance(data, bool) or not isinstance(data, (int, float)) or not 0.0 <= data <= 1.0:
        raise ValueError(f"a similarity must be a number in [0, 1], got {data!r}")
    return float(data)


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


#: Chunks packed into one bit vector by :class:`_PackedBlock`: bounds the size of each integer and of its masks.
PACKED_BLOCK_CHUNKS = 256


class _PackedBlock:
    """Up to :data:`PACKED_BLOCK_CHUNKS` texts as bit fields of one Python int: LCS against all of them at once.

    Text ``j`` occupies bits ``[offset_j, offset_j + len_j)``, followed by at least one always-zero pad bit,
    fields rounded up to whole bytes. :func:`lcs_length`'s recurrence runs on the whole vector: the mask of a
    character is the OR of every field's mask (shifted to its offset), and the subtraction never borrows
    (``U = V & mask`` is a subset of ``V``), while a carry out of a field's top stops in its pad bit (zero
    before the addition), which the ``& full`` mask clears. So each field evolves exactly as the single-text
    vector of that text, and ``LCS_j = len_j - popcount(field_j)``; :func:`lcs_length` is the reference
    (``test_similarity.py`` checks equality on random texts).
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self.lengths = np.array([len(t) for t in texts], dtype=np.int64)
        widths = (self.lengths + 1 + 7) // 8 * 8  # bits per field: the text, >= 1 pad bit, whole bytes
        self.byte_offsets = np.concatenate([[0], np.cumsum(widths)[:-1]]) // 8
        self.n_bytes = int(widths.sum()) // 8
        codes = np.full(self.n_bytes * 8, -1, dtype=np.int64)  # code point per bit; -1 in pad bits
        for offset, text in zip(self.byte_offsets * 8, texts, strict=True):
            codes[offset : offset + len(text)] = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        self.full = _pack(codes >= 0)
        self.masks = {chr(code): _pack(codes == code) for code in np.unique(codes[codes >= 0]).tolist()}

    def lcs(self, a: str) -> np.ndarray:
        """``LCS(a, text_j)`` for every text of the block, as int64."""
        full, masks = self.full, self.masks
        row = full
        for char in a:
            mask = masks.get(char)
            if mask is not None:  # a character absent from every text leaves the vector unchanged
                matched = row & mask
                row = ((row + matched) | (row - matched)) & full
        counts = np.bitwise_count(np.frombuffer(row.to_bytes(self.n_bytes, "little"), dtype=np.uint8))
        ones = np.add.reduceat(counts.astype(np.int64), self.byte_offsets) if self.n_bytes else np.zeros(0, dtype=np.int64)
        return self.lengths - ones


def _pack(bits: np.ndarray) -> int:
    """A boolean array as an int whose bit ``i`` is ``bits[i]``."""
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


class SimilarityIndex:
    """One corpus prepared once for many expected contexts: similarity rows and the best match, exact.

    Preparing the corpus (normalising the chunks, packing them for the LCS bound) is done once, on first use
    (an index whose results all come from a cache prepares nothing), not once per expected context. The exact
    upper bound ``2 * LCS / T`` of every chunk is computed at once per context (:class:`_PackedBlock`), and
    difflib's matcher, whose index of ``b`` costs about one comparison, is built only for the chunks whose bound
    passes, then kept for the next contexts.

    Args:
        chunks: The corpus chunks.
        settings: Similarity settings; the threshold drives the fast path of :meth:`row`.
    """

    def __init__(self, chunks: Sequence[Document], settings: SimilaritySettings = SimilaritySettings()) -> None:
        self.chunks = list(chunks)
        self.settings = settings
        self._texts: list[str] | None = None
        self._blocks: list[_PackedBlock] = []
        self._matchers: dict[int, SequenceMatcher] = {}

    def _prepared(self) -> list[str]:
        """The chunks' comparable texts, packing the blocks on first use."""
        if self._texts is None:
            self._texts = [_prepare(c.text, self.settings) for c in self.chunks]
            step = PACKED_BLOCK_CHUNKS
            self._blocks = [_PackedBlock(self._texts[i : i + step]) for i in range(0, len(self._texts), step)]
        return self._texts

    def upper_bounds(self, expected: str) -> np.ndarray:
        """``2 * LCS(a, b) / (len(a) + len(b))`` per chunk (1.0 when both are empty), ``a``, ``b`` prepared.

        An exact upper bound of each ratio, computed with the ratio's own float expression (``2.0 * M / T``
        with ``M <= LCS``), so ``bound < threshold`` proves ``ratio < threshold``.
        """
        texts = self._prepared()
        text = _prepare(expected, self.settings)
        if not texts:
            return np.zeros(0)
        lcs = np.concatenate([block.lcs(text) for block in self._blocks])
        totals = len(text) + np.array([len(t) for t in texts], dtype=np.int64)
        return np.divide(2.0 * lcs, totals, out=np.ones(len(texts)), where=totals > 0)

    def ratio(self, expected: str, position: int) -> float:
        """Exact difflib ratio of the expected context against the chunk at ``position`` (its matcher kept)."""
        matcher = self._matchers.get(position)
        if matcher is None:
            matcher = self._matchers[position] = SequenceMatcher(None, "", self._prepared()[position], autojunk=self.settings.autojunk)
        matcher.set_seq1(_prepare(expected, self.settings))
        return matcher.ratio()

    def row(self, expected: str, *, exhaustive: bool = False) -> dict[str, float]:
        """Exact ratios of one expected context against the chunks (see :func:`similarity_rows`).

        Args:
            expected: The expected context.
            exhaustive: Every chunk's ratio instead of only those whose upper bound reaches the threshold.

        Returns:
            ``{doc_id: ratio}`` in corpus order.
        """
        if exhaustive:
            positions = range(len(self.chunks))
        else:
            positions = np.flatnonzero(self.upper_bounds(expected) >= self.settings.threshold).tolist()
        return {self.chunks[i].doc_id: self.ratio(expected, i) for i in positions}

    def best(self, expected: str) -> tuple[str | None, float]:
        """The chunk most similar to the expected context and its exact ratio, ties to the largest doc id.

        Equal to ``max(((d, similarity(expected, text_d)) for each chunk), key=(ratio, doc_id))`` (``(None,
        0.0)`` for no chunks), found by branch and bound: chunks in decreasing order of their exact upper
        bound (:meth:`upper_bounds`), exact ratios computed until the next bound is below the best ratio so
        far (a bound equal to it may still tie, with a larger doc id, so it is computed).

        Args:
            expected: The expected context.

        Returns:
            ``(doc_id, ratio)``.
        """
        bounds = self.upper_bounds(expected)
        best: tuple[float, str] | None = None
        for position in np.argsort(-bounds, kind="stable").tolist():
            if best is not None and bounds[position] < best[0]:
                break
            candidate = (self.ratio(expected, position), self.chunks[position].doc_id)
            best = candidate if best is None or candidate > best else best
        return (None, 0.0) if best is None else (best[1], best[0])


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
    index = SimilarityIndex(chunks, settings)
    return {query_id: index.row(text, exhaustive=exhaustive) for query_id, text in expected.items()}


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
