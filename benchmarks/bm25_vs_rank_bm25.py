"""Benchmark ``BM25Retriever`` against ``rank_bm25.BM25Okapi``: speed and exact agreement.

Builds a corpus (synthetic Zipfian passages by default, or a BEIR ``corpus.jsonl`` /
``queries.jsonl`` with ``--beir``), tokenizes it ONCE with the project tokenizer, builds both
indexes on the same tokens and runs the same queries through both. Prints build times, queries/s
(rank_bm25: ``get_scores`` + top-k per query; ours: batched and one query at a time), the speed
ratios, and top-k agreement under the shared tie-break (score descending, corpus position
ascending, positive scores only). Exits with status 1 when any query's top-k differs.

    .venv/bin/python benchmarks/bm25_vs_rank_bm25.py --docs 50000 --queries 200 --seed 0 --k 10
    .venv/bin/python benchmarks/bm25_vs_rank_bm25.py --beir /work/shared/data/beir/msmarco
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from rank_bm25 import BM25Okapi

from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever
from retrieval_pipeline.core.retrieval.engines.tokenize import STOPWORDS, tokenize

T = TypeVar("T")

_SYLLABLES = ("ka", "to", "ri", "mel", "san", "dor", "vi", "lu", "pre", "ex", "con", "ta", "ne", "os", "ber", "qui")


@dataclass(frozen=True)
class Workload:
    """What both indexes see: corpus tokens and query tokens."""

    description: str
    doc_ids: list[str]
    corpus_tokens: list[list[str]]
    queries_tokens: list[list[str]]


# ---------------------------------------------------------------------- workloads


def _pseudo_word(rng: np.random.Generator, n_syllables: int) -> str:
    """A lowercase pseudo-word of ``n_syllables`` syllables."""
    return "".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), n_syllables))


def _pseudo_words(count: int, rng: np.random.Generator) -> list[str]:
    """``count`` distinct pseudo-words of 2-4 syllables; ~1% are CamelCase identifiers, none common."""
    words: dict[str, None] = {}
    while len(words) < count:
        word = _pseudo_word(rng, int(rng.integers(2, 5)))
        if len(words) > 2_000 and rng.random() < 0.01:  # identifiers are rare words, as in prose
            word = word.capitalize() + _pseudo_word(rng, 2).capitalize()
        if word.lower() not in STOPWORDS:
            words[word] = None
    return list(words)


def _zipf_probabilities(size: int, exponent: float = 1.0, shift: float = 2.7) -> np.ndarray:
    """Zipf-Mandelbrot rank probabilities ``1 / (rank + shift) ** exponent``, normalised."""
    weights = 1.0 / (np.arange(1, size + 1) + shift) ** exponent
    return weights / weights.sum()


def synthetic_texts(n_docs: int, n_queries: int, seed: int, vocab_size: int = 60_000) -> tuple[list[str], list[str]]:
    """Passages of ~86 words (stopwords at the top ranks of a Zipfian vocabulary) and queries.

    Each query takes 2-5 distinct non-stopword words of a random passage (so it has a relevant
    document), sometimes one extra random word (often unknown-ish or rare), and in 1 of 10 queries
    a repeated word.
    """
    rng = np.random.default_rng(seed)
    vocabulary = np.array(sorted(STOPWORDS) + _pseudo_words(vocab_size - len(STOPWORDS), rng), dtype=object)
    rng.shuffle(vocabulary[: len(STOPWORDS) + 200])  # stopwords and common words share the top ranks
    lengths = np.clip(rng.normal(86, 18, n_docs).round().astype(int), 20, 200)
    word_ids = rng.choice(len(vocabulary), size=int(lengths.sum()), p=_zipf_probabilities(len(vocabulary)))
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    texts = [" ".join(vocabulary[word_ids[bounds[i] : bounds[i + 1]]]) for i in range(n_docs)]
    queries = [_synthetic_query(texts[int(rng.integers(n_docs))], vocabulary, rng) for _ in range(n_queries)]
    return texts, queries


def _synthetic_query(passage: str, vocabulary: np.ndarray, rng: np.random.Generator) -> str:
    """A 2-5 word query drawn from one passage, with an occasional extra or repeated word."""
    content = list(dict.fromkeys(w for w in passage.split() if w.lower() not in STOPWORDS))
    size = min(len(content), int(rng.integers(2, 6)))
    picked = [content[i] for i in rng.choice(len(content), size=size, replace=False)]
    if rng.random() < 0.3:
        picked.append(str(vocabulary[int(rng.integers(len(vocabulary)))]))
    if rng.random() < 0.1:
        picked.append(picked[0])
    return " ".join(picked)


def _read_jsonl(path: Path, limit: int | None) -> list[dict[str, str]]:
    """Rows of a JSON-lines file, at most ``limit``."""
    rows: list[dict[str, str]] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(json.loads(line))
            if limit is not None and len(rows) >= limit:
                break
    return rows


def beir_texts(directory: Path, n_docs: int, n_queries: int) -> tuple[list[str], list[str], list[str]]:
    """Doc ids, passage texts (title + text) and query texts of a BEIR folder."""
    corpus = _read_jsonl(directory / "corpus.jsonl", n_docs)
    queries = _read_jsonl(directory / "queries.jsonl", n_queries)
    texts = [f"{row.get('title', '')} {row['text']}".strip() for row in corpus]
    return [str(row["_id"]) for row in corpus], texts, [row["text"] for row in queries]


def make_workload(args: argparse.Namespace) -> Workload:
    """Tokenize the chosen corpus and queries once."""
    if args.beir:
        doc_ids, texts, queries = beir_texts(Path(args.beir), args.docs, args.queries)
        description = f"BEIR {args.beir}"
    else:
        texts, queries = synthetic_texts(args.docs, args.queries, args.seed)
        doc_ids = [f"d{i}" for i in range(len(texts))]
        description = f"synthetic Zipfian passages, seed {args.seed}"
    corpus_tokens, seconds = timed(lambda: [tokenize(text) for text in texts])
    mean_words = sum(len(text.split()) for text in texts) / len(texts)
    mean_tokens = sum(map(len, corpus_tokens)) / len(corpus_tokens)
    print(
        f"corpus: {description}: {len(texts)} docs, {mean_words:.1f} words/doc "
        f"({mean_tokens:.1f} tokens after stopwords/splitting), {len(queries)} queries"
    )
    print(f"tokenize corpus (once, shared): {seconds:.2f} s")
    return Workload(description, doc_ids, corpus_tokens, [tokenize(query) for query in queries])


# ---------------------------------------------------------------------- measuring


def timed(function: Callable[[], T]) -> tuple[T, float]:
    """Result of ``function()`` and its wall time in seconds."""
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def reference_top_k(scores: np.ndarray, k: int) -> list[int]:
    """Top-k positions of a dense score vector under the shared tie-break (full sort; untimed)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [int(i) for i in order[:k] if scores[i] > 0]


def run_rank_bm25(index: BM25Okapi, queries: Sequence[list[str]], k: int) -> tuple[list[np.ndarray], float]:
    """Dense scores per query and the time of ``get_scores`` + an argpartition top-k per query."""
    all_scores: list[np.ndarray] = []
    start = time.perf_counter()
    for query in queries:
        scores = index.get_scores(query)
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        _ = top[np.argsort(-scores[top], kind="stable")]
        all_scores.append(scores)
    return all_scores, time.perf_counter() - start


def compare(ours: BM25Retriever, reference_scores: Sequence[np.ndarray], queries: Sequence[list[str]], k: int) -> tuple[float, float]:
    """Fraction of queries whose top-k doc lists are identical, and the max |score difference|."""
    hits = ours.search_tokens(queries, k)
    position = {doc_id: i for i, doc_id in enumerate(ours.doc_ids)}
    same = 0
    max_diff = 0.0
    for query, query_hits, scores in zip(queries, hits, reference_scores):
        same += [position[doc_id] for doc_id, _ in query_hits] == reference_top_k(scores, k)
        max_diff = max(max_diff, float(np.max(np.abs(ours.scores_tokens(query) - scores))))
    return same / len(queries), max_diff


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--docs", type=int, default=50_000, help="number of passages (default 50000)")
    parser.add_argument("--queries", type=int, default=200, help="number of queries (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic corpus")
    parser.add_argument("--k", type=int, default=10, help="top-k depth")
    parser.add_argument("--baseline-queries", type=int, default=None, help="run rank_bm25 on the first N queries only")
    parser.add_argument("--beir", default=None, help="BEIR folder (corpus.jsonl, queries.jsonl) instead of synthetic")
    return parser.parse_args(argv)


def speed_line(label: str, n_queries: int, seconds: float, reference_qps: float | None = None) -> str:
    """``label: q/s (ms/query)`` and, for ours, the ratio to rank_bm25."""
    qps = n_queries / seconds
    line = f"{label}: {qps:,.1f} q/s ({1000 / qps:.3f} ms/query)"
    return line if reference_qps is None else f"{line} -> {qps / reference_qps:,.1f}x rank_bm25"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0 when every query agrees, 1 otherwise."""
    args = parse_args(argv)
    work = make_workload(args)
    reference, reference_build = timed(lambda: BM25Okapi(work.corpus_tokens))
    ours, ours_build = timed(lambda: BM25Retriever.from_tokens(work.doc_ids, work.corpus_tokens))
    print(
        f"build: rank_bm25 {reference_build:.2f} s | ours {ours_build:.2f} s ({ours.weights.nnz:,} weights, {len(ours.vocabulary):,} terms)"
    )

    queries = work.queries_tokens
    baseline = queries[: args.baseline_queries] if args.baseline_queries else queries
    reference_scores, reference_seconds = run_rank_bm25(reference, baseline, args.k)
    ours.search_tokens(queries[:5], args.k)  # warm-up
    _, batched_seconds = timed(lambda: ours.search_tokens(queries, args.k))
    _, single_seconds = timed(lambda: [ours.search_tokens([query], args.k) for query in queries])

    reference_qps = len(baseline) / reference_seconds
    n = len(queries)
    reference_label = f"rank_bm25 (get_scores + top-{args.k}, {len(baseline)} queries)"
    print(speed_line(reference_label, len(baseline), reference_seconds))
    print(speed_line(f"ours batched ({n} queries, one call)", n, batched_seconds, reference_qps))
    print(speed_line(f"ours one at a time ({n} calls)", n, single_seconds, reference_qps))

    agreement, max_diff = compare(ours, reference_scores, baseline, args.k)
    print(f"top-{args.k} agreement: {agreement:.1%} of {len(baseline)} queries identical; max |score diff| over all docs: {max_diff:.3g}")
    return 0 if agreement == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
