"""``compare`` (and ``evaluate``) on the full MS MARCO-dev-shaped set, in memory and from TREC files (issue 38, item 3).

``peers.py`` runs the peers side by side, which at 7,000 queries takes ranx far too long; this script times only this
project on the full set: ``peers.synthetic_set`` (7,000 queries x 1,000 documents x 10 runs, graded qrels), then

* ``evaluate`` of the 10 runs in memory (the five metrics of ``peers.py``);
* ``compare`` in memory: all 45 pairs x 4 metrics, 10,000 permutations, with its bootstrap CIs;
* the same ``compare`` from the ten TREC run files and the qrels file, written to a temporary folder (untimed) and
  read by a fresh process, so that its peak memory is its own;

with the peak memory (``ru_maxrss``; in memory, the set's dicts are included).

    .venv/bin/python benchmarks/compare_full_scale.py            # the full set
    .venv/bin/python benchmarks/compare_full_scale.py --queries 700
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402


def _peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--queries", type=int, default=7000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--from-files", default=None, help=argparse.SUPPRESS)  # the child: compare the folder's files
    args = parser.parse_args(argv)
    if args.from_files:
        folder = Path(args.from_files)
        start = time.perf_counter()
        runs = sorted(folder.glob("run*.txt"))
        peers.ours_compare(folder / "qrels.txt", runs, args.permutations)
        print(f"compare from the {len(runs)} TREC run files: {time.perf_counter() - start:.1f} s; peak {_peak_mib():,} MiB", flush=True)
        return 0
    start = time.perf_counter()
    data = peers.synthetic_set(args.queries, args.depth, args.runs)
    print(f"set: {args.queries:,} queries x {args.depth:,} docs x {args.runs} runs, generated in {time.perf_counter() - start:.1f} s "
          f"(untimed below); peak {_peak_mib():,} MiB", flush=True)  # fmt: skip
    start = time.perf_counter()
    for run in data.runs.values():
        peers.ours_means(data.qrels, run)
    print(f"evaluate in memory, {args.runs} runs x 5 metrics: {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    peers.compare(data.qrels, data.runs, peers.COMPARE_METRICS[0], n_permutations=args.permutations)
    n_pairs = args.runs * (args.runs - 1) // 2
    print(f"compare in memory, {n_pairs} pairs x {len(peers.COMPARE_METRICS[0])} metrics x {args.permutations:,} permutations: "
          f"{time.perf_counter() - start:.1f} s; peak {_peak_mib():,} MiB", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="compare-full-") as folder:
        peers.write_files(data, Path(folder))
        del data
        child = [sys.executable, __file__, "--from-files", folder, "--runs", str(args.runs), "--permutations", str(args.permutations)]
        return subprocess.run(child, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
