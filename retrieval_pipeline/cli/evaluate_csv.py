"""Evaluate retrievers on a Natural Questions CSV, from the command line.

Usage::

    python -m retrieval_pipeline.cli.evaluate_csv --csv PATH [--sample-size N] [--out DIR]
        [--cache DIR] [--search-types keyword semantic hybrid bm25_code ...]

Steps: load and validate the CSV, merge identical long answers into chunks, write
``DIR/chunks.json``, build the requested retrievers over the chunks (through the same retriever
factory as the Dagster assets, indexes in ``DIR/indexes/``), rank every question, write
``DIR/evaluation_results.json`` and print a comparison table plus the wall time of each step.

Search types are labels for retrievers of ``data/config/retrievers.yaml``; any registry name works too:

* ``keyword``: ``bm25`` (k1 1.5, b 0.75, epsilon 0.25).
* ``semantic``: ``dense_minilm``, all-MiniLM-L6-v2 cosine search; chunk vectors go through the SQLite
  embedding cache, so a second run embeds nothing (question vectors are encoded at search time, so
  latency includes encoding, as a user would see it).
* ``hybrid``: ``hybrid_rrf_k60``, Reciprocal Rank Fusion (k = 60) of keyword and semantic.
* ``hybrid_minmax``: ``hybrid_minmax_a0.5``, min-max score fusion (equal weights) of keyword and semantic.

Each search ranks the top 100 chunks per question in one batch; latency is timed on the first 200
questions searched one at a time (:func:`~retrieval_pipeline.core.retrieval.run_loop.batched_run`). Bad input
(missing file or column, non-UTF-8 bytes, no usable rows) exits with code 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tabulate import tabulate

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.paths import CACHE_ROOT, PROJECT_ROOT
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets.nq.reader import NQLoad, dedupe_chunks, load_nq_csv, nq_qrels, write_chunks_json
from retrieval_pipeline.core.evaluation.exports.results import comparison_table, evaluation_results, write_evaluation_results
from retrieval_pipeline.core.registry import DEFAULT_RETRIEVERS_PATH
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs
from retrieval_pipeline.core.retrieval.models.model_source import set_hf_offline
from retrieval_pipeline.core.retrieval.run_loop import TimedRun
from retrieval_pipeline.core.retrieval.runner import build_retriever, run_retriever
from retrieval_pipeline.core.retrieval.settings import RetrievalSettings

DEFAULT_CACHE = CACHE_ROOT
DEFAULT_OUT = PROJECT_ROOT / "data" / "out" / "evaluate_csv"
#: Search types: short labels for retrievers of ``data/config/retrievers.yaml`` (any registry name works too).
SEARCH_TYPES: dict[str, str] = {
    "keyword": "bm25",
    "semantic": "dense_minilm",
    "hybrid": "hybrid_rrf_k60",
    "hybrid_minmax": "hybrid_minmax_a0.5",
}
DEFAULT_SEARCH_TYPES: tuple[str, ...] = ("keyword", "semantic", "hybrid")
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
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"embedding cache folder (default: {DEFAULT_CACHE})")
    parser.add_argument(
        "--search-types",
        nargs="+",
        default=list(DEFAULT_SEARCH_TYPES),
        metavar="TYPE",
        help=f"any of {', '.join(f'{k} ({v})' for k, v in SEARCH_TYPES.items())}, or any retriever name in "
        f"data/config/retrievers.yaml (default: {' '.join(DEFAULT_SEARCH_TYPES)})",
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
        cache_path: Embedding cache folder (used only by embedding retrievers).
        search_types: Labels from :data:`SEARCH_TYPES` or retriever names, in report order.
        sample_size: Evaluate the first N questions only (against the corpus of every row), or ``None``.
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
        every = load if sample_size is None else load_nq_csv(csv_path)  # sampling questions never removes documents
        corpus = dedupe_chunks(every.rows)
        chunks_path = write_chunks_json(corpus.chunks, out_dir / "chunks.json")
        note.append(f"{len(corpus.chunks)} chunks, {corpus.duplicates} duplicate long answers merged")
    summary = f"{len(corpus.chunks)} chunks from {len(every.rows)} long answers ({corpus.duplicates} duplicates merged)"
    print(f"corpus: {summary} -> {chunks_path}", file=out)
    set_hf_offline()
    questions = {row.question_id: row.question for row in load.rows}
    retrievers = {label: SEARCH_TYPES.get(label, label) for label in search_types}
    try:
        runs = _evaluate(retrievers, corpus.chunks, questions, out_dir, cache_path, timings)
    except RetrieverError as exc:
        raise InputError(str(exc)) from exc
    qrels = {qid: judged for qid, judged in nq_qrels(corpus.chunks).items() if qid in questions}
    results = evaluation_results(runs, qrels, questions, k=REPORT_K)
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


def _evaluate(
    retrievers: dict[str, str],
    corpus: list[dict[str, str]],
    questions: dict[str, str],
    out_dir: Path,
    cache_dir: Path,
    timings: Timings,
) -> dict[str, TimedRun]:
    """Build (components first) and run every requested retriever through the one retriever factory.

    Args:
        retrievers: ``{label: registry name}``, in report order.
        corpus: The chunks (``chunk_id``, ``content``).
        questions: ``{question_id: text}``.
        out_dir: Indexes go to ``out_dir/indexes/<name>``.
        cache_dir: Embedding cache folder.
        timings: Collects the wall time of each step.
    """
    registry = load_retriever_specs(DEFAULT_RETRIEVERS_PATH)
    documents = [Document(c["chunk_id"], c["content"]) for c in corpus]
    index_root = out_dir / "indexes"
    depth, latency_sample = RetrievalSettings().depth, RetrievalSettings().latency_sample
    for name in registry.closure(retrievers.values()):
        label = next((lab for lab, n in retrievers.items() if n == name), name)
        with timings.step(f"index {label} ({name})") as note:
            params = build_retriever(registry, "evaluate_csv", name, documents, index_root, cache_dir, encoder_for_spec)
            note.append(_build_note(params, len(documents)))
    runs: dict[str, TimedRun] = {}
    for label, name in retrievers.items():
        with timings.step(f"evaluate {label}") as note:
            done = run_retriever(
                registry, "evaluate_csv", name, documents, questions, index_root, cache_dir, encoder_for_spec, depth, latency_sample
            )
            runs[label] = done.timed
            note.append(_latency_note(done.timed, len(questions)))
    return runs


def encoder_for_spec(spec: object) -> object:
    """The real encoder a dense spec names (imported on first use: keyword search never loads torch)."""
    from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec as real

    return real(spec)


def _build_note(params: dict[str, object], n_docs: int) -> str:
    """What a build did: chunks embedded now and from the cache, or the vocabulary size."""
    if "embedded_now" in params:
        return f"{params['embedded_now']} chunks embedded now, {params.get('from_cache', 0)} from cache"
    if "n_terms" in params:
        return f"{n_docs} chunks, {params['n_terms']} terms"
    return f"{n_docs} chunks"


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
