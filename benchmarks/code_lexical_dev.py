"""Code-aware lexical retrieval against the registry's retrievers, with paired CIs, and a 3-way fusion tuned on a dev half.

    python benchmarks/code_lexical_dev.py --datasets adk_v1_24_1,stdlib --cache-dir /tmp/cl-cache

For each dataset: build every retriever of ``--retrievers`` through the pipeline's factory (as ``make run``
does; the embedding cache under ``--cache-dir``), rank the resolved cases at depth 100 and print, for all of
them and per benchmark type, hit@1, hit@5, MRR and nDCG@10 of each retriever with 95% percentile-bootstrap
CIs (``stats.paired_bootstrap_ci``: one draw of queries for every column), the paired difference to
``--reference`` with its CI, and the randomisation test's p-value (Holm-adjusted over the retrievers per
metric, ``stats.holm``). Build and search seconds per retriever say what each costs a run.

Then each fusion of ``--fuse`` (groups of components, three or more for this issue) is tuned without seeing the queries it is scored
on: the queries are split into a dev and a test half by the pipeline's own keyed hash
(``tuning.split_queries``, seed 13, half each); the min-max weights on a simplex grid (step ``--step``) are
chosen on dev by nDCG@10 (ties: the more even weights, then grid order), and the test half alone is
reported for the chosen weights, equal weights, RRF k=60 and each component.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from retrieval_pipeline.core.datasets import adapter_for  # noqa: E402
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics  # noqa: E402
from retrieval_pipeline.core.evaluation.statistics.stats import holm, paired_bootstrap_ci, randomisation_test  # noqa: E402
from retrieval_pipeline.core.evaluation.tuning.fusion_sweep import split_queries  # noqa: E402
from retrieval_pipeline.core.pairs.build import build_pairs  # noqa: E402
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer  # noqa: E402
from retrieval_pipeline.core.pairs.gold import CorpusLookup  # noqa: E402
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry  # noqa: E402
from retrieval_pipeline.core.retrieval.engines.fusion import minmax_fuse, rrf_fuse  # noqa: E402
from retrieval_pipeline.core.retrieval.factory import build_context, build_index, load_retriever, load_retriever_specs  # noqa: E402
from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec  # noqa: E402

METRICS = ("hit_rate@1", "hit_rate@5", "mrr", "ndcg@10")
RETRIEVERS = "dense_minilm,bm25,bm25_code,code_lexical,code_lexical_usage,hybrid_minmax_a0.5,hybrid_rrf_k60,hybrid_rrf3_code"
DEPTH = 100


def dataset_runs(dataset: str, names: list[str], index_root: Path, cache_dir: Path) -> tuple[dict, dict, dict, dict]:
    """Build ``names`` (components first) for ``dataset``; return its qrels, each query's type, runs and timings."""
    registry = load_registry()
    config = registry.datasets[dataset]
    adapter = adapter_for(config)
    documents = list(adapter.build_corpus(config).documents)
    cases = list(adapter.load_cases(config).cases)
    builder = adapter.pair_builder(config, documents)
    lookup = CorpusLookup.from_documents(documents)
    pairs = [p for p in build_pairs(cases, lookup, AstTargetInferer(), builder, None) if p.status == "resolved"]
    qrels = {p.query_id: dict(zip(p.gold_doc_ids, p.grades())) for p in pairs}
    types = {p.query_id: p.benchmark_type for p in pairs}
    specs = load_retriever_specs(Path(DEFAULT_REGISTRY_PATH).with_name("retrievers.yaml"))
    timings: dict[str, dict[str, float]] = {}
    for name in specs.closure(names):
        started = time.perf_counter()
        ctx = build_context(specs, dataset, documents, index_root, cache_dir, encoder_for_spec, name)
        build_index(specs.get(name), ctx)
        timings[name] = {"build_s": round(time.perf_counter() - started, 2)}
    runs = {}
    for name in specs.closure(names):
        retriever = load_retriever(specs, name, dataset, documents, index_root, cache_dir, encoder_for_spec)
        started = time.perf_counter()
        results = retriever.search([p.query for p in pairs], DEPTH)
        timings[name]["search_s"] = round(time.perf_counter() - started, 2)
        runs[name] = {p.query_id: list(r) for p, r in zip(pairs, results)}
    return qrels, types, runs, timings


def frame_of(run: dict, qrels: dict, query_ids: list[str]) -> pd.DataFrame:
    return per_query_metrics({q: run[q] for q in query_ids}, {q: qrels[q] for q in query_ids}).set_index("query_id").loc[query_ids]


def table(title: str, runs: dict, qrels: dict, query_ids: list[str], names: list[str], reference: str) -> None:
    """Print mean [CI] per retriever and the paired difference to ``reference`` (CI, Holm-adjusted p)."""
    frames = {n: frame_of(runs[n], qrels, query_ids) for n in names}
    print(f"\n{title}: {len(query_ids)} queries; 95% percentile bootstrap CIs (2000 resamples, seed 13); delta vs {reference}")
    others = [n for n in names if n != reference]
    width = max(map(len, names))
    for metric in METRICS:
        matrix = np.column_stack([frames[n][metric].to_numpy(dtype=float) for n in names])
        low, high = paired_bootstrap_ci(matrix)
        base = matrix[:, names.index(reference)]
        raw_p = [randomisation_test(matrix[:, names.index(n)], base) for n in others]
        adjusted = dict(zip(others, holm(raw_p))) if others else {}
        print(f"  {metric}")
        for i, name in enumerate(names):
            line = f"    {name:<{width}} {matrix[:, i].mean():.3f} [{low[i]:.3f}, {high[i]:.3f}]"
            if name != reference:
                diff = matrix[:, i] - base
                d_low, d_high = paired_bootstrap_ci(diff)
                line += f"   {diff.mean():+.3f} [{d_low:+.3f}, {d_high:+.3f}] p_holm={adjusted[name]:.4f}"
            print(line)


def simplex(n: int, step: float) -> list[tuple[float, ...]]:
    """Every weight vector of ``n`` non-negative multiples of ``step`` summing to 1."""
    units = round(1 / step)
    return [tuple(c / units for c in combo) for combo in itertools.product(range(units + 1), repeat=n) if sum(combo) == units]


def fused_run(runs: dict, parts: list[str], query_ids: list[str], weights: tuple[float, ...] | None) -> dict:
    """``minmax_fuse`` with ``weights`` (``None``: ``rrf_fuse`` with k = 60) of the components' stored runs."""
    fused = {}
    for q in query_ids:
        lists = [runs[p][q] for p in parts]
        fused[q] = (minmax_fuse(lists, weights) if weights is not None else rrf_fuse(lists, 60))[:DEPTH]
    return fused


def tuned_fusion(dataset: str, runs: dict, qrels: dict, parts: list[str], reference: str, step: float) -> None:
    """Choose the fusion weights of ``parts`` on the dev half by nDCG@10; print the test half only."""
    dev, test = split_queries(list(qrels), seed=13, dev_share=0.5)
    if not dev or not test:
        print(f"\n{dataset}: too few queries to split for tuning")
        return
    even = tuple(1 / len(parts) for _ in parts)

    def dev_score(weights: tuple[float, ...]) -> float:
        return float(frame_of(fused_run(runs, parts, dev, weights), qrels, dev)["ndcg@10"].mean())

    grid = simplex(len(parts), step)
    scored = [(dev_score(w), -max(abs(a - b) for a, b in zip(w, even)), -i, w) for i, w in enumerate(grid)]
    best = max(scored)
    chosen = best[3]
    print(f"\n{dataset}: minmax weights of {parts} chosen on the dev half ({len(dev)} queries, {len(grid)} grid points):")
    print(f"  chosen {list(chosen)} (dev nDCG@10 {best[0]:.3f}); equal weights dev nDCG@10 {dev_score(even):.3f}")
    test_runs = {n: runs[n] for n in dict.fromkeys([reference, *parts])}
    test_runs[f"minmax{len(parts)}_tuned"] = fused_run(runs, parts, test, chosen)
    test_runs[f"minmax{len(parts)}_equal"] = fused_run(runs, parts, test, even)
    test_runs[f"rrf{len(parts)}_k60"] = fused_run(runs, parts, test, None)
    table(f"{dataset} TEST half (settings chosen on the dev half)", test_runs, qrels, test, list(test_runs), reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--datasets", default="adk_v1_24_1,stdlib")
    parser.add_argument("--retrievers", default=RETRIEVERS)
    parser.add_argument("--reference", default="dense_minilm")
    parser.add_argument(
        "--fuse",
        default="code_lexical,bm25_code,dense_minilm",
        help="components of each tuned fusion, groups separated by ';' (empty: none)",
    )
    parser.add_argument("--step", type=float, default=0.1, help="grid step of the fusion weights")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "data" / "cache")
    parser.add_argument("--index-root", type=Path, default=None, help="where indexes are built (default: a temporary folder)")
    args = parser.parse_args(argv)
    names = args.retrievers.split(",")
    groups = [[p for p in group.split(",") if p] for group in args.fuse.split(";")]
    groups = [g for g in groups if len(g) >= 2]
    fused_parts = [p for g in groups for p in g]
    index_root = args.index_root or Path(tempfile.mkdtemp(prefix="code-lexical-"))
    for dataset in args.datasets.split(","):
        qrels, types, runs, timings = dataset_runs(dataset, list(dict.fromkeys([*names, *fused_parts])), index_root, args.cache_dir)
        print(f"\n=== {dataset}: seconds to build the index (components included once) and to rank {len(qrels)} queries")
        for name, seconds in timings.items():
            print(f"  {name:<22} build {seconds['build_s']:>7.2f}   search {seconds['search_s']:>7.2f}")
        table(f"{dataset} all resolved", runs, qrels, list(qrels), names, args.reference)
        for kind in sorted(set(types.values())):
            ids = [q for q in qrels if types[q] == kind]
            if len(ids) >= 5 and len(ids) < len(qrels):
                table(f"{dataset} {kind}", runs, qrels, ids, names, args.reference)
        for parts in groups:
            tuned_fusion(dataset, runs, qrels, parts, args.reference, args.step)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
