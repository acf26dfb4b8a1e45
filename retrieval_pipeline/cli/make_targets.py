"""``make add-retriever``'s arguments, validated before anything runs, and never pasted into a shell.

The Makefile used to paste ``$(RETRIEVER)`` and ``$(DATASETS)`` unquoted into its recipe, so
``RETRIEVER='bm25; touch FILE'`` ran the command, ``RETRIEVER='bm25 --out-dir X'`` passed the flag on, and make
exited 0 though the run it started had FAILED (the last command of the line was the injected one). Now the
recipe runs ``python -m retrieval_pipeline.cli.make_targets add-retriever``; make exports ``RETRIEVER`` and
``DATASETS`` to its environment, and this module checks them (a retriever name as the registry allows one; each
dataset a plain name, none starting with ``-``) before it calls :func:`retrieval_pipeline.cli.run.main` with an
argument list. A refused value is one ``error:`` line and exit code 2; otherwise the run's exit code is make's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.paths import check_name
from retrieval_pipeline.core.retrieval.spec import NAME_PATTERN

USAGE = "usage: make add-retriever RETRIEVER=<name in data/config/retrievers.yaml> [DATASETS='<dataset> ...']"


class MakeArgumentError(ValueError):
    """A make variable that is not what the target takes; nothing was run."""


def add_retriever_argv(env: Mapping[str, str]) -> list[str]:
    """``cli.run``'s arguments from ``RETRIEVER`` and ``DATASETS`` (space-separated).

    Raises:
        MakeArgumentError: ``RETRIEVER`` missing, or either variable holding anything but names.
    """
    retriever = env.get("RETRIEVER", "").strip()
    if not retriever:
        raise MakeArgumentError(USAGE)
    if not NAME_PATTERN.fullmatch(retriever) or ".." in retriever:
        raise MakeArgumentError(
            f"RETRIEVER={retriever[:80]!r} is not a retriever name (letters, digits and _ . -, starting with a letter or digit): "
            f"nothing was run. {USAGE}"
        )
    datasets = env.get("DATASETS", "").split()
    if not datasets:
        raise MakeArgumentError(f"DATASETS is empty: name the dataset(s) to add {retriever} to. {USAGE}")
    for dataset in datasets:
        try:
            check_name(dataset, "a dataset in DATASETS")
        except InputError as exc:
            raise MakeArgumentError(f"{exc}: nothing was run") from None
    return ["--datasets", *datasets, "--add-retriever", retriever]


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """``make_targets add-retriever``: validate, then run; the exit code is the run's (2 for refused variables)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["add-retriever"]:
        print(
            "usage: python -m retrieval_pipeline.cli.make_targets add-retriever (RETRIEVER and DATASETS from the environment)",
            file=sys.stderr,
        )
        return 2
    try:
        run_args = add_retriever_argv(os.environ if env is None else env)
    except MakeArgumentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from retrieval_pipeline.cli.run import main as run_main  # the definitions load only for valid arguments

    return run_main(run_args)


if __name__ == "__main__":
    sys.exit(main())
