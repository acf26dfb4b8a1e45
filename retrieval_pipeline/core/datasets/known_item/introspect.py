"""The child of the installed-packages corpus build: introspect the packages named on its command line.

Run as ``python -m retrieval_pipeline.core.datasets.known_item.introspect --out FILE [packages]`` by
:func:`~retrieval_pipeline.core.datasets.known_item.corpus.run_child`, never imported for its side effects
by the pipeline's process: importing thousands of submodules has side effects (threads, patched classes,
gigabytes of memory). It writes documents, rejects and a report as JSON, or, with ``--list``, the package
groups (the standard library is one group, every other top-level package its own).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import resource
import signal
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.types import Document, Rejected
from retrieval_pipeline.core.datasets.api_index import CorpusLoad, introspect_modules, package_modules

#: Never imported, even when included: importing them opens a web browser, prints, or starts a GUI.
NEVER_IMPORTED = frozenset({"antigravity", "this", "idlelib", "turtledemo"})
#: The group label of the standard library's modules.
STDLIB = "stdlib"


def list_groups(include: Sequence[str], exclude: Sequence[str]) -> list[tuple[str, list[str]]]:
    """:func:`package_groups`, computed in this process (only the child calls it)."""
    stdlib = set(sys.stdlib_module_names)
    if include:
        names = set(include)
    else:
        found = {n for n in stdlib | set(importlib.metadata.packages_distributions()) if _public(n)}
        names = {n for n in found if _findable(n)}
    names -= set(exclude) | NEVER_IMPORTED
    groups = [(STDLIB, sorted(names & stdlib))] if names & stdlib else []
    return groups + [(name, [name]) for name in sorted(names - stdlib)]


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except Exception:  # a broken finder or package metadata: not introspectable
        return False


def _public(name: str) -> bool:
    return name.isidentifier() and not name.startswith("_")


def introspect_packages(packages: Sequence[str], max_modules: int, module_timeout_s: float) -> dict[str, Any]:
    """Introspect packages in *this* process (only the child calls it): documents, rejects, report.

    Each module goes through :func:`introspect_modules` on its own, under a ``SIGALRM`` timeout, so one
    that hangs or raises ``SystemExit`` at import is a reject, not the end of the child.
    """
    documents: list[Document] = []
    rejects: list[Rejected] = []
    counts: Counter[str] = Counter()
    seen: set[str] = set()
    for package in packages:
        modules = _modules_of(package, max_modules, module_timeout_s, rejects)
        counts["failed_packages"] += modules is None
        for module in modules or []:
            loaded = _introspect_one(module, module_timeout_s, rejects)
            counts["modules"] += 1
            counts["failed_modules"] += loaded is None
            counts["missing_docstring"] += loaded.report["missing_docstring"] if loaded else 0  # as introspect_modules counts it
            for doc in loaded.documents if loaded else []:
                if doc.doc_id in seen:
                    counts["duplicates"] += 1
                    continue
                seen.add(doc.doc_id)
                documents.append(doc)
    report = {k: counts[k] for k in ("modules", "failed_modules", "failed_packages", "duplicates", "missing_docstring")}
    report["peak_rss_mb"] = _peak_rss_mb()
    return {"documents": [asdict(d) for d in documents], "rejects": [asdict(r) for r in rejects], "report": report}


def _peak_rss_mb() -> float:
    """This process's peak resident memory in MiB: ``VmHWM`` (its own address space; ``ru_maxrss`` would
    report the parent's peak when that was larger, as Linux carries it over fork and exec)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _modules_of(package: str, max_modules: int, timeout_s: float, rejects: list[Rejected]) -> list[str] | None:
    """The package's modules, or ``None`` (and a reject naming the package) when they cannot be listed.

    Listing imports the package's subpackages (:func:`pkgutil.walk_packages` needs their ``__path__``), so it
    runs under the same alarm as a module import.
    """
    try:
        with _alarm(timeout_s):
            return package_modules(package, max_modules=max_modules)
    except BaseException as exc:  # SystemExit from a package's __init__ included; the child goes on
        if isinstance(exc, KeyboardInterrupt):
            raise
        reason = f"package {package!r} could not be listed: {type(exc).__name__}: {exc}"
        rejects.append(Rejected(source_file=f"introspection:{package}", case_id=package, index=None, reason=reason))
        return None


def _introspect_one(module: str, timeout_s: float, rejects: list[Rejected]) -> CorpusLoad | None:
    """The module introspected, or ``None`` when it failed (its reject added)."""
    try:
        with _alarm(timeout_s):
            loaded = introspect_modules([module])
    except BaseException as exc:  # SystemExit, or the alarm's TimeoutError
        if isinstance(exc, KeyboardInterrupt):
            raise
        reason = f"module {module!r} failed to import: {type(exc).__name__}: {exc}"
        rejects.append(Rejected(source_file=f"introspection:{module}", case_id=module, index=None, reason=reason))
        return None
    rejects.extend(loaded.rejects)
    return None if loaded.rejects else loaded


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise ``TimeoutError`` in the block after ``seconds`` (main thread, POSIX)."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: Sequence[str] | None = None) -> None:
    """The child: introspect the packages named on the command line and write the JSON output file."""
    parser = argparse.ArgumentParser(description="Introspect installed packages (run by build_installed_corpus).")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--list", action="store_true", help="write the package groups instead of introspecting")
    parser.add_argument("--include", action="append", default=[])
    parser.add_argument("--exclude", action="append", default=[])
    parser.add_argument("--max-modules", type=int, default=2000)
    parser.add_argument("--module-timeout", type=float, default=120.0)
    parser.add_argument("packages", nargs="*")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # thousands of deprecation warnings would only fill stderr
    if args.list:
        output: Any = list_groups(args.include, args.exclude)
    else:
        output = introspect_packages(args.packages, args.max_modules, args.module_timeout)
    args.out.write_text(json.dumps(output), encoding="utf-8")
    sys.stderr.flush()
    os._exit(0)  # imported modules may have left non-daemon threads or atexit hooks behind: do not wait for them


if __name__ == "__main__":
    main()
