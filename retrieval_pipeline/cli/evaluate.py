"""Score TREC run files against a qrels file, like trec_eval, and compare the runs.

Usage::

    python -m retrieval_pipeline.cli.evaluate qrels.txt a.run [b.run ...] [-m ndcg@10 -m recall@100] [-q]
        [--json out.json] [--test randomisation|t-test] [--permutations N] [--bootstrap N] [--seed N]

Prints a table of means per run (every qrels query counts; one missing from a run scores 0) and, with
two runs or more, every pair's delta, its 95% paired bootstrap CI, raw and Holm-corrected p-values and a
verdict line per metric (see :func:`retrieval_pipeline.api.compare`). ``--json`` writes the same as JSON.

Files as other tools write them: gzip (recognised by its magic bytes, whatever the name), qrels of three
columns (``qid docid grade``) or four. ``-m`` takes trec_eval's spellings and cut-off lists (``-m P.5,10``,
``-m ndcg_cut.10,20``) and several metrics in one argument (``-m "map ndcg@10"``, ``-m map,ndcg@10``); ``-q``
adds trec_eval's per-query lines (``measure<TAB>query_id<TAB>value``, every qrels query) before the means.

Bad input (unreadable or malformed file, unknown metric, an output path that cannot be written, a parameter
out of range) exits with code 2 and one line on stderr naming the file and line, or the option. A run that
is empty or shares no query with the qrels scores 0 everywhere: a ``warning:`` line on stderr says so.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from retrieval_pipeline.api import DEFAULT_METRICS, Evaluation, RunQrelsWarning, compare, evaluate, run_name
from retrieval_pipeline.cli.output_paths import check_output_file, write_output_text

#: trec_eval's width of the measure column.
TREC_EVAL_WIDTH = 22
#: A metric name's cut-off at its end, after ``@``, ``.`` or ``_`` (``P.5``, ``ndcg_cut.10``, ``hit@5``).
_CUTOFF_TAIL = re.compile(r"^(?P<prefix>.*[@._])(?P<k>[0-9]+)$")


def metric_arguments(values: Iterable[str]) -> list[str]:
    """The metric names of ``-m`` arguments: several per argument, and trec_eval's cut-off lists expanded.

    ``"P.5,10"`` gives ``P.5, P.10``; ``"ndcg_cut.10,20"`` gives ``ndcg_cut.10, ndcg_cut.20``; ``"map ndcg@10"`` and
    ``"map,ndcg@10"`` give ``map, ndcg@10``. Each name is then parsed by the API's metric-name parser.

    Raises:
        ValueError: A bare cut-off that follows no metric with a cut-off (``"map,10"``).
    """
    names: list[str] = []
    for value in values:
        for token in value.split():
            prefix = None
            for piece in filter(None, token.split(",")):
                if piece.isdigit():
                    if prefix is None:
                        raise ValueError(f"metric list {token!r}: cut-off {piece} follows no metric with a cut-off (write e.g. P.5,10)")
                    names.append(prefix + piece)
                    continue
                names.append(piece)
                match = _CUTOFF_TAIL.match(piece)
                prefix = match["prefix"] if match else None
    return names


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m retrieval_pipeline.cli.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("qrels", type=Path, help="TREC qrels file: query_id 0 doc_id grade, or query_id doc_id grade (gzip too)")
    parser.add_argument("runs", type=Path, nargs="+", help="TREC run files: query_id Q0 doc_id rank score tag (gzip too)")
    parser.add_argument(
        "-m",
        "--metric",
        action="append",
        dest="metrics",
        help=f"metric(s), any cut-off; trec_eval lists (P.5,10) and several in one argument (repeatable; default {' '.join(DEFAULT_METRICS)})",
    )
    parser.add_argument("-q", "--per-query", action="store_true", help="per-query values too, as trec_eval -q prints them")
    parser.add_argument("--json", type=Path, help="write the results as JSON to this file (its folder must exist)")
    parser.add_argument("--test", choices=("randomisation", "t-test"), default="randomisation")
    parser.add_argument("--permutations", type=int, default=10_000, help="sign flips of the randomisation test (1 to 1,000,000)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples of the CIs (1 to 1,000,000)")
    parser.add_argument("--seed", type=int, default=13)
    return parser


def per_query_lines(result: Evaluation) -> list[str]:
    """trec_eval ``-q``'s lines: ``measure<TAB>query_id<TAB>value`` per query (qrels order), measures in order."""
    width = max(TREC_EVAL_WIDTH, *(len(m) for m in result.per_query))
    query_ids = list(next(iter(result.per_query.values()), {}))
    return [f"{name:<{width}}\t{qid}\t{result.per_query[name][qid]:.4f}" for qid in query_ids for name in result.per_query]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        metrics = metric_arguments(args.metrics) if args.metrics else list(DEFAULT_METRICS)
        if args.json:
            check_output_file(args.json, "--json")  # before the work: a bad path is not found after minutes of resampling
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RunQrelsWarning)
            payload = _run(args, metrics)
        for warning in caught:
            if issubclass(warning.category, RunQrelsWarning):
                print(f"warning: {warning.message}", file=sys.stderr)
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        if args.json:
            write_output_text(args.json, json.dumps(payload, indent=2) + "\n", "--json")
            print(f"\nwrote {args.json}")
    except (ValueError, OSError) as error:  # InputError and OutputPathError are ValueErrors
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    return 0


def _run(args: argparse.Namespace, metrics: list[str]) -> dict:
    """Evaluate or compare, print the tables, and return the JSON payload."""
    if len(args.runs) == 1:
        result = evaluate(args.qrels, args.runs[0], metrics)
        if args.per_query:
            print("\n".join(per_query_lines(result)))
        print(f"runid\tall\t{run_name(args.runs[0])}\n{result}")
        return {"runs": [run_name(args.runs[0])], **result.to_dict(per_query=args.per_query)}
    comparison = compare(
        args.qrels, args.runs, metrics, test=args.test, n_permutations=args.permutations, n_bootstrap=args.bootstrap, seed=args.seed
    )
    if args.per_query:
        for run in comparison.runs:
            one = Evaluation(
                means={m: comparison.means[m][run] for m in comparison.metrics},
                per_query={m: comparison.per_query[m][run] for m in comparison.metrics},
                n_queries=comparison.n_queries,
            )
            print(f"runid\tall\t{run}\n" + "\n".join(per_query_lines(one)) + "\n")
    print(comparison)
    return comparison.to_dict(per_query=args.per_query)


if __name__ == "__main__":
    sys.exit(main())
