"""Score TREC run files against a qrels file, like trec_eval, and compare the runs.

Usage::

    python -m retrieval_pipeline.cli.evaluate qrels.txt a.run [b.run ...] [-m ndcg@10 -m recall@100]
        [--json out.json] [--test randomisation|t-test] [--permutations N] [--bootstrap N] [--seed N]

Prints a table of means per run (every qrels query counts; one missing from a run scores 0) and, with
two runs or more, every pair's delta, its 95% paired bootstrap CI, raw and Holm-corrected p-values and a
verdict line per metric (see :func:`retrieval_pipeline.api.compare`). ``--json`` writes the same as JSON.
Bad input (unreadable or malformed file, unknown metric) exits with code 2 and one line on stderr naming
the file and line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_pipeline.api import DEFAULT_METRICS, compare, evaluate


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m retrieval_pipeline.cli.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("qrels", type=Path, help="TREC qrels file: query_id 0 doc_id grade")
    parser.add_argument("runs", type=Path, nargs="+", help="TREC run files: query_id Q0 doc_id rank score tag")
    parser.add_argument(
        "-m", "--metric", action="append", dest="metrics", help=f"metric, any cut-off (repeatable; default {' '.join(DEFAULT_METRICS)})"
    )
    parser.add_argument("--json", type=Path, help="write the results as JSON to this file")
    parser.add_argument("--test", choices=("randomisation", "t-test"), default="randomisation")
    parser.add_argument("--permutations", type=int, default=10_000, help="sign flips of the randomisation test")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples of the CIs")
    parser.add_argument("--seed", type=int, default=13)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    metrics = args.metrics or list(DEFAULT_METRICS)
    try:
        if len(args.runs) == 1:
            result = evaluate(args.qrels, args.runs[0], metrics)
            print(f"runid\tall\t{args.runs[0].stem}\n{result}")
            payload = {"runs": [args.runs[0].stem], **result.to_dict()}
        else:
            comparison = compare(
                args.qrels, args.runs, metrics, test=args.test, n_permutations=args.permutations, n_bootstrap=args.bootstrap, seed=args.seed
            )
            print(comparison)
            payload = comparison.to_dict()
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
