"""A corpus of every installed distribution's API (the scale benchmark's corpus), built in child processes and cached.

**Corpus.** The standard library (``sys.stdlib_module_names``: public, findable) and the top-level import
packages of the installed distributions (``importlib.metadata.packages_distributions()``), each expanded
into its public submodules (:func:`~retrieval_pipeline.core.datasets.api_index.package_modules`) and
introspected with :func:`~retrieval_pipeline.core.datasets.api_index.introspect_modules`: one document per
module, class, function and method, text as that module composes it.

**Always in a child process.** Importing thousands of torch/scipy/dagster submodules has side effects
(threads, patched classes, gigabytes of memory), so the pipeline's process never does it: the parent
runs the child, ``python -m retrieval_pipeline.core.datasets.known_item.introspect``, once per package group (the whole
standard library is one group, every other top-level package its own), each bounded by a timeout, in an
empty working folder, in its own session (a timeout kills the group). The child writes documents, rejects
and a report to a JSON file, which the parent reads. A package group that crashes, exits non-zero or
times out stops the build with its exit code and stderr tail: a corpus silently missing a package would
not be the same corpus twice. A *module* that fails to import (or calls ``sys.exit``, or hangs past the
module timeout) is only a reject with the module and the reason, as :func:`introspect_modules` makes it.

**Cached.** Building takes minutes, so the corpus is stored under the cache folder in one Parquet file
(written atomically, see :mod:`retrieval_pipeline.core.common.atomic`) named by a fingerprint of the environment:
Python version, the sorted ``(distribution, version)`` pairs, the introspection settings and the source of
the two modules that compose the texts. The same environment reads it back in seconds; any change builds anew.

**Known-item queries** are drawn from it by :mod:`~retrieval_pipeline.core.datasets.known_item.queries`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.atomic import atomic_write, file_lock
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.paths import CACHE_ROOT
from retrieval_pipeline.core.common.progress import Progress
from retrieval_pipeline.core.common.types import Document, Rejected
from retrieval_pipeline.core.datasets.known_item.introspect import list_groups

#: The cache folder when none is given (the pipeline's ``data/cache``, see ``defs/resources.py``).
DEFAULT_CACHE_DIR = CACHE_ROOT / "installed_corpus"
#: Left out unless listed in ``include``: test suites, and this project itself (it changes with every edit).
DEFAULT_EXCLUDE = ("test", "tests", "examples", "retrieval_pipeline")
#: Bumped when the cached file's layout or the documents' composition changes.
FORMAT_VERSION = 1
#: Characters of a child's stderr quoted in an error.
STDERR_TAIL_CHARS = 2000
_CHILD_MODULE = "retrieval_pipeline.core.datasets.known_item.introspect"


class IntrospectionError(InputError):
    """A child process failed (crash, non-zero exit, timeout, unreadable output), or the corpus is too small."""


@dataclass(frozen=True)
class IntrospectionSettings:
    """What is introspected, and the bounds of the build.

    Attributes:
        include: Top-level packages to introspect; empty means every stdlib module and installed package.
        exclude: Top-level packages left out (applied after ``include``).
        max_modules_per_package: At most this many modules per top-level package (sorted order).
        module_timeout_s: A module import running longer is a reject (in the child, via ``SIGALRM``).
        child_timeout_s: A package group's child running longer is killed and the build fails.
        min_documents: Fewer documents than this is an error (checked on fresh builds and cache hits).
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    max_modules_per_package: int = 2000
    module_timeout_s: float = 120.0
    child_timeout_s: float = 1800.0
    min_documents: int = 100_000

    def content_key(self) -> dict[str, Any]:
        """The settings that change which documents are built (``min_documents`` and the child timeout do not)."""
        return {
            "include": sorted(self.include),
            "exclude": sorted(self.exclude),
            "max_modules_per_package": self.max_modules_per_package,
            "module_timeout_s": self.module_timeout_s,
        }


@dataclass
class InstalledCorpus:
    """The introspected corpus: documents (by package group, then as introspected), rejects and the build report."""

    documents: list[Document]
    rejects: list[Rejected] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- parent: build or read back


def build_installed_corpus(
    settings: IntrospectionSettings, cache_dir: str | Path = DEFAULT_CACHE_DIR, *, label: str = "installed corpus"
) -> InstalledCorpus:
    """The corpus of the installed distributions: read from the cache, else introspected in child processes.

    Args:
        settings: What to introspect, and the bounds.
        cache_dir: Folder of the cached corpora (one Parquet file per environment fingerprint).
        label: What is being built (a dataset name), for error messages.

    Returns:
        The corpus; ``report["cache"]`` is ``"hit"`` or ``"miss"`` and ``report["cache_file"]`` the file.

    Raises:
        IntrospectionError: A child failed, or fewer than ``settings.min_documents`` documents resulted.
    """
    fingerprint = environment_fingerprint(settings)
    path = Path(cache_dir) / f"installed_corpus-{fingerprint[:16]}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".lock")):  # two builders of one environment: the second reads the first's file
        if path.exists():
            corpus = read_cache(path)
            corpus.report["cache"] = "hit"
        else:
            corpus = introspect_in_children(settings, label=label)
            corpus.report["fingerprint"] = fingerprint
            write_cache(path, corpus)
            corpus.report["cache"] = "miss"
    corpus.report["cache_file"] = str(path)
    _check_size(corpus, settings, label)
    return corpus


def _check_size(corpus: InstalledCorpus, settings: IntrospectionSettings, label: str) -> None:
    """Fail when the corpus is smaller than asked, naming the biggest contributors (nothing is padded)."""
    count = len(corpus.documents)
    if count >= settings.min_documents:
        return
    top = ", ".join(f"{p} {n:,}" for p, n in list(corpus.report.get("by_package", {}).items())[:10])
    raise IntrospectionError(
        f"{label}: introspection gave {count:,} documents, fewer than min_documents={settings.min_documents:,} "
        f"({corpus.report.get('packages', '?')} packages; largest: {top or 'none'}); install more distributions or lower min_documents",
        path=corpus.report.get("cache_file"),
    )


def environment_fingerprint(settings: IntrospectionSettings) -> str:
    """SHA-256 of what decides the corpus: Python, every ``(distribution, version)``, the settings and the code.

    The code is the source of :mod:`~retrieval_pipeline.core.datasets.api_index` (it composes the texts), of
    this module and of the child (:mod:`~retrieval_pipeline.core.datasets.known_item.introspect`), so an edit
    to any of them builds anew instead of reading a corpus the new code would not make.
    """
    payload = {
        "format": FORMAT_VERSION,
        "python": sys.version,
        "executable": sys.executable,
        "distributions": installed_distributions(),
        "settings": settings.content_key(),
        "code": [_source_digest(m) for m in ("retrieval_pipeline.core.datasets.api_index", __name__, _CHILD_MODULE)],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def installed_distributions() -> list[tuple[str, str]]:
    """Sorted, de-duplicated ``(normalised name, version)`` of every installed distribution."""
    pairs = {(_normalised(d.metadata["Name"] or ""), d.version or "") for d in importlib.metadata.distributions()}
    return sorted(p for p in pairs if p[0])


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _source_digest(module: str) -> str:
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec else None
    return hashlib.sha256(Path(origin).read_bytes()).hexdigest() if origin and Path(origin).is_file() else module


def package_groups(settings: IntrospectionSettings, *, label: str = "installed corpus") -> list[tuple[str, list[str]]]:
    """The children to run: ``("stdlib", [stdlib names])`` first, then ``(package, [package])`` per package.

    With no ``include``: every public stdlib module and every public top-level name of
    ``packages_distributions()`` that ``importlib.util.find_spec`` finds. Names in ``include`` are kept even
    when they cannot be found, so the child reports them as rejects. ``exclude`` and :data:`NEVER_IMPORTED`
    are left out. Without ``include`` they are found in a child: ``find_spec`` may import (setuptools'
    ``distutils`` shim does); with it, nothing is looked up, so this process computes them.
    """
    if settings.include:
        return list_groups(settings.include, settings.exclude)
    command = ["--list", *(f"--include={n}" for n in settings.include), *(f"--exclude={n}" for n in settings.exclude)]
    listed = _run(command, f"{label}: listing the installed packages", settings.child_timeout_s, "introspection:listing")
    return [(group, list(names)) for group, names in listed]


def introspect_in_children(settings: IntrospectionSettings, *, label: str = "installed corpus") -> InstalledCorpus:
    """Run one child per package group (sequentially: the machine is shared) and merge their outputs.

    Each finished group is counted on a :class:`~retrieval_pipeline.core.common.progress.Progress` (log lines, a terminal bar).

    Raises:
        IntrospectionError: A child crashed, exited non-zero, timed out, or wrote no readable output.
    """
    started = time.perf_counter()
    groups = package_groups(settings, label=label)
    outputs = []
    with Progress(label, verb="introspected", noun="package groups", unit="groups", total=len(groups)) as progress:
        for group, packages in groups:
            outputs.append((group, run_child(group, packages, settings, label=label)))
            progress.advance()
    corpus = merge_outputs(outputs)
    corpus.report["introspection_wall_s"] = round(time.perf_counter() - started, 2)
    return corpus


def run_child(group: str, packages: Sequence[str], settings: IntrospectionSettings, *, label: str = "installed corpus") -> dict[str, Any]:
    """Introspect ``packages`` in a child process and return its output (documents, rejects, report).

    Raises:
        IntrospectionError: Names the group, the exit code or timeout, and the stderr tail.
    """
    options = ["--max-modules", str(settings.max_modules_per_package), "--module-timeout", str(settings.module_timeout_s), "--"]
    started = time.perf_counter()
    what = f"{label}: introspecting package group {group!r} ({_shown_names(packages)})"
    output = _run(
        [*options, *packages], what, settings.child_timeout_s, f"introspection:{group}", hint="; add it to 'exclude' to build without it"
    )
    output["report"]["wall_s"] = round(time.perf_counter() - started, 2)
    output["documents"] = [Document(**raw) for raw in output["documents"]]  # now: the JSON dicts are freed child by child
    output["rejects"] = [Rejected(**raw) for raw in output["rejects"]]
    return output


def _run(arguments: Sequence[str], what: str, timeout_s: float, where: str, *, hint: str = "") -> Any:
    """Run the child with ``arguments`` and return the JSON it wrote.

    The child runs in an empty temporary folder (so nothing there shadows a module), in its own session
    (a timeout kills every process it started), with stdin and stdout discarded and stderr kept in a file.

    Raises:
        IntrospectionError: Names what the child was doing, the exit code or timeout, and the stderr tail.
    """
    with tempfile.TemporaryDirectory(prefix="installed_corpus-") as tmp:
        out, err_path = Path(tmp) / "out.json", Path(tmp) / "stderr.txt"
        command = [sys.executable, "-m", _CHILD_MODULE, "--out", str(out), *arguments]
        with err_path.open("wb") as err:
            process = subprocess.Popen(
                command, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
            )
            problem = _wait(process, timeout_s)
        if problem is None and not out.is_file():
            problem = "exited 0 without writing its output"
        if problem is not None:
            raise IntrospectionError(f"{what} {problem}{hint}. stderr tail:\n{_tail(err_path)}", path=where)
        return json.loads(out.read_text(encoding="utf-8"))


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> str | None:
    """Wait for the child; kill its whole session on timeout. ``None`` when it exited 0, else what went wrong."""
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return f"timed out after {timeout_s:g} s (killed)"
    if code == 0:
        return None
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def _tail(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    return text[-STDERR_TAIL_CHARS:] if text else "(empty)"


def _shown_names(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def merge_outputs(outputs: Sequence[tuple[str, dict[str, Any]]]) -> InstalledCorpus:
    """Merge the children's outputs in group order; a ``doc_id`` seen twice keeps its first document."""
    documents: list[Document] = []
    rejects: list[Rejected] = []
    by_package: Counter[str] = Counter()
    seen: set[str] = set()
    duplicates = 0
    for group, output in outputs:
        for doc in output["documents"]:
            if doc.doc_id in seen:
                duplicates += 1
                continue
            seen.add(doc.doc_id)
            documents.append(doc)
            by_package[group] += 1
        rejects.extend(output["rejects"])
    return InstalledCorpus(documents, rejects, _merged_report(outputs, documents, rejects, by_package, duplicates))


def _merged_report(
    outputs: Sequence[tuple[str, dict[str, Any]]],
    documents: Sequence[Document],
    rejects: Sequence[Rejected],
    by_package: Counter[str],
    duplicates: int,
) -> dict[str, Any]:
    """Counts of the whole build, by package and by kind, with each child's wall time and peak memory."""
    reports = {group: output["report"] for group, output in outputs}
    peak_group = max(reports, key=lambda g: reports[g]["peak_rss_mb"], default=None)
    return {
        "documents": len(documents),
        "packages": len(outputs),
        "modules": sum(r["modules"] for r in reports.values()),
        "failed_modules": sum(r["failed_modules"] for r in reports.values()),
        "failed_packages": sum(r["failed_packages"] for r in reports.values()),
        "rejected": len(rejects),
        "duplicates": duplicates + sum(r["duplicates"] for r in reports.values()),
        "missing_docstring": sum(r["missing_docstring"] for r in reports.values()),
        "children": len(outputs),
        "child_peak_rss_mb": reports[peak_group]["peak_rss_mb"] if peak_group else 0.0,
        "child_peak_rss_package": peak_group or "",
        "python": sys.version.split()[0],
        "by_package": dict(sorted(by_package.items(), key=lambda kv: (-kv[1], kv[0]))),
        "by_kind": dict(sorted(Counter(d.kind for d in documents).items())),
        "wall_s_by_package": {g: r["wall_s"] for g, r in sorted(reports.items(), key=lambda kv: -kv[1]["wall_s"])},
    }


# --------------------------------------------------------------------------- the cache file

_DOCUMENT_FIELDS = ("doc_id", "text", "title", "kind", "module", "aliases", "source")
_META_KEY = b"installed_corpus"


def write_cache(path: Path, corpus: InstalledCorpus) -> Path:
    """Store the corpus as one Parquet file (documents; rejects and report in the schema metadata), written
    atomically so a reader never sees half of it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {name: [getattr(d, name) for d in corpus.documents] for name in _DOCUMENT_FIELDS}
    schema = pa.schema([(n, pa.list_(pa.string()) if n == "aliases" else pa.string()) for n in columns])
    meta = {"rejects": [asdict(r) for r in corpus.rejects], "report": corpus.report}
    table = pa.table(columns, schema=schema).replace_schema_metadata({_META_KEY: json.dumps(meta).encode("utf-8")})
    return atomic_write(path, lambda temp: pq.write_table(table, temp, compression="zstd"))


def read_cache(path: Path) -> InstalledCorpus:
    """Read a corpus written by :func:`write_cache` (through one open handle, see :mod:`~retrieval_pipeline.core.common.atomic`).

    Raises:
        IntrospectionError: The file is not such a corpus (names the file; delete it to rebuild).
    """
    import pyarrow.parquet as pq

    try:
        with path.open("rb") as handle:
            table = pq.read_table(io.BytesIO(handle.read()))
        meta = json.loads((table.schema.metadata or {})[_META_KEY])
        columns = [table.column(name).to_pylist() for name in _DOCUMENT_FIELDS]
    except Exception as exc:  # any damage: say which file, and how to get a fresh one
        raise IntrospectionError(
            f"cached corpus is unreadable ({type(exc).__name__}: {exc}); delete it to rebuild", path=str(path)
        ) from exc
    documents = [Document(**dict(zip(_DOCUMENT_FIELDS, values))) for values in zip(*columns)]
    return InstalledCorpus(documents, [Rejected(**r) for r in meta["rejects"]], dict(meta["report"]))
