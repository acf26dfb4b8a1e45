"""Dev numbers of registry retrievers on one dataset, through the pipeline's own factory, with paired CIs.

    python benchmarks/finetune_dev.py --dataset adk_v1_24_1 --retrievers dense_minilm,dense_minilm_ft \\
        --types api_understanding --cache-dir data/cache

Builds each retriever's index exactly as ``make run`` does (``factory.build_index`` with the real
encoders, the embedding and fine-tuned-model caches under ``--cache-dir``; a fine-tuned entry trains on
its first build and says how long it took), runs the dataset's resolved cases of ``--types`` at depth 100,
and prints hit@1, hit@5, MRR and nDCG@10 per retriever with 95% percentile-bootstrap CIs
(``stats.paired_bootstrap_ci``: the same resampled queries for every column), the paired difference of
each retriever to the first one with its CI, and the randomisation test's p-value.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = ("hit_rate@1", "hit_rate@5", "mrr", "ndcg@10")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--retrievers", default="dense_minilm,dense_minilm_ft")
    parser.add_argument("--types", default="api_understanding", help="case types evaluated (comma-separated; empty: all resolved)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "data" / "cache")
    parser.add_argument("--index-root", type=Path, default=None, help="where indexes are built (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import numpy as np

    from retrieval_pipeline.core.datasets import adapter_for
    from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
    from retrieval_pipeline.core.evaluation.stats import paired_bootstrap_ci, randomisation_test
    from retrieval_pipeline.core.pairs.build import build_pairs
    from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
    from retrieval_pipeline.core.pairs.gold import CorpusLookup
    from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
    from retrieval_pipeline.core.retrieval.encoders import encoder_for_spec
    from retrieval_pipeline.core.retrieval.factory import build_context, build_index, load_retriever, load_retriever_specs

    registry = load_registry()
    config = registry.datasets[args.dataset]
    adapter = adapter_for(config)
    documents = list(adapter.build_corpus(config).documents)
    types = {t for t in args.types.split(",") if t}
    cases = [c for c in adapter.load_cases(config).cases if not types or c.benchmark_type in types]
    builder = adapter.pair_builder(config, documents)
    pairs = [
        p for p in build_pairs(cases, CorpusLookup.from_documents(documents), AstTargetInferer(), builder, None) if p.status == "resolved"
    ]
    qrels = {p.query_id: dict(zip(p.gold_doc_ids, p.grades())) for p in pairs}
    specs = load_retriever_specs(Path(DEFAULT_REGISTRY_PATH).with_name("retrievers.yaml"))
    index_root = args.index_root or Path(tempfile.mkdtemp(prefix="ft-dev-"))
    names = args.retrievers.split(",")
    frames, built = {}, {}
    for name in specs.closure(names):
        started = time.perf_counter()
        ctx = build_context(specs, args.dataset, documents, index_root, args.cache_dir, encoder_for_spec, name, log=print)
        build_index(specs.get(name), ctx)
        built[name] = round(time.perf_counter() - started, 1)
        print(f"{name}: index built in {built[name]} s", flush=True)
    for name in names:
        retriever = load_retriever(specs, name, args.dataset, documents, index_root, args.cache_dir, encoder_for_spec)
        results = retriever.search([p.query for p in pairs], 100)
        run = {p.query_id: list(r) for p, r in zip(pairs, results)}
        frames[name] = per_query_metrics(run, qrels).set_index("query_id").loc[[p.query_id for p in pairs]]
    print(f"\n{args.dataset}: {len(pairs)} resolved {args.types or 'all'} cases; 95% percentile bootstrap CIs (2000 resamples, seed 13)")
    report: dict = {"dataset": args.dataset, "n_queries": len(pairs), "build_seconds": built, "metrics": {}}
    for metric in METRICS:
        matrix = np.column_stack([frames[n][metric].to_numpy(dtype=float) for n in names])
        low, high = paired_bootstrap_ci(matrix)
        cells = [f"{n} {matrix[:, i].mean():.3f} [{low[i]:.3f}, {high[i]:.3f}]" for i, n in enumerate(names)]
        line = f"{metric:<11} " + " | ".join(cells)
        entry = {n: [float(matrix[:, i].mean()), float(low[i]), float(high[i])] for i, n in enumerate(names)}
        for i, n in enumerate(names[1:], start=1):
            diff = matrix[:, i] - matrix[:, 0]
            d_low, d_high = paired_bootstrap_ci(diff)
            p = randomisation_test(matrix[:, i], matrix[:, 0])
            line += f" | {n} - {names[0]}: {diff.mean():+.3f} [{d_low:+.3f}, {d_high:+.3f}] p={p:.4f}"
            entry[f"{n}-{names[0]}"] = [float(diff.mean()), float(d_low), float(d_high), float(p)]
        report["metrics"][metric] = entry
        print(line)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
