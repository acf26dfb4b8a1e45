"""``evaluate`` and ``compare`` against pytrec_eval and ir_measures on a synthetic set of MS MARCO dev's shape.

A quick side-by-side of the metric kernels (``benchmarks/peers.py`` is the full one): seeded synthetic
qrels (graded 0-3, 1-8 judged documents per query) and runs (``--docs`` documents per query, float32-ish
scores with some ties, about half the judged documents retrieved), then, in the same process and back to
back:

* in memory: ``evaluate`` against ``pytrec_eval.RelevanceEvaluator`` (built once, as a user would) on the
  same dicts, for each run; the means are checked equal;
* from files: ``evaluate`` on TREC paths against ``ir_measures`` reading the same files
  (``ir_measures.read_trec_qrels`` / ``read_trec_run`` and ``calc_aggregate``);
* ``compare`` of all runs (all pairs, 4 metrics, ``--permutations`` sign flips), with its wall time.

Each line prints both times and the ratio; the machine may be loaded, so the ratios are what count.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/metrics_speed.py                     # 7,000 x 1,000 x 10
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/metrics_speed.py --queries 500 --runs 2   # a quick look
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_pipeline import compare, evaluate
from retrieval_pipeline.core.evaluation.exports.trec_writer import write_trec_qrels

METRICS = ["ndcg@10", "mrr@10", "recall@100", "map"]
PYTREC = {"ndcg_cut_10", "recall_100", "map"}
IR_MEASURES = ["nDCG@10", "RR@10", "R@100", "AP"]


def synthetic_qrels(n_queries: int, corpus: list[str], seed: int = 0) -> dict[str, dict[str, int]]:
    """``{qid: {docid: grade}}``: 1-8 judged documents per query, grades 0-3, at least one relevant."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    for q in range(n_queries):
        judged = rng.choice(len(corpus), size=int(rng.integers(1, 9)), replace=False)
        grades = rng.integers(0, 4, size=len(judged))
        grades[0] = max(1, grades[0])
        qrels[f"q{q}"] = {corpus[d]: int(g) for d, g in zip(judged.tolist(), grades.tolist())}
    return qrels


def synthetic_run(qrels: dict[str, dict[str, int]], corpus: list[str], n_docs: int, seed: int) -> dict[str, dict[str, float]]:
    """``{qid: {docid: score}}``: ``n_docs`` per query, about half the judged ones among them, scores rounded to 3 decimals (ties)."""
    rng = np.random.default_rng(seed)
    run: dict[str, dict[str, float]] = {}
    for q, judged in qrels.items():
        keep = [d for d in judged if rng.random() < 0.5]
        sampled = [corpus[i] for i in rng.choice(len(corpus), size=n_docs, replace=False).tolist()]
        ids = list(dict.fromkeys(keep + sampled))[:n_docs]
        run[q] = dict(zip(ids, np.round(rng.normal(size=len(ids)), 3).tolist()))
    return run


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def write_run(run: dict, path: Path) -> None:
    with path.open("w") as handle:
        for q, hits in run.items():
            ranked = sorted(hits.items(), key=lambda h: (-h[1], h[0]))
            handle.writelines(f"{q} Q0 {d} {r} {s!r} x\n" for r, (d, s) in enumerate(ranked, start=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=7000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--skip", nargs="*", default=[], choices=["memory", "files", "compare"])
    args = parser.parse_args()
    import ir_measures
    import pytrec_eval

    corpus = [f"d{i}" for i in range(8 * args.docs)]
    qrels = synthetic_qrels(args.queries, corpus)
    print(f"{args.queries} queries x {args.docs} docs x {args.runs} runs, one run in memory at a time")
    memory = {"ours": 0.0, "pytrec_eval": 0.0}
    files = {"ours": 0.0, "ir_measures": 0.0}
    measures = [ir_measures.parse_measure(m) for m in IR_MEASURES]
    with tempfile.TemporaryDirectory() as folder:
        qrels_path = write_trec_qrels(qrels, Path(folder) / "qrels.txt")
        evaluator, memory["pytrec_eval"] = timed(lambda: pytrec_eval.RelevanceEvaluator(qrels, PYTREC))
        paths = []
        for i in range(args.runs):
            run = synthetic_run(qrels, corpus, args.docs, seed=i + 1)
            paths.append(Path(folder) / f"run{i}.txt")
            write_run(run, paths[-1])
            if "memory" not in args.skip:
                in_memory(qrels, run, evaluator, memory)
            del run
            if "files" not in args.skip:
                from_files(qrels_path, paths[-1], measures, files)
        if "memory" not in args.skip:
            print(ratio("in memory", memory, "pytrec_eval"))
        if "files" not in args.skip:
            print(ratio("from files", files, "ir_measures"))
        print(f"peak RSS so far: {rss_mb():.0f} MB")
        if "compare" not in args.skip:
            result, took = timed(lambda: compare(qrels_path, paths, METRICS, n_permutations=args.permutations))
            print(f"compare from files: {len(paths)} runs, {len(result.pairs)} pair tests, {args.permutations} sign flips: {took:.2f} s")
            print(f"peak RSS: {rss_mb():.0f} MB")


def in_memory(qrels: dict, run: dict, evaluator: Any, times: dict[str, float]) -> None:
    """Add the times of ``evaluate`` and of pytrec_eval on ``run`` to ``times``; check their nDCG@10 means agree."""
    ours, took = timed(lambda: evaluate(qrels, run, METRICS))
    times["ours"] += took
    peer, took = timed(lambda: evaluator.evaluate(run))
    times["pytrec_eval"] += took
    mean = sum(v["ndcg_cut_10"] for v in peer.values()) / len(qrels)
    assert abs(mean - ours["ndcg@10"]) < 1e-12, (mean, ours["ndcg@10"])


def from_files(qrels_path: Path, run_path: Path, measures: list, times: dict[str, float]) -> None:
    """Add the times of ``evaluate`` and of ir_measures (reading both files each time) on the run file to ``times``."""
    import ir_measures

    _, took = timed(lambda: evaluate(qrels_path, run_path, METRICS))
    times["ours"] += took
    read = (ir_measures.read_trec_qrels, ir_measures.read_trec_run)
    _, took = timed(lambda: ir_measures.calc_aggregate(measures, read[0](str(qrels_path)), read[1](str(run_path))))
    times["ir_measures"] += took


def ratio(what: str, times: dict[str, float], peer: str) -> str:
    return (
        f"{what}: evaluate {times['ours']:.2f} s, {peer} {times[peer]:.2f} s: ours is {times[peer] / times['ours']:.2f}x the peer's speed"
    )


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
