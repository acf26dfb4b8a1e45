"""The Okapi BM25 index of a corpus: the ``terms x documents`` matrix of rank_bm25's summands, and the ``params.json``
content that records how it was made (:class:`~retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25.BM25Retriever`
builds it here, then searches and saves it)."""

from __future__ import annotations

import importlib
import math
import platform
from collections.abc import Sequence
from importlib import metadata
from itertools import chain
from typing import Any

import numpy as np
import scipy.sparse as sp

from retrieval_pipeline.core.common.progress import Progress, ProgressCallback
from retrieval_pipeline.core.retrieval.engines.tokenize import Tokenizer

FORMAT_VERSION = 1
#: Documents tokenized between two reports to the build's :class:`~retrieval_pipeline.core.common.progress.Progress`.
TOKENIZE_CHUNK = 5000


def tokenized_corpus(texts: Sequence[str], tokenizer: Tokenizer) -> list[list[str]]:
    """Every text's tokens, reported to a :class:`~retrieval_pipeline.core.common.progress.Progress` as they are made."""
    with Progress("BM25 index", verb="tokenized", noun="documents", unit="docs") as progress:
        return _tokenized(texts, tokenizer, progress)


def okapi_index(
    doc_ids: Sequence[str],
    corpus_tokens: Sequence[Sequence[str]],
    *,
    k1: float,
    b: float,
    epsilon: float,
    tokenizer: Tokenizer,
    retriever: str,
) -> tuple[list[str], sp.csr_array, dict[str, Any]]:
    """The vocabulary (in term-id order), the weight matrix and the ``params.json`` content of an index of ``corpus_tokens``
    (see :meth:`~retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25.BM25Retriever.from_tokens`; ``retriever``: the
    name recorded).

    Raises:
        ValueError: Empty corpus, misaligned inputs, duplicate ids, no tokens, bad parameters.
        TypeError: A document is a string rather than a token list.
    """
    _check_corpus(doc_ids, corpus_tokens)
    _check_params(k1, b, epsilon)
    vocabulary = _first_occurrence_vocabulary(corpus_tokens)
    if not vocabulary:
        raise ValueError("the corpus has no tokens after tokenization; nothing to index")
    term_freqs, doc_len = _term_frequencies(corpus_tokens, vocabulary)
    avgdl = int(doc_len.sum()) / len(doc_len)
    idf, average_idf = _okapi_idf(np.diff(term_freqs.indptr), len(doc_len), epsilon)
    weights = _okapi_weights(term_freqs, doc_len, idf, k1=k1, b=b, avgdl=avgdl)
    params = _params(retriever=retriever, k1=k1, b=b, epsilon=epsilon, tokenizer=tokenizer, n_docs=len(doc_len), avgdl=avgdl)
    params.update(average_idf=average_idf, n_terms=len(vocabulary), nnz=int(weights.nnz))
    return list(vocabulary), weights, params


# ---------------------------------------------------------------------- building helpers


def _tokenized(texts: Sequence[str], tokenizer: Tokenizer, progress: ProgressCallback) -> list[list[str]]:
    """Every text's tokens, reporting ``progress(done, total)`` after each :data:`TOKENIZE_CHUNK` documents."""
    tokens: list[list[str]] = []
    for start in range(0, len(texts), TOKENIZE_CHUNK):
        tokens.extend(tokenizer(text) for text in texts[start : start + TOKENIZE_CHUNK])
        progress(len(tokens), len(texts))
    return tokens


def _check_corpus(doc_ids: Sequence[str], corpus_tokens: Sequence[Sequence[str]]) -> None:
    """Reject an empty, misaligned or duplicate-id corpus, or documents given as strings."""
    if len(doc_ids) == 0:
        raise ValueError("cannot build a BM25 index over an empty corpus (no documents)")
    if len(doc_ids) != len(corpus_tokens):
        raise ValueError(f"doc_ids and documents differ in length: {len(doc_ids)} != {len(corpus_tokens)}")
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError("doc_ids must be unique")
    if any(isinstance(tokens, str) for tokens in corpus_tokens):
        raise TypeError("corpus_tokens must hold a token list per document, not strings (use build for texts)")


def _check_params(k1: float, b: float, epsilon: float) -> None:
    """Reject parameters outside BM25's meaningful range."""
    if not (math.isfinite(k1) and k1 >= 0):
        raise ValueError(f"k1 must be a finite number >= 0, got {k1}")
    if not 0 <= b <= 1:
        raise ValueError(f"b must be in [0, 1], got {b}")
    if not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be finite, got {epsilon}")


def _first_occurrence_vocabulary(corpus_tokens: Sequence[Sequence[str]]) -> dict[str, int]:
    """Term -> id, ids in order of first occurrence (rank_bm25's order, which fixes its idf sum)."""
    return {term: i for i, term in enumerate(dict.fromkeys(chain.from_iterable(corpus_tokens)))}


def _term_frequencies(corpus_tokens: Sequence[Sequence[str]], vocabulary: dict[str, int]) -> tuple[sp.csr_array, np.ndarray]:
    """``terms x documents`` term-frequency CSR matrix (canonical) and token count per document."""
    doc_len = np.fromiter(map(len, corpus_tokens), dtype=np.int64, count=len(corpus_tokens))
    n_tokens = int(doc_len.sum())
    index_dtype = np.int32 if max(len(vocabulary), len(doc_len), n_tokens) < 2**31 else np.int64
    term_ids = np.fromiter(map(vocabulary.__getitem__, chain.from_iterable(corpus_tokens)), dtype=index_dtype, count=n_tokens)
    doc_positions = np.repeat(np.arange(len(doc_len), dtype=index_dtype), doc_len)
    counts = np.ones(n_tokens, dtype=np.int64)
    shape = (len(vocabulary), len(doc_len))
    term_freqs = sp.coo_array((counts, (term_ids, doc_positions)), shape=shape).tocsr()
    term_freqs.sum_duplicates()  # canonical: one entry per (term, doc), docs ascending within a term
    return term_freqs, doc_len


def _okapi_idf(doc_freq: np.ndarray, n_docs: int, epsilon: float) -> tuple[np.ndarray, float]:
    """rank_bm25's idf per term (same ``math.log`` calls, same summation order) and the raw average."""
    raw = [math.log(n_docs - n + 0.5) - math.log(n + 0.5) for n in doc_freq.tolist()]
    idf_sum = 0.0
    for value in raw:  # a plain left-to-right sum, as rank_bm25 (not fsum / pairwise)
        idf_sum += value
    average_idf = idf_sum / len(raw)
    floor = epsilon * average_idf
    return np.array([floor if value < 0 else value for value in raw], dtype=np.float64), average_idf


def _okapi_weights(term_freqs: sp.csr_array, doc_len: np.ndarray, idf: np.ndarray, *, k1: float, b: float, avgdl: float) -> sp.csr_array:
    """Per-(term, doc) summands, with rank_bm25's exact operation order.

    rank_bm25 computes ``idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)))``; the same
    expression, evaluated the same way, gives bit-identical summands.
    """
    length_norm = k1 * (1 - b + b * doc_len / avgdl)  # per document
    tf = term_freqs.data
    term_idf = np.repeat(idf, np.diff(term_freqs.indptr))
    data = term_idf * (tf * (k1 + 1) / (tf + length_norm[term_freqs.indices]))
    return sp.csr_array((data, term_freqs.indices, term_freqs.indptr), shape=term_freqs.shape)


# ---------------------------------------------------------------------- persistence helpers


def tokenizer_name(tokenizer: Tokenizer) -> str:
    """``module:qualname`` of a tokenizer, as recorded in ``params.json``."""
    module = getattr(tokenizer, "__module__", None) or "?"
    qualname = getattr(tokenizer, "__qualname__", None) or type(tokenizer).__qualname__
    return f"{module}:{qualname}"


def resolve_tokenizer(name: str) -> Tokenizer:
    """Import the tokenizer recorded as ``module:qualname``.

    Raises:
        ValueError: The name does not resolve to an importable callable.
    """
    module_name, _, qualname = name.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for attribute in qualname.split("."):
            target = getattr(target, attribute)
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"cannot import tokenizer {name!r}; pass tokenizer= to load()") from error
    if not callable(target):
        raise ValueError(f"tokenizer {name!r} is not callable; pass tokenizer= to load()")
    return target


def _library_versions() -> dict[str, str | None]:
    """Versions of what produced the index (rank_bm25: the reference the scores match)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for package in ("numpy", "scipy", "rank-bm25"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _params(*, retriever: str, k1: float, b: float, epsilon: float, tokenizer: Tokenizer, n_docs: int, avgdl: float) -> dict[str, Any]:
    """The ``params.json`` content of a freshly built index."""
    return {
        "format_version": FORMAT_VERSION,
        "retriever": retriever,
        "variant": "rank_bm25.BM25Okapi",
        "k1": k1,
        "b": b,
        "epsilon": epsilon,
        "tokenizer": tokenizer_name(tokenizer),
        "n_docs": n_docs,
        "avgdl": avgdl,
        "versions": _library_versions(),
    }
