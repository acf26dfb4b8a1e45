"""The regression gate on real runs, in its two cases: a deliberately degraded BM25, and tie order shuffled.

For each dataset materialised under ``data/out`` (corpus and retrieval_dataset Parquet), BM25 is built
in memory with the registry's settings (k1 1.5, b 0.75) as the blessed evaluation, and two variants
as the new one: ``b = 0`` (no length normalisation; not always worse: on API docs it can help) and
BM25 over the first 8 words of each document (a deliberate degradation). The gate must alert exactly when the
drop is significant and at least ``min_drop``, and list the flipped queries.
Then the blessed run is re-ranked with its equal-score hits shuffled (seeded): the ranking is equally
correct, so the gate must stay quiet. Everything printed is measured in this one run.

    .venv/bin/python benchmarks/regression_gate_demo.py --datasets stdlib python_nq adk_v1_24_1
    .venv/bin/python benchmarks/regression_gate_demo.py --datasets stdlib --k1 1.5 --b 0.0
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval_pipeline.core.common.types import Qrels, Run  # noqa: E402
from retrieval_pipeline.core.evaluation.checks.regression import DriftSettings, regression_gate  # noqa: E402
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics  # noqa: E402
from retrieval_pipeline.core.filtering.retrieval_dataset import qrels_from_records  # noqa: E402
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever  # noqa: E402

OUT = ROOT / "data" / "out"


def per_query(name: str, run: Run, qrels: Qrels) -> pd.DataFrame:
    frame = per_query_metrics(run, qrels)
    frame.insert(0, "retriever", name)
    return frame


def bm25_run(corpus: pd.DataFrame, queries: dict[str, str], k1: float, b: float, depth: int = 100, words: int | None = None) -> Run:
    """BM25 over each document's text, or over its first ``words`` words only (a deliberate degradation)."""
    texts = [str(t) if words is None else " ".join(str(t).split()[:words]) for t in corpus["text"]]
    index = BM25Retriever.build(list(corpus["doc_id"]), texts, k1=k1, b=b)
    ids = list(queries)
    return dict(zip(ids, index.search([queries[q] for q in ids], depth)))


def shuffle_ties(run: Run, seed: int) -> tuple[Run, int]:
    """Each query's hits with equal scores put in a random order; returns the run and the queries whose order changed."""
    rng = random.Random(seed)
    out: Run = {}
    changed = 0
    for qid, hits in run.items():
        groups: dict[float, list] = {}
        for hit in hits:
            groups.setdefault(round(hit[1], 9), []).append(hit)
        shuffled = []
        for score in sorted(groups, reverse=True):
            group = groups[score][:]
            rng.shuffle(group)
            shuffled += group
        changed += shuffled != list(hits)
        out[qid] = shuffled
    return out, changed


def demo(dataset: str, k1: float, b: float, settings: DriftSettings, seed: int) -> None:
    corpus = pd.read_parquet(OUT / "corpus" / f"{dataset}.parquet")
    records = pd.read_parquet(OUT / "retrieval_dataset" / f"{dataset}.parquet").to_dict("records")
    qrels = qrels_from_records(records)
    queries = {r["id"]: r["query"] for r in records if r["id"] in qrels}
    blessed_run = bm25_run(corpus, queries, 1.5, 0.75)
    blessed = per_query("bm25", blessed_run, qrels)
    degraded = per_query("bm25", bm25_run(corpus, queries, k1, b), qrels)
    titles = per_query("bm25", bm25_run(corpus, queries, 1.5, 0.75, words=8), qrels)
    tied_run, changed = shuffle_ties(blessed_run, seed)
    tied = per_query("bm25", tied_run, qrels)

    print(
        f"\n== {dataset}: {len(queries)} queries, {len(corpus)} documents; gate on {settings.metric}, alpha {settings.alpha}, min drop {settings.min_drop}"
    )
    cases = (
        (f"BM25 k1={k1} b={b}", degraded),
        ("BM25 over the first 8 words of each document", titles),
        (f"tie order shuffled ({changed} queries reordered)", tied),
    )
    for label, current in cases:
        report = regression_gate(current, blessed, ["bm25"], settings)
        row = report.frame.iloc[0].to_dict()
        verdict = "ALERT" if not report.passed else "no alert"
        print(f"-- {label}: {verdict}")
        print("   " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items() if k != "retriever"))
        flipped = report.flipped
        if len(flipped):
            print(f"   flipped queries ({len(flipped)}), first 10 (old rank -> new rank):")
            for f in flipped.head(10).to_dict("records"):
                print(f"     {f['query_id']}: {f['old_rank']} -> {f['new_rank']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["stdlib", "python_nq", "adk_v1_24_1"])
    parser.add_argument("--k1", type=float, default=1.5)
    parser.add_argument("--b", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--min-drop", type=float, default=DriftSettings().min_drop)
    args = parser.parse_args()
    settings = DriftSettings(min_drop=args.min_drop, seed=args.seed)
    missing = [d for d in args.datasets if not (OUT / "corpus" / f"{d}.parquet").exists()]
    if missing:
        print(f"not materialised under {OUT} (run `make run DATASETS=...` first): {', '.join(missing)}")
    for dataset in args.datasets:
        if dataset not in missing:
            demo(dataset, args.k1, args.b, settings, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
