"""A corpus of every installed distribution's API, and known-item queries drawn from it (the scale benchmark).

**Corpus.** The standard library (``sys.stdlib_module_names``: public, findable) and the top-level import
packages of the installed distributions (``importlib.metadata.packages_distributions()``), each expanded
into its public submodules (:func:`~retrieval_pipeline.core.datasets.api_index.package_modules`) and
introspected with :func:`~retrieval_pipeline.core.datasets.api_index.introspect_modules`: one document per
module, class, function and method, text as that module composes it.

**Always in a child process.** Importing thousands of torch/scipy/dagster submodules has side effects
(threads, patched classes, gigabytes of memory), so the pipeline's process never does it: the parent
runs ``python -m retrieval_pipeline.core.datasets.known_item.corpus`` once per package group (the whole
standard library is one group, every other top-level package its own), each bounded by a timeout, in an
empty working folder, in its own session (a timeout kills the group). The child writes documents, rejects
and a report to a JSON file, which the parent reads. A package group that crashes, exits non-zero or
times out stops the build with its exit code and stderr tail: a corpus silently missing a package would
not be the same corpus twice. A *module* that fails to import (or calls ``sys.exit``, or hangs past the
module timeout) is only a reject with the module and the reason, as :func:`introspect_modules` makes it.

**Cached.** Building takes minutes, so the corpus is stored under the cache folder in one Parquet file
(written atomically, see :mod:`retrieval_pipeline.core.atomic`) named by a fingerprint of the environment:
Python version, the sorted ``(distribution, version)`` pairs, the introspection settings and the source of
the two modules that compose the texts. The same environment reads it back in seconds; any change builds anew.

**Known-item queries.** A document whose docstring's first sentence has at least ``min_words`` words and
is the first sentence of no other document is eligible (the docstring is read back from the document's
text, see :func:`docstring_of`); ``n_queries`` of them are drawn with a seeded
generator. The query is that sentence, the gold is that document, and the gold's indexed text has the
sentence removed (every occurrence, whatever the line wrapping): left in, the query would be a verbatim
substring of its own gold and every lexical retriever would find it trivially; removed, the retriever
has to recognise the object from the rest of its text (name, signature, the remaining docstring). A
sentence shared by two documents would have two golds, so it is skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_pipeline.core.atomic import atomic_write, file_lock
from retrieval_pipeline.core.datasets.api_index import CorpusLoad, introspect_modules, package_modules
from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.types import Document, Rejected

#: The cache folder when none is given (the pipeline's ``data/cache``, see ``defs/resources.py``).
DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[4] / "data" / "cache" / "installed_corpus"
#: Left out unless listed in ``include``: test suites, and this project itself (it changes with every edit).
DEFAULT_EXCLUDE = ("test", "tests", "examples", "retrieval_pipeline")
#: Never imported, even when included: importing them opens a web browser, prints, or starts a GUI.
NEVER_IMPORTED = frozenset({"antigravity", "this", "idlelib", "turtledemo"})
#: The group label of the standard library's modules.
STDLIB = "stdlib"
#: Bumped when the cached file's layout or the documents' composition changes.
FORMAT_VERSION = 1
#: Characters of a child's stderr quoted in an error.
STDERR_TAIL_CHARS = 2000
#: Words that end in a period without ending a sentence.
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "cf", "approx", "resp", "no", "mr", "dr"})
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_CHILD_MODULE = "retrieval_pipeline.core.datasets.known_item.corpus"


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


@dataclass(frozen=True)
class KnownItemSettings:
    """How known-item queries are drawn: ``n_queries`` sentences of at least ``min_words`` words, seeded."""

    n_queries: int = 2000
    min_words: int = 6
    seed: int = 13


@dataclass(frozen=True)
class KnownItemQuery:
    """One known-item query: the gold's first docstring sentence (whitespace collapsed) and the gold's id."""

    query_id: str
    query: str
    gold_doc_id: str
    removed: int  # occurrences of the sentence removed from the gold's text


@dataclass
class KnownItemSet:
    """Queries, and the corpus with each gold's sentence removed; ``counts`` says how the sample was drawn.

    ``counts``: ``candidates`` (documents with a docstring) ``== skipped_too_short + skipped_cut +
    skipped_duplicate + eligible``; ``skipped_in_neighbour + sampled <= eligible``.
    """

    queries: list[KnownItemQuery]
    documents: list[Document]
    counts: dict[str, int]


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

    The code is the source of :mod:`~retrieval_pipeline.core.datasets.api_index` (it composes the texts) and of
    this module, so an edit to either builds anew instead of reading a corpus the new code would not make.
    """
    payload = {
        "format": FORMAT_VERSION,
        "python": sys.version,
        "executable": sys.executable,
        "distributions": installed_distributions(),
        "settings": settings.content_key(),
        "code": [_source_digest(m) for m in ("retrieval_pipeline.core.datasets.api_index", _CHILD_MODULE)],
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


def introspect_in_children(settings: IntrospectionSettings, *, label: str = "installed corpus") -> InstalledCorpus:
    """Run one child per package group (sequentially: the machine is shared) and merge their outputs.

    Raises:
        IntrospectionError: A child crashed, exited non-zero, timed out, or wrote no readable output.
    """
    started = time.perf_counter()
    outputs = [(group, run_child(group, packages, settings, label=label)) for group, packages in package_groups(settings, label=label)]
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
    """Read a corpus written by :func:`write_cache` (through one open handle, see :mod:`~retrieval_pipeline.core.atomic`).

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


# --------------------------------------------------------------------------- known-item queries


def docstring_of(doc: Document) -> str:
    """The docstring part of an introspected document's text, read back from the text itself.

    :func:`~retrieval_pipeline.core.datasets.api_index.introspect_modules` writes ``name (kind)``, the FQN, the
    signature when Python knows it, then the (capped) docstring. Leading lines that start with ``name(`` are
    dropped with the blank lines around them: the signature line, and the signature that C functions put
    at the top of their docstring (``encode_basestring(string) -> string``), which is not a sentence.
    """
    lines = doc.text.split("\n")[2:]
    while lines and (not lines[0].strip() or lines[0].startswith(f"{doc.title}(")):
        lines.pop(0)
    return "\n".join(lines).strip()


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, as written (line breaks kept), or the whole
    paragraph when no ``.``, ``!`` or ``?`` ends a sentence in it; abbreviations (``e.g.``) do not end one."""
    paragraph = re.split(r"\n\s*\n", docstring.strip(), maxsplit=1)[0]
    for match in _SENTENCE_END.finditer(paragraph):
        before = paragraph[: match.start()].split()
        if not before or before[-1].lower() not in _ABBREVIATIONS:
            return paragraph[: match.end()].strip()
    return paragraph.strip()


def collapse(text: str) -> str:
    """``text`` with every run of whitespace made one space (the query form of a sentence)."""
    return " ".join(text.split())


def remove_sentence(text: str, sentence: str) -> tuple[str, int]:
    """``text`` with every occurrence of ``sentence`` removed, whatever the whitespace between its words.

    Returns:
        The new text (trailing spaces and runs of blank lines left by the removal tidied) and how many
        occurrences were removed.
    """
    words = sentence.split()
    if not words:
        return text, 0
    pattern = re.compile(r"\s+".join(map(re.escape, words)))
    removed, count = pattern.subn("", text)
    if count:
        removed = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", removed)).strip()
    return removed, count


# -- subsets: the same documents and queries at every size --------------------------------------


@dataclass(frozen=True)
class Subset:
    """One size's documents (positions in the corpus, ascending) and the queries whose gold it holds."""

    size: int
    positions: list[int]
    query_ids: list[str]


def nested_subsets(
    doc_ids: Sequence[str], golds: Sequence[tuple[str, str]], sizes: Sequence[int], *, seed: int, gold_share: float
) -> tuple[dict[int, Subset], list[str]]:
    """Nested, seeded subsets that hold the gold of every query kept at their size.

    Queries are shuffled first (seeded); the subset of ``n`` documents keeps the first
    ``min(len(golds), round(n x gold_share))`` of them and holds their golds, and is filled with other
    documents in a seeded order (golds of queries never kept come last, as plain documents). Since both
    prefixes only grow with ``n``, a smaller subset is contained in every larger one.

    Args:
        doc_ids: The corpus's document ids, in corpus order.
        golds: ``(query_id, gold_doc_id)`` of every query.
        sizes: Subset sizes (each at most ``len(doc_ids)``).
        seed: Seed of both shuffles.
        gold_share: Kept queries per document (0 < share <= 1).

    Returns:
        ``({size: Subset}, query ids in the shuffled order)``.

    Raises:
        ValueError: A size outside ``1..len(doc_ids)``, a share outside ``(0, 1]``, or a gold not in the corpus.
    """
    if not 0 < gold_share <= 1:
        raise ValueError(f"gold_share must be in (0, 1], got {gold_share}")
    bad = [s for s in sizes if not 1 <= s <= len(doc_ids)]
    if bad:
        raise ValueError(f"subset sizes {bad} are outside 1..{len(doc_ids):,} (the corpus size)")
    position = {d: i for i, d in enumerate(doc_ids)}
    missing = [q for q, g in golds if g not in position]
    if missing:
        raise ValueError(f"{len(missing)} queries have a gold that is not in the corpus, e.g. {missing[:3]}")
    rng = np.random.default_rng(seed)
    order = [golds[i] for i in rng.permutation(len(golds))]
    gold_positions = {position[g] for _, g in golds}
    fillers = [int(i) for i in rng.permutation(len(doc_ids)) if int(i) not in gold_positions]
    fillers += [position[g] for _, g in order]  # used only when the plain documents run out
    subsets: dict[int, Subset] = {}
    for size in sorted(set(sizes)):
        kept = order[: min(len(order), max(1, round(size * gold_share)), size)]
        chosen = {position[g] for _, g in kept}
        for i in fillers:
            if len(chosen) == size:
                break
            chosen.add(i)
        subsets[size] = Subset(size, sorted(chosen), [q for q, _ in kept])
    return subsets, [q for q, _ in order]


def known_items(corpus: InstalledCorpus, settings: KnownItemSettings, *, label: str = "installed corpus") -> KnownItemSet:
    """Draw the known-item queries and remove each one's sentence from its gold's text.

    Candidates are documents with a docstring (:func:`docstring_of`); a candidate is skipped when its first
    sentence has fewer than ``min_words`` words, when it runs into the docstring cap (``…``: not a whole
    sentence), or when another document has the same first sentence (case and whitespace ignored).
    The rest (sorted by id) are shuffled with ``numpy.random.default_rng(seed).permutation`` and taken in
    that order, passing over one whose sentence appears in the text of a *neighbour* (a document of the same
    module, or of the same name elsewhere: a copied docstring, an alias, a longer sibling), until
    ``n_queries`` are taken. Neighbours only: searching all 500,000 texts per query would take minutes,
    and the neighbours are where such copies are (a full search found 30 of 2,000 queries elsewhere, all
    in a neighbour).

    Raises:
        InputError: Fewer eligible documents than ``n_queries``, or too many passed over.
    """
    sentences = {d.doc_id: first_sentence(docstring_of(d)) for d in corpus.documents}
    sentences = {k: v for k, v in sentences.items() if v}
    shared = Counter(collapse(s).casefold() for s in sentences.values())
    counts = Counter(candidates=len(sentences))
    eligible: list[str] = []
    for doc_id in sorted(sentences):
        reason = _skip_reason(sentences[doc_id], shared, settings.min_words)
        counts[reason or "eligible"] += 1
        if reason is None:
            eligible.append(doc_id)
    order = [eligible[i] for i in np.random.default_rng(settings.seed).permutation(len(eligible))]
    chosen, passed = _take(order, sentences, corpus.documents, settings.n_queries)
    counts["skipped_in_neighbour"] = passed
    if len(chosen) < settings.n_queries:
        raise InputError(
            f"{label}: only {len(chosen):,} documents are usable known items, n_queries={settings.n_queries:,}; {dict(counts)}"
        )
    queries, documents = _apply(sorted(chosen), sentences, corpus.documents)
    counts["sampled"] = len(queries)
    keys = ("candidates", "skipped_too_short", "skipped_cut", "skipped_duplicate", "eligible", "skipped_in_neighbour", "sampled")
    return KnownItemSet(queries, documents, {k: counts[k] for k in keys})


def _skip_reason(sentence: str, shared: Counter[str], min_words: int) -> str | None:
    """Why a candidate is not eligible (a ``counts`` key), or ``None`` when it is."""
    if len(sentence.split()) < min_words:
        return "skipped_too_short"
    if sentence.endswith("…"):
        return "skipped_cut"
    if shared[collapse(sentence).casefold()] > 1:
        return "skipped_duplicate"
    return None


def _take(order: Sequence[str], sentences: dict[str, str], documents: Sequence[Document], n: int) -> tuple[list[str], int]:
    """The first ``n`` ids of ``order`` whose sentence no neighbour's text holds, and how many were passed over."""
    neighbours: dict[str, list[int]] = {}
    for i, doc in enumerate(documents):
        neighbours.setdefault(f"module:{doc.module}", []).append(i)
        neighbours.setdefault(f"name:{doc.title}", []).append(i)
    index = {doc.doc_id: i for i, doc in enumerate(documents)}
    folded: dict[int, str] = {}
    chosen: list[str] = []
    passed = 0
    for doc_id in order:
        if len(chosen) == n:
            break
        gold = documents[index[doc_id]]
        query = collapse(sentences[doc_id]).casefold()
        near = set(neighbours[f"module:{gold.module}"]) | set(neighbours[f"name:{gold.title}"])
        if any(i != index[doc_id] and query in folded.setdefault(i, collapse(documents[i].text).casefold()) for i in near):
            passed += 1
        else:
            chosen.append(doc_id)
    return chosen, passed


def _apply(chosen: Iterable[str], sentences: dict[str, str], documents: Sequence[Document]) -> tuple[list[KnownItemQuery], list[Document]]:
    """The queries, and the documents with each chosen gold's sentence removed (the others unchanged)."""
    edited: dict[str, tuple[str, int]] = {doc_id: ("", 0) for doc_id in chosen}
    out: list[Document] = []
    for doc in documents:
        if doc.doc_id in edited:
            text, count = remove_sentence(doc.text, sentences[doc.doc_id])
            edited[doc.doc_id] = (text, count)
            doc = replace(doc, text=text)
        out.append(doc)
    queries = [KnownItemQuery(f"ki:{d}", collapse(sentences[d]), d, edited[d][1]) for d in sorted(edited)]
    return queries, out


# --------------------------------------------------------------------------- the child


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
