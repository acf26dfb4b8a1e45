"""A BM25 retriever that reproduces ``rank_bm25.BM25Okapi`` scores, built on a sparse weight matrix."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_index import FORMAT_VERSION, okapi_index, resolve_tokenizer, tokenized_corpus
from retrieval_pipeline.core.retrieval.engines.tokenize import Tokenizer, tokenize

PARAMS_FILE = "params.json"
WEIGHTS_FILE = "weights.npz"
VOCABULARY_FILE = "vocabulary.json"
DOC_IDS_FILE = "doc_ids.json"
#: Queries whose postings decide together between the sparse product and dense rows (see :meth:`BM25Retriever.search_tokens`).
DECISION_GROUP = 256
#: A group of queries is scored densely when their postings hold at least this many entries per document (summed
#: over the group's queries), else by one sparse product; a group of one query is always scored densely.
DENSE_MIN_POSTINGS_PER_CELL = 0.05
#: Cells (queries x documents) summed by one ``bincount`` on the dense path: 2**17 float64 (1 MiB, about an L2
#: cache); at least one query. Larger chunks scatter over more memory and were slower per query.
DENSE_CHUNK_CELLS = 2**17
#: Documents per block of the dense top-k's threshold (the k-th largest block maximum bounds the k-th best from below).
TOP_K_BLOCK = 256
#: Index entries (postings) from which a search runs the compiled kernel (:mod:`.bm25_kernels`): loading Numba costs
#: about a second once per process, which a large index repays within a few queries.
COMPILED_FROM_POSTINGS = 1_000_000
#: The compiled kernel ranks only the touched documents of a query whose postings number less than this share of the
#: documents, and every document (one pass over the dense score row) otherwise.
SPARSE_MAX_SHARE = 0.125


class BM25Retriever:
    r"""Okapi BM25 with exactly the scores of ``rank_bm25.BM25Okapi`` (rank-bm25 0.2.2).

    For a corpus of :math:`N` documents, a query :math:`q = (q_1, \dots, q_m)` (its tokens, repeats
    kept) and a document :math:`d`::

        score(q, d) = sum_{i=1..m} idf(q_i) * tf(q_i, d) * (k1 + 1)
                                   / (tf(q_i, d) + k1 * (1 - b + b * |d| / avgdl))

        idf(t) = log(N - n(t) + 0.5) - log(n(t) + 0.5)     if that is >= 0
               = epsilon * mean_{t' in V} [log(N - n(t') + 0.5) - log(n(t') + 0.5)]   otherwise

    where ``tf(t, d)`` counts ``t`` in ``d``, ``|d|`` is the document's token count, ``avgdl`` the
    mean token count, ``n(t)`` the number of documents containing ``t`` and ``V`` the vocabulary.
    The floor replaces the negative idf of a term found in more than half of the documents by
    ``epsilon`` times the average *raw* idf over the vocabulary (which can itself be zero or negative
    on tiny corpora; rank_bm25 does the same). A query token that repeats counts once per occurrence;
    an unknown token contributes 0.

    **How it is computed.** Every per-(term, document) summand is precomputed into a sparse
    ``terms x documents`` CSR matrix (:mod:`.okapi_index`). An index of at least :data:`COMPILED_FROM_POSTINGS` entries is searched by
    the compiled kernel :func:`~retrieval_pipeline.core.retrieval.engines.bm25.bm25_kernels.search` (Numba), one query
    after another in one call: each query's postings added into a float64 score row in query order, its top ``k``
    kept by a heap; a batch is its queries' loop without the per-call overhead. Smaller indexes (and an environment
    without Numba) use numpy: a batch of queries is scored in groups of :data:`DECISION_GROUP`, each
    the cheaper of two ways, chosen by how many postings its queries touch: rare-term groups as one sparse
    product with a ``queries x terms`` matrix holding one entry of value 1 per query token, in query order
    (repeats are separate entries); groups whose postings cover at least :data:`DENSE_MIN_POSTINGS_PER_CELL`
    of their ``queries x documents`` cells (common terms, code: the product's result would be nearly dense)
    as dense rows, :data:`DENSE_CHUNK_CELLS` cells at a time, each summed by one ``np.bincount`` over the
    postings laid out in query order. A single query is always a dense row, so a batch costs at most what
    its queries cost one at a time. Either way each score is accumulated term by term in query order from
    0.0, as ``BM25Okapi.get_scores`` does, so the scores match rank_bm25 to the last bit.

    **Ranking.** ``search`` returns, per query, at most ``k`` hits by score descending, ties broken by
    corpus position ascending. **Only documents with a score > 0 are returned**: a document that
    shares no term with the query (score 0) carries no evidence, and a run padded with zero-scored
    documents would be arbitrary corpus order that rank-based metrics would still count (ranx's
    maintainers also advise against zero scores in a run). So a query with fewer than ``k``
    matching documents returns fewer than ``k`` hits, and an empty or all-unknown query returns
    none. (Negative scores, only possible when the floored idf is negative on degenerate tiny
    corpora, are dropped for the same reason.) :meth:`scores` gives the full score vector.

    Build with :meth:`build` (texts) or :meth:`from_tokens` (pre-tokenized); persist with
    :meth:`save` / :meth:`load`.
    """

    name: str = "bm25"

    def __init__(
        self,
        *,
        doc_ids: Sequence[str],
        vocabulary: Sequence[str],
        weights: sp.csr_array,
        params: dict[str, Any],
        tokenizer: Tokenizer,
    ) -> None:
        """Wrap built parts; use :meth:`build`, :meth:`from_tokens` or :meth:`load` instead.

        Args:
            doc_ids: Document ids, in corpus order.
            vocabulary: Terms, in term-id order (the rows of ``weights``).
            weights: ``len(vocabulary) x len(doc_ids)`` CSR matrix of BM25 summands.
            params: Index parameters (``k1``, ``b``, ``epsilon``, ``avgdl``, ...), as saved.
            tokenizer: Turns query text into tokens.
        """
        self.doc_ids: list[str] = list(doc_ids)
        self.vocabulary: dict[str, int] = {term: i for i, term in enumerate(vocabulary)}
        self.weights = weights
        self.params = dict(params)
        self.tokenizer = tokenizer

    # ------------------------------------------------------------------ building

    @classmethod
    def build(
        cls,
        doc_ids: Sequence[str],
        texts: Sequence[str],
        *,
        tokenizer: Tokenizer = tokenize,
        **params: float,
    ) -> BM25Retriever:
        """Tokenize and index a corpus (tokenizing reports to a :class:`~retrieval_pipeline.core.common.progress.Progress`).

        Args:
            doc_ids: Unique document ids, in corpus order (the tie-break order).
            texts: Document texts, aligned with ``doc_ids``.
            tokenizer: Tokenizer for documents and, later, queries.
            **params: ``k1``, ``b`` and ``epsilon``, as :meth:`from_tokens` takes them (passed on, not repeated).

        Returns:
            The built retriever.

        Raises:
            ValueError: Empty corpus, misaligned inputs, duplicate ids, no tokens, bad parameters.
        """
        if len(doc_ids) != len(texts):
            raise ValueError(f"doc_ids and texts differ in length: {len(doc_ids)} != {len(texts)}")
        corpus_tokens = tokenized_corpus(texts, tokenizer)
        return cls.from_tokens(doc_ids, corpus_tokens, tokenizer=tokenizer, **params)

    @classmethod
    def from_tokens(
        cls,
        doc_ids: Sequence[str],
        corpus_tokens: Sequence[Sequence[str]],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        tokenizer: Tokenizer = tokenize,
    ) -> BM25Retriever:
        """Index an already tokenized corpus (the same input ``BM25Okapi(corpus_tokens)`` takes).

        Args:
            doc_ids: Unique document ids, in corpus order.
            corpus_tokens: Tokens per document, aligned with ``doc_ids``.
            k1: Term-frequency saturation.
            b: Length normalisation, in [0, 1].
            epsilon: Factor of the average idf used as the floor for negative idf.
            tokenizer: Tokenizer used later for query text (recorded by name in ``params.json``).

        Returns:
            The built retriever.

        Raises:
            ValueError: Empty corpus, misaligned inputs, duplicate ids, no tokens, bad parameters.
            TypeError: A document is a string rather than a token list.
        """
        vocabulary, weights, params = okapi_index(
            doc_ids, corpus_tokens, k1=k1, b=b, epsilon=epsilon, tokenizer=tokenizer, retriever=BM25Retriever.name
        )
        return cls(doc_ids=doc_ids, vocabulary=vocabulary, weights=weights, params=params, tokenizer=tokenizer)

    # ------------------------------------------------------------------ querying

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Rank the corpus for a batch of queries.

        Args:
            queries: Query texts, tokenized with this index's tokenizer.
            k: Maximum hits per query (>= 0).

        Returns:
            Per query, at most ``k`` ``(doc_id, score)`` with score > 0, by score descending then
            corpus position ascending.

        Raises:
            TypeError: ``queries`` is a single string instead of a sequence of them.
            ValueError: ``k`` is negative.
        """
        if isinstance(queries, str):
            raise TypeError("queries must be a sequence of strings, not one string")
        return self.search_tokens([self.tokenizer(query) for query in queries], k)

    def search_tokens(self, queries_tokens: Sequence[Sequence[str]], k: int) -> list[list[Hit]]:
        """Like :meth:`search`, for queries already tokenized.

        Args:
            queries_tokens: Tokens per query (repeats count, unknown tokens are ignored).
            k: Maximum hits per query (>= 0).

        Returns:
            As :meth:`search`.

        Raises:
            ValueError: ``k`` is negative.
        """
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        term_ids = [self._term_ids(tokens) for tokens in queries_tokens]
        if self.weights.nnz >= COMPILED_FROM_POSTINGS and k > 0:
            kernel = _compiled_search()
            if kernel is not None:
                return self._compiled_hits(kernel, term_ids, k)
        n_docs = len(self.doc_ids)
        rows = max(1, DENSE_CHUNK_CELLS // n_docs)
        postings = np.diff(self.weights.indptr)
        hits: list[list[Hit]] = []
        for start in range(0, len(term_ids), DECISION_GROUP):
            group = term_ids[start : start + DECISION_GROUP]
            entries = int(postings[np.fromiter(chain.from_iterable(group), dtype=np.int64)].sum())
            if len(group) == 1 or entries >= DENSE_MIN_POSTINGS_PER_CELL * len(group) * n_docs:
                for chunk in range(0, len(group), rows):
                    hits.extend(self._dense_chunk_hits(group[chunk : chunk + rows], k))
            else:
                scores = self._query_matrix(group) @ self.weights
                hits.extend(self._row_hits(scores, row, k) for row in range(len(group)))
        return hits

    def scores(self, query: str) -> np.ndarray:
        """Score every document, like ``BM25Okapi.get_scores(tokenizer(query))``.

        Args:
            query: Query text.

        Returns:
            ``float64`` array of length ``n_docs``, in corpus order (zeros included).
        """
        return self.scores_tokens(self.tokenizer(query))

    def scores_tokens(self, query_tokens: Sequence[str]) -> np.ndarray:
        """Score every document for an already tokenized query.

        Args:
            query_tokens: Query tokens (repeats count, unknown tokens are ignored).

        Returns:
            ``float64`` array of length ``n_docs``, in corpus order.
        """
        scores = np.zeros(len(self.doc_ids), dtype=np.float64)
        indptr, indices, data = self.weights.indptr, self.weights.indices, self.weights.data
        for term in self._term_ids(query_tokens):
            start, end = indptr[term], indptr[term + 1]
            scores[indices[start:end]] += data[start:end]
        return scores

    def _term_ids(self, query_tokens: Iterable[str]) -> list[int]:
        """Known query tokens as term ids, in query order, repeats kept."""
        vocabulary = self.vocabulary
        return [vocabulary[token] for token in query_tokens if token in vocabulary]

    def _query_matrix(self, term_ids: Sequence[Sequence[int]]) -> sp.csr_array:
        """``queries x terms`` matrix with one 1.0 per known query term id, in query order.

        Repeated tokens stay separate entries (the matrix is deliberately not canonicalised), so
        the sparse product accumulates every summand in query order, exactly like rank_bm25.
        """
        indptr = np.zeros(len(term_ids) + 1, dtype=np.int64)
        np.cumsum([len(ids) for ids in term_ids], out=indptr[1:])
        indices = np.fromiter(chain.from_iterable(term_ids), dtype=self.weights.indices.dtype, count=int(indptr[-1]))
        data = np.ones(len(indices), dtype=np.float64)
        shape = (len(term_ids), self.weights.shape[0])
        return sp.csr_array((data, indices, indptr.astype(indices.dtype)), shape=shape, copy=False)

    def _row_hits(self, scores: sp.csr_array, row: int, k: int) -> list[Hit]:
        """Top-``k`` positive hits of one row of the ``queries x documents`` score matrix."""
        start, end = scores.indptr[row], scores.indptr[row + 1]
        return self._hits(*top_k(scores.indices[start:end], scores.data[start:end], k))

    def _dense_chunk_hits(self, term_ids: Sequence[Sequence[int]], k: int) -> list[list[Hit]]:
        """Top-``k`` positive hits of a chunk of queries, from their dense ``queries x documents`` scores.

        Every query term's posting is laid out in (query, query position) order and summed into its query's row
        by one ``np.bincount``, which adds its weights one after another in that order: a cell receives its
        summands in query order from 0.0, as rank_bm25 adds them (bit-identical). The top k come from the cells
        at or above the k-th largest maximum of :data:`TOP_K_BLOCK`-document blocks (see :func:`_dense_top_k`).
        """
        indptr, indices, data = self.weights.indptr, self.weights.indices, self.weights.data
        width = -(-len(self.doc_ids) // TOP_K_BLOCK) * TOP_K_BLOCK  # padded with zeros, which are never hits
        spans = [(row, indptr[term], indptr[term + 1]) for row, ids in enumerate(term_ids) for term in ids]
        if not spans:
            return [[] for _ in term_ids]
        offsets = np.repeat([row * width for row, _, _ in spans], [end - start for _, start, end in spans])
        cells = offsets + np.concatenate([indices[start:end] for _, start, end in spans])
        weights = np.concatenate([data[start:end] for _, start, end in spans])
        dense = np.bincount(cells, weights=weights, minlength=len(term_ids) * width).reshape(len(term_ids), width)
        return [self._hits(positions, scores) for positions, scores in _dense_top_k(dense, k)]

    def _compiled_hits(self, kernel: Any, term_ids: Sequence[Sequence[int]], k: int) -> list[list[Hit]]:
        """Top-``k`` positive hits of every query, from the compiled kernel (bit-identical to the numpy paths)."""
        query_indptr = np.zeros(len(term_ids) + 1, dtype=np.int64)
        np.cumsum([len(ids) for ids in term_ids], out=query_indptr[1:])
        query_terms = np.fromiter(chain.from_iterable(term_ids), dtype=np.int64, count=int(query_indptr[-1]))
        weights, n_docs = self.weights, len(self.doc_ids)
        positions, scores, counts = kernel(
            weights.indptr, weights.indices, weights.data, n_docs, query_indptr, query_terms, k, int(n_docs * SPARSE_MAX_SHARE)
        )
        doc_ids = self.doc_ids
        return [
            [(doc_ids[p], s) for p, s in zip(row_positions[:count], row_scores[:count])]
            for row_positions, row_scores, count in zip(positions.tolist(), scores.tolist(), counts.tolist())
        ]

    def _hits(self, positions: np.ndarray, scores: np.ndarray) -> list[Hit]:
        """``(doc_id, score)`` pairs for corpus positions."""
        doc_ids = self.doc_ids
        return [(doc_ids[p], s) for p, s in zip(positions.tolist(), scores.tolist())]

    # ------------------------------------------------------------------ persistence

    def save(self, directory: Path) -> None:
        """Write the index to ``directory`` (created if missing).

        Files: ``weights.npz`` (the CSR weight matrix, ``scipy.sparse.save_npz``),
        ``vocabulary.json`` (terms in row order), ``doc_ids.json`` (corpus order) and
        ``params.json`` (k1, b, epsilon, tokenizer, n_docs, avgdl, library versions, ...).

        Args:
            directory: Target directory.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        sp.save_npz(directory / WEIGHTS_FILE, self.weights, compressed=False)
        terms = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        _write_json(directory / VOCABULARY_FILE, terms)
        _write_json(directory / DOC_IDS_FILE, self.doc_ids)
        _write_json(directory / PARAMS_FILE, self.params, indent=2)

    @classmethod
    def load(cls, directory: Path, *, tokenizer: Tokenizer | None = None) -> BM25Retriever:
        """Read an index written by :meth:`save`; it returns identical results.

        Args:
            directory: Directory written by :meth:`save`.
            tokenizer: Query tokenizer; by default the one recorded in ``params.json`` is imported
                (pass it explicitly when it is not importable, e.g. a lambda).

        Returns:
            The loaded retriever.

        Raises:
            ValueError: Unknown format, inconsistent files, or a tokenizer that cannot be imported.
        """
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text(encoding="utf-8"))
        if params.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{directory}: unsupported BM25 index format {params.get('format_version')!r}")
        weights = sp.csr_array(sp.load_npz(directory / WEIGHTS_FILE))
        vocabulary = json.loads((directory / VOCABULARY_FILE).read_text(encoding="utf-8"))
        doc_ids = json.loads((directory / DOC_IDS_FILE).read_text(encoding="utf-8"))
        if weights.shape != (len(vocabulary), len(doc_ids)):
            raise ValueError(f"{directory}: weights {weights.shape} do not match vocabulary/doc ids")
        tokenizer = tokenizer or resolve_tokenizer(params["tokenizer"])
        return cls(doc_ids=doc_ids, vocabulary=vocabulary, weights=weights, params=params, tokenizer=tokenizer)


# ---------------------------------------------------------------------- ranking


def _compiled_search() -> Any:
    """The compiled kernel's search, or None when Numba is not installed (the numpy paths give the same hits)."""
    try:
        from retrieval_pipeline.core.retrieval.engines.bm25.bm25_kernels import search
    except ImportError:
        return None
    return search


def top_k(positions: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best positive scores, by score descending then position ascending.

    Args:
        positions: Corpus positions of the candidates (unique, any order).
        scores: Their scores, aligned with ``positions``.
        k: Maximum number to keep.

    Returns:
        ``(positions, scores)`` of the kept candidates, best first.
    """
    positive = scores > 0
    if not positive.all():
        positions, scores = positions[positive], scores[positive]
    if k <= 0 or len(scores) == 0:
        return positions[:0], scores[:0]
    if len(scores) > k:
        kth_best = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth_best  # everything tied with the k-th best competes in the tie-break
        positions, scores = positions[keep], scores[keep]
    order = np.lexsort((positions, -scores))[:k]
    return positions[order], scores[order]


def _dense_top_k(dense: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per row of ``dense`` (width a multiple of :data:`TOP_K_BLOCK`), :func:`top_k` of its positive cells.

    The k-th largest block maximum of a row is at most its k-th best score, so the cells at or above it, all
    in blocks whose maximum reaches it, hold the row's top k with all their ties; only those are sorted.
    """
    n_rows = dense.shape[0]
    if k <= 0:
        return [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))] * n_rows
    blocks = dense.reshape(n_rows, -1, TOP_K_BLOCK)
    maxima = blocks.max(axis=2)
    n_blocks = maxima.shape[1]
    threshold = np.partition(maxima, n_blocks - k, axis=1)[:, n_blocks - k] if k < n_blocks else np.zeros(n_rows)
    threshold = np.maximum(threshold, np.nextafter(0.0, 1.0))[:, None]  # positive scores only
    block_rows, block_ids = np.nonzero(maxima >= threshold)
    candidates = blocks[block_rows, block_ids]  # (blocks, TOP_K_BLOCK)
    cand_rows, cand_cols = np.nonzero(candidates >= threshold[block_rows])
    rows = block_rows[cand_rows]
    positions = block_ids[cand_rows] * TOP_K_BLOCK + cand_cols
    scores = candidates[cand_rows, cand_cols]
    order = np.lexsort((positions, -scores, rows))
    rows, positions, scores = rows[order], positions[order], scores[order]
    bounds = np.searchsorted(rows, np.arange(n_rows + 1)).tolist()
    return [(positions[a : min(b, a + k)], scores[a : min(b, a + k)]) for a, b in zip(bounds[:-1], bounds[1:])]


def _write_json(path: Path, value: Any, *, indent: int | None = None) -> None:
    """Write JSON as UTF-8 (non-ASCII kept readable)."""
    path.write_text(json.dumps(value, ensure_ascii=False, indent=indent), encoding="utf-8")
