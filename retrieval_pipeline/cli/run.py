"""Materialise the asset graph per dataset, show progress, and print what came out.

Usage::

    python -m retrieval_pipeline.cli.run --datasets stdlib python_nq python_reference_qa
        [--select '*'] [--config-json JSON] [--log data/out/logs/run-<timestamp>.log] [--out-dir DIR] [--cache-dir DIR]

One Dagster run per dataset partition (:mod:`.materialise`), on the job ``dagster asset materialize`` runs (the implicit
``__ASSET_JOB`` of :func:`retrieval_pipeline.definitions.defs`, with its resources, in one process),
against the persistent instance of ``DAGSTER_HOME``: runs, materialisations and check results land in
the instance as with the CLI, so the drift check and the alert sensor read them. ``--select`` takes the
CLI's syntax (comma-separated; ``*`` is everything, ``retrieval_runs*`` an asset and what is downstream),
``--config-json`` the same run config (e.g. ``{"ops": {"retrieval_runs": {"config": {"sample_size": 20}}}}``).

The terminal shows one line per finished step (stage, assets, seconds). The full Dagster event stream
(every event the instance stores, DEBUG included, read as it is stored), Dagster's own logging and
Python warnings go to the log file; the console logger of the run is set to CRITICAL. Then, per
dataset (:mod:`retrieval_pipeline.cli.console`): retrievers x hit@1, hit@5, MRR and nDCG@10 (best per
column marked ``*``), a verdict line per metric on every pair of retrievers, the failed checks with
their numbers, and where the exports and the quality report are.

Exit code, as ``dagster asset materialize``'s: 0 when every run succeeded, 1 when a run failed (a failing
blocking check, e.g. an ERROR metric floor, fails its run), after the whole summary; 2 for bad arguments
(unknown dataset, invalid selection). Failed checks that do not fail a run (WARN floors, drift, the
non-blocking ``no_incorrect_questions``) are listed, with their severity, and leave the exit code 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TextIO

import dagster as dg

from retrieval_pipeline.cli.console import format_summary, shown_path
from retrieval_pipeline.cli.output_paths import OutputPathError, check_output_file, check_output_folder
from retrieval_pipeline.cli.progress import bars_on_the_terminal, quiet_progress_bars
from retrieval_pipeline.cli.signals import EXIT_INTERRUPTED, stop_on_signals
from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.plugin_process import kill_all

try:  # importing the definitions reads the registries: a refusal there is one line on the command line, not a traceback
    from retrieval_pipeline.cli.materialise import UsageError, resources_under, run_datasets
    from retrieval_pipeline.defs.resources import DEFAULT_CACHE_DIR, DEFAULT_OUT_DIR
except (InputError, RetrieverError) as _refused:
    if __name__ != "__main__":
        raise
    print(f"error: {' '.join(str(_refused).split())}", file=sys.stderr)
    sys.exit(2)

#: Exit codes.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m retrieval_pipeline.cli.run",
        description="Materialise the asset graph on each dataset (one Dagster run per partition, recorded in DAGSTER_HOME's "
        "instance), one line per finished step; the full event stream goes to a log file; then per dataset the retriever "
        "comparison, the failed checks and where the exports are. Exit 1 when a run failed (a failing ERROR metric floor fails its run).",
    )
    parser.add_argument(
        "--datasets", nargs="+", required=True, metavar="NAME", help="dataset partitions (names in data/config/datasets.yaml)"
    )
    parser.add_argument("--select", default="*", help="asset selection, as `dagster asset materialize --select` (default: '*', everything)")
    parser.add_argument(
        "--add-retriever",
        default=None,
        metavar="NAME",
        help="instead of --select: build retriever NAME (the indexes of its components first), run it and re-evaluate; "
        "each dataset must list it (`retrievers:` in data/config/datasets.yaml)",
    )
    parser.add_argument(
        "--config-json", type=json.loads, default=None, help="run config of every run, as `dagster asset materialize --config-json`"
    )
    parser.add_argument(
        "--log", type=Path, default=None, help="log file of the full event stream (default: <out-dir>/logs/run-<timestamp>.log)"
    )
    parser.add_argument("--out-dir", type=Path, default=None, help=f"outputs, indexes and exports (default: {shown_path(DEFAULT_OUT_DIR)})")
    parser.add_argument("--cache-dir", type=Path, default=None, help=f"embedding and LLM caches (default: {shown_path(DEFAULT_CACHE_DIR)})")
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    resources: Mapping[str, object] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> int:
    """Run the datasets and print the summary; returns the exit code (0 ok, 1 a run failed, 2 bad arguments).

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.
        stdout: Where progress and summary go; ``None`` means ``sys.stdout``.
        resources: Resources replacing the project's, over those of ``--out-dir``/``--cache-dir`` (tests).
        instance: The Dagster instance; ``None`` means ``DAGSTER_HOME``'s.

    Returns:
        The process exit code.
    """
    args = build_parser().parse_args(argv)
    out = stdout or sys.stdout
    quiet_progress_bars()
    overrides: dict[str, object] = {}
    if args.out_dir or args.cache_dir:
        overrides.update(resources_under(args.out_dir or DEFAULT_OUT_DIR, args.cache_dir or DEFAULT_CACHE_DIR))
    overrides.update(resources or {})
    out_dir = Path(getattr(overrides.get("settings"), "out_dir", DEFAULT_OUT_DIR))
    log_path = args.log or out_dir / "logs" / f"run-{datetime.now():%Y%m%d-%H%M%S}.log"
    datasets = list(dict.fromkeys(args.datasets))
    try:  # a bad output path is one line before anything runs, not a traceback from the first write
        for folder, what in ((args.out_dir, "--out-dir"), (args.cache_dir, "--cache-dir"), (log_path.parent, "--log")):
            if folder is not None:
                check_output_folder(folder, what)
        check_output_file(log_path, "--log")
    except OutputPathError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with stop_on_signals(), bars_on_the_terminal():
            if args.add_retriever and args.select != "*":
                raise UsageError("--add-retriever chooses the assets itself: give it or --select, not both")
            runs = run_datasets(
                datasets,
                select=args.select,
                add_retriever=args.add_retriever,
                log_path=log_path,
                out=out,
                resources=overrides or None,
                instance=instance,
                run_config=args.config_json,
            )
    except (UsageError, InputError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        out.write(f"\n{_interrupted_line(log_path)}\n")
        return EXIT_INTERRUPTED
    interrupted = any(r.interrupted for r in runs) or stop.requested()
    out.write(format_summary(runs, log_path, interrupted_by=(stop.reason() or "a signal") if interrupted else ""))
    if interrupted:
        out.write(f"{_interrupted_line(log_path)}\n")
        return EXIT_INTERRUPTED
    return EXIT_OK if all(r.success for r in runs) else EXIT_FAILED


def _interrupted_line(log_path: Path) -> str:
    return f"interrupted; the event stream so far is in {shown_path(log_path)} (stopped by {stop.reason() or 'a signal'}; exit code {EXIT_INTERRUPTED})"


if __name__ == "__main__":
    code = main()
    if code == EXIT_INTERRUPTED:  # stopped: end now, not after the libraries' teardown (torch, threads still finishing a batch)
        kill_all()  # plug-in workers (their watchdog would end them a second later)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
