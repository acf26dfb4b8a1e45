"""What the worker process of a ``kind: python`` plug-in costs: the tfidf example on the stdlib sample, both ways.

As the pipeline calls a plug-in for one dataset: the index step (the factory, ``build`` of the corpus, ``save``),
then the runs step (the factory, ``load``, one ``search`` batch of every question at depth 100, then ``--single``
questions one at a time: the latency sample). In process (the plug-in object called directly, as before issue 39)
against through its worker process (``PythonSpec.build`` / ``PythonSpec.load`` now). Each way runs in a fresh Python
process (so each pays its imports once, as a ``make run`` does), ``--repeats`` times, alternating; medians and ratios.

    .venv/bin/python benchmarks/plugin_isolation.py [--repeats 5] [--single 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("index step", "runs step: load", "batch search", "single searches", "total")


def measure(way: str, single: int) -> dict[str, float]:
    """One way's phase times, in this (fresh) process."""
    from retrieval_pipeline.core.datasets.inputs import build_corpus, load_cases
    from retrieval_pipeline.core.registry import load_registry
    from retrieval_pipeline.core.retrieval.spec import RetrieverContext

    registry = load_registry()
    config = registry.get("stdlib")
    docs = build_corpus(config).documents
    queries = [case.query for case in load_cases(config).cases]
    spec = registry.retrievers.get("tfidf_plugin")
    t: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        ctx = RetrieverContext("stdlib", docs, Path(folder), Path(folder), lambda _: None, lambda _: None)
        start = time.perf_counter()
        if way == "in_process":
            plugin = spec.instance()
            plugin.build(ctx.doc_ids, ctx.texts)
            plugin.save(Path(folder) / "plugin_saved")
            t["index step"] = time.perf_counter() - start
            plugin = spec.instance()
            plugin.load(Path(folder) / "plugin_saved")
        else:
            spec.build(ctx)
            t["index step"] = time.perf_counter() - start
            plugin = spec.load(ctx)
        t["runs step: load"] = time.perf_counter() - start - t["index step"]
        mark = time.perf_counter()
        plugin.search(queries, 100)
        t["batch search"] = time.perf_counter() - mark
        mark = time.perf_counter()
        for q in queries[:single]:
            plugin.search([q], 100)
        t["single searches"] = time.perf_counter() - mark
        t["total"] = time.perf_counter() - start
        if way == "worker":
            plugin.close()
    t["documents"], t["questions"] = len(docs), len(queries)
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--single", type=int, default=50)
    parser.add_argument("--way", choices=("in_process", "worker"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.way:
        print(json.dumps(measure(args.way, args.single)))
        return
    rows: dict[str, list[dict[str, float]]] = {"in_process": [], "worker": []}
    for _ in range(args.repeats):
        for way in rows:
            command = [sys.executable, __file__, "--way", way, "--single", str(args.single)]
            done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
            rows[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = rows["worker"][0]
    print(f"stdlib: {int(first['documents'])} documents, {int(first['questions'])} questions; {args.single} single-question searches")
    print(f"{'phase':<18} {'in process':>11} {'worker':>9} {'ratio':>6}  (median of {args.repeats} fresh processes each, seconds)")
    for phase in PHASES:
        a = statistics.median(r[phase] for r in rows["in_process"])
        b = statistics.median(r[phase] for r in rows["worker"])
        print(f"{phase:<18} {a:>11.3f} {b:>9.3f} {b / a:>6.2f}")
    per_call = statistics.median(r["single searches"] for r in rows["worker"]) - statistics.median(
        r["single searches"] for r in rows["in_process"]
    )
    print(f"worker overhead per single-question search: {per_call / max(args.single, 1) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
