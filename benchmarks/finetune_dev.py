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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_eval import build_indexes, dev_pairs, paired_table, per_query, registry_specs, table_lines  # noqa: E402

from retrieval_pipeline.core.retrieval.factory import parse_spec  # noqa: E402


def main(argv: list[str] | None = None, extra_specs: dict[str, dict] | None = None) -> int:
    """Run it; ``extra_specs`` (``{name: settings}``, as in ``retrievers.yaml``) are built beside the registry's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--retrievers", default="dense_minilm,dense_minilm_ft")
    parser.add_argument("--types", default="api_understanding", help="case types evaluated (comma-separated; empty: all resolved)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "data" / "cache")
    parser.add_argument("--index-root", type=Path, default=None, help="where indexes are built (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    specs = registry_specs()
    for name, settings in (extra_specs or {}).items():
        specs.specs[name] = parse_spec(name, settings)
    dev = dev_pairs(args.dataset, {t for t in args.types.split(",") if t})
    index_root = args.index_root or Path(tempfile.mkdtemp(prefix="ft-dev-"))
    names = args.retrievers.split(",")
    built = build_indexes(specs, names, dev, index_root, args.cache_dir)
    frames = per_query(specs, names, dev, index_root, args.cache_dir)
    table = paired_table(frames, names)
    print(
        f"\n{args.dataset}: {len(dev.pairs)} resolved {args.types or 'all'} cases; 95% percentile bootstrap CIs (2000 resamples, seed 13)"
    )
    for line in table_lines(table, names):
        print(line)
    if args.json:
        report = {
            "dataset": args.dataset,
            "n_queries": len(dev.pairs),
            "build_seconds": {n: b["wall_seconds"] for n, b in built.items()},
            "metrics": table,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
