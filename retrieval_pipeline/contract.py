"""Check a retriever plug-in against the retriever contract: ``python -m retrieval_pipeline.contract pkg.mod:factory``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from retrieval_pipeline.core.retrieval.contract import check_contract
from retrieval_pipeline.core.retrieval.kinds.python import import_factory


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when the plug-in satisfies the contract, 1 when it does not, 2 when it cannot be imported."""
    parser = argparse.ArgumentParser(prog="python -m retrieval_pipeline.contract", description=__doc__)
    parser.add_argument("factory", help="package.module:factory, as in retrievers.yaml")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a keyword argument for the factory (VALUE parsed as JSON when it can be)",
    )
    args = parser.parse_args(argv)
    try:
        factory = import_factory(args.factory)
        params = dict(_param(p) for p in args.param)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = check_contract(factory, params, label=args.factory)
    print(report.summary())
    return 0 if report.passed else 1


def _param(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError(f"--param {text!r}: expected NAME=VALUE")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


if __name__ == "__main__":
    raise SystemExit(main())
