"""Evaluate retrievers on a Natural Questions CSV, from the command line.

Usage::

    python -m retrieval_pipeline.cli.evaluate_csv --csv PATH [--sample-size N] [--out DIR]
        [--cache PATH] [--search-types keyword semantic hybrid]

Steps: load and validate the CSV, merge identical long answers into chunks, write
``DIR/chunks.json``, build the requested retrievers over the chunks, rank every question, write
``DIR/evaluation_results.json`` and print a comparison table plus the wall time of each step.

Search types:

* ``keyword``: BM25 (``BM25Retriever``; k1 1.5, b 0.75, epsilon 0.25).
* ``semantic``: all-MiniLM-L6-v2 cosine search (``DenseRetriever``); chunk and question vectors go
  through the SQLite embedding cache, so a second run embeds nothing.
* ``hybrid``: Reciprocal Rank Fusion (k = 60) of keyword and semantic.
* ``hybrid_minmax``: min-max score fusion (alpha 0.5) of keyword and semantic.

Each search ranks the top 100 chunks per question in one batch; latency is timed on the first 200
questions searched one at a time (:func:`~retrieval_pipeline.core.evaluate.batched_run`). Bad input
(missing file or column, non-UTF-8 bytes, no usable rows) exits with code 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tabulate import tabulate

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.evaluate import TimedRun, batched_run
from retrieval_pipeline.core.evaluation_results import comparison_table, evaluation_results, write_evaluation_results
from retrieval_pipeline.core.registry import RetrieverSettings
from retrieval_pipeline.core.retrieval.base import Retriever
from retrieval_pipeline.core.retrieval.bm25 import BM25Retriever
from retrieval_pipeline.core.retrieval.dense import DenseRetriever
from retrieval_pipeline.core.retrieval.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.encoders import Encoder, SentenceTransformerEncoder, set_hf_offline
from retrieval_pipeline.core.retrieval.fusion import HybridRetriever, hybrid_name
from retrieval_pipeline.core.sources.nq import NQLoad, dedupe_chunks, load_nq_csv, nq_qrels, write_chunks_json

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = PROJECT_ROOT / "data" / "cache" / "embeddings.sqlite"
DEFAULT_OUT = PROJECT_ROOT / "data" / "out" / "evaluate_csv"
SEARCH_TYPES: tuple[str, ...] = ("keyword", "semantic", "hybrid", "hybrid_minmax")
DEFAULT_SEARCH_TYPES: tuple[str, ...] = ("keyword", "semantic", "hybrid")
#: Search types that need the BM25 index / the dense index.
_NEEDS_KEYWORD = {"keyword", "hybrid", "hybrid_minmax"}
_NEEDS_SEMANTIC = {"semantic", "hybrid", "hybrid_minmax"}
#: Chunk ids listed per question in the report.
REPORT_K = 5
#: Rejected rows printed before "... and N more".
_SHOWN_REJECTS = 5


@dataclass
class Timings:
    """Wall time per step, in run order, with a note each (what the step did)."""

    steps: list[tuple[str, float, str]] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        """Time the block; append to the yielded list to attach a note."""
        note: list[str] = []
        start = time.perf_counter()
        try:
            yield note
        finally:
            self.steps.append((name, time.perf_counter() - start, "; ".join(note)))

    def table(self) -> str:
        """The steps as a plain-text table, with a total row."""
        rows = [[name, f"{seconds:.2f}", note] for name, seconds, note in self.steps]
        rows.append(["total", f"{sum(s for _, s, _ in self.steps):.2f}", ""])
        headers = ["step", "seconds", "details"]
        return tabulate(rows, headers, tablefmt="simple", colalign=("left", "right", "left"), disable_numparse=True)


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m retrieval_pipeline.cli.evaluate_csv",
        description="Evaluate keyword, semantic and hybrid retrieval on a Natural Questions CSV "
        "(columns question,long_answer,short_answer).",
    )
    parser.add_argument("--csv", required=True, type=Path, help="the NQ CSV file")
    parser.add_argument("--sample-size", type=_positive_int, default=None, help="use only the first N data rows")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"embedding cache (default: {DEFAULT_CACHE})")
    parser.add_argument(
        "--search-types",
        nargs="+",
        choices=SEARCH_TYPES,
        default=list(DEFAULT_SEARCH_TYPES),
        metavar="TYPE",
        help=f"any of {', '.join(SEARCH_TYPES)} (default: {' '.join(DEFAULT_SEARCH_TYPES)})",
    )
    return parser


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Run the evaluation; returns the exit code (0 ok, 2 bad input or arguments).

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.
        stdout: Where the report goes; ``None`` means ``sys.stdout``.

    Returns:
        The process exit code.
    """
    args = build_parser().parse_args(argv)
    out = stdout or sys.stdout
    search_types = list(dict.fromkeys(args.search_types))
    try:
        evaluate_csv(args.csv, args.out, args.cache, search_types, args.sample_size, out)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output folder or cache that cannot be written
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def evaluate_csv(
    csv_path: Path,
    out_dir: Path,
    cache_path: Path,
    search_types: Sequence[str],
    sample_size: int | None,
    out: TextIO,
) -> dict[str, dict[str, object]]:
    """Load, dedupe, index, evaluate, write both JSON files and print the tables.

    Args:
        csv_path: The NQ CSV.
        out_dir: Folder for ``chunks.json`` and ``evaluation_results.json``.
        cache_path: SQLite embedding cache (used only by semantic and hybrid search).
        search_types: Names from :data:`SEARCH_TYPES`, in report order.
        sample_size: First N data rows only, or ``None``.
        out: Where to print.

    Returns:
        The evaluation results written to ``evaluation_results.json``.

    Raises:
        InputError: Bad CSV, or no usable rows.
    """
    timings = Timings()
    with timings.step("load") as note:
        load = load_nq_csv(csv_path, sample_size)
        _check_usable(load, csv_path)
        note.append(f"{len(load.rows)} rows accepted, {len(load.rejects)} rejected of {load.total}")
    _print_rejects(load, out)
    with timings.step("dedupe") as note:
        corpus = dedupe_chunks(load.rows)
        chunks_path = write_chunks_json(corpus.chunks, out_dir / "chunks.json")
        note.append(f"{len(corpus.chunks)} chunks, {corpus.duplicates} duplicate long answers merged")
    summary = f"{len(corpus.chunks)} chunks from {len(load.rows)} long answers ({corpus.duplicates} duplicates merged)"
    print(f"corpus: {summary} -> {chunks_path}", file=out)
    doc_ids = [c["chunk_id"] for c in corpus.chunks]
    texts = [c["content"] for c in corpus.chunks]
    questions = {row.question_id: row.question for row in load.rows}
    with ExitStack() as stack:
        cache = stack.enter_context(EmbeddingCache(cache_path)) if _NEEDS_SEMANTIC & set(search_types) else None
        retrievers = _build_retrievers(search_types, doc_ids, texts, list(questions.values()), cache, timings)
        runs = _evaluate(retrievers, questions, timings)
    results = evaluation_results(runs, nq_qrels(corpus.chunks), questions, k=REPORT_K)
    results_path = write_evaluation_results(results, out_dir / "evaluation_results.json")
    print(f"results -> {results_path}\n", file=out)
    print(comparison_table(results), file=out)
    print(f"\n{timings.table()}", file=out)
    return results


def _check_usable(load: NQLoad, csv_path: Path) -> None:
    """Refuse a file with no accepted rows (nothing to evaluate)."""
    if not load.rows:
        detail = f"; first reason: {load.rejects[0].reason}" if load.rejects else ""
        counts = f"{load.total} data rows read, {len(load.rejects)} rejected"
        raise InputError(f"no usable rows ({counts}){detail}", path=str(csv_path))


def _print_rejects(load: NQLoad, out: TextIO) -> None:
    """Say how many rows were read and why any were rejected."""
    print(f"loaded {len(load.rows)} of {load.total} rows ({len(load.rejects)} rejected)", file=out)
    for reject in load.rejects[:_SHOWN_REJECTS]:
        print(f"  rejected {reject.case_id}: {reject.reason}", file=out)
    if len(load.rejects) > _SHOWN_REJECTS:
        print(f"  ... and {len(load.rejects) - _SHOWN_REJECTS} more", file=out)


def _build_retrievers(
    search_types: Sequence[str],
    doc_ids: list[str],
    texts: list[str],
    questions: list[str],
    cache: EmbeddingCache | None,
    timings: Timings,
) -> dict[str, Retriever]:
    """``{search type: retriever}``, building BM25 and the dense index only when needed.

    Args:
        search_types: Names from :data:`SEARCH_TYPES`.
        doc_ids: Chunk ids, in corpus order.
        texts: Chunk texts, aligned with ``doc_ids``.
        questions: Question texts (embedded ahead of the search, so its timing is search only).
        cache: The embedding cache; required when a semantic or hybrid search type is requested.
        timings: Collects the wall time of each build step.

    Returns:
        One retriever per search type, in the given order.
    """
    settings = RetrieverSettings()
    keyword: BM25Retriever | None = None
    semantic: DenseRetriever | None = None
    if _NEEDS_KEYWORD & set(search_types):
        with timings.step("index keyword (bm25)") as note:
            bm25 = settings.bm25
            keyword = BM25Retriever.build(doc_ids, texts, k1=bm25.k1, b=bm25.b, epsilon=bm25.epsilon)
            note.append(f"{len(doc_ids)} chunks, {keyword.params['n_terms']} terms")
    if _NEEDS_SEMANTIC & set(search_types):
        if cache is None:
            raise ValueError("semantic and hybrid search need an embedding cache")
        semantic = _build_dense(doc_ids, texts, questions, cache, timings)
    return {name: _retriever(name, keyword, semantic, settings) for name in search_types}


def _build_dense(
    doc_ids: list[str], texts: list[str], questions: list[str], cache: EmbeddingCache, timings: Timings
) -> DenseRetriever:
    """Embed chunks and questions through the cache (reporting cold vs warm) and index the chunks.

    The model is loaded only if something is missing from the cache, so a warm run never loads it.
    """
    set_hf_offline()
    encoder: Encoder = SentenceTransformerEncoder(batch_size=RetrieverSettings().dense.batch_size)
    with timings.step("embed chunks + index") as note:
        dense = DenseRetriever("dense_minilm").build(doc_ids, texts, encoder, cache=cache)
        stats = dense.build_stats
        assert stats is not None
        note.append(f"{stats.embedded_now} chunks embedded now, {stats.from_cache} from cache ({cache.path})")
    with timings.step("embed questions") as note:
        _, question_stats = cache.get_or_encode(encoder, questions)
        note.append(f"{question_stats.misses} questions embedded now, {question_stats.hits} from cache")
    return dense


def _retriever(
    name: str, keyword: BM25Retriever | None, semantic: DenseRetriever | None, settings: RetrieverSettings
) -> Retriever:
    """The retriever behind one search type."""
    if name == "keyword" and keyword is not None:
        return keyword
    if name == "semantic" and semantic is not None:
        return semantic
    if keyword is None or semantic is None or name not in ("hybrid", "hybrid_minmax"):
        raise ValueError(f"unknown search type {name!r} or its indexes were not built")
    pair: list[Retriever] = [keyword, semantic]
    if name == "hybrid":
        rrf_k = settings.hybrid_rrf.k
        return HybridRetriever(hybrid_name("rrf", rrf_k=rrf_k), pair, "rrf", rrf_k=rrf_k, depth=settings.depth)
    alpha = settings.hybrid_minmax.alpha
    return HybridRetriever(hybrid_name("minmax", alpha=alpha), pair, "minmax", alpha=alpha, depth=settings.depth)


def _evaluate(retrievers: dict[str, Retriever], questions: dict[str, str], timings: Timings) -> dict[str, TimedRun]:
    """Rank every question with every retriever (batched), timing each search type.

    Questions were embedded beforehand, so the semantic and hybrid timings (and latencies) are search
    only: query vectors come from the embedding cache.
    """
    settings = RetrieverSettings()
    runs: dict[str, TimedRun] = {}
    for name, retriever in retrievers.items():
        with timings.step(f"evaluate {name}") as note:
            runs[name] = batched_run(retriever, questions, settings.depth, settings.latency_sample)
            note.append(_latency_note(runs[name], len(questions)))
            if name in _NEEDS_SEMANTIC:
                note.append("question vectors read from the cache")
    return runs


def _latency_note(run: TimedRun, n_questions: int) -> str:
    """``1656 questions ranked; latency median 3.1 ms, max 9.0 ms (200 timed alone)``."""
    latencies = list(run.latency_ms.values())
    if not latencies:
        return f"{n_questions} questions ranked"
    median, worst = statistics.median(latencies), max(latencies)
    latency = f"latency median {median:.2f} ms, max {worst:.2f} ms ({len(latencies)} timed alone)"
    return f"{n_questions} questions ranked; {latency}"


if __name__ == "__main__":
    sys.exit(main())
