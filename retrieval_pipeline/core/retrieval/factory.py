"""The one retriever factory: spec -> built index -> searchable retriever, used by the assets and the CLI.

* :func:`load_retriever_specs` reads ``retrievers.yaml`` and validates every entry on its own, so one
  bad entry is reported by name and does not hide the others.
* :func:`build_index` builds a spec's index into a fresh temporary folder, writes ``retriever.json``
  (the spec, the corpus hash, library versions and what the kind reports, e.g. the model's weights
  hash), then swaps the folder into place, so a crash never leaves half an index.
* :func:`load_retriever` loads a built index (and, for hybrids and rerankers, their components) and
  wraps it in :class:`CheckedRetriever`, which enforces the retriever contract on every answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.common.yaml_file import read_yaml_mapping
from retrieval_pipeline.core.retrieval import kinds as _kinds  # noqa: F401  (importing registers every kind)
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult, Retriever, RetrieverError
from retrieval_pipeline.core.retrieval.spec import KINDS, NAME_PATTERN, PARAMS_FILE, RetrieverContext, RetrieverSpec


def known_kinds() -> dict[str, type[RetrieverSpec]]:
    """Every registered kind (this module imports the kind modules, which register themselves)."""
    return dict(KINDS)


def parse_spec(name: str, raw: Mapping[str, Any]) -> RetrieverSpec:
    """Validate one registry entry into its kind's spec.

    Raises:
        ValueError: bad name, missing or unknown kind, or invalid settings (pydantic's message, which
            names the field). The caller adds the retriever's name and the file.
    """
    if not NAME_PATTERN.match(name) or ".." in name:
        raise ValueError(f"retriever name {name!r} must match {NAME_PATTERN.pattern} (it becomes a folder name)")
    if not isinstance(raw, Mapping):
        raise ValueError(f"expected a mapping of settings, got {type(raw).__name__}")
    kinds = known_kinds()
    kind = raw.get("kind")
    if kind not in kinds:
        raise ValueError(f"unknown kind {kind!r}; known kinds: {', '.join(sorted(kinds))}")
    return kinds[kind].model_validate({**raw, "name": name})


@dataclass
class RetrieverRegistry:
    """Named retriever specs; entries that failed validation keep their error."""

    path: Path
    specs: dict[str, RetrieverSpec] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Every name in the file, valid or not, in file order."""
        return list(self.specs) + [n for n in self.errors if n not in self.specs]

    def get(self, name: str) -> RetrieverSpec:
        """The spec of ``name``; raises with the file and the reason when unknown or invalid."""
        if name in self.specs:
            return self.specs[name]
        if name in self.errors:
            raise RetrieverError(f"{self.path}: retriever {name!r} is invalid: {self.errors[name]}")
        raise RetrieverError(f"{self.path}: unknown retriever {name!r}; known: {', '.join(self.names)}")

    def closure(self, names: Iterable[str]) -> list[str]:
        """``names`` with every component they need, components first (each once)."""
        order: list[str] = []

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in path:
                raise RetrieverError(f"{self.path}: retriever {name!r} is its own component: {' -> '.join((*path, name))}")
            if name in order:
                return
            for part in self.get(name).components():
                visit(part, (*path, name))
            order.append(name)

        for name in names:
            visit(name, ())
        return order


def load_retriever_specs(path: Path | str) -> RetrieverRegistry:
    """Read ``retrievers.yaml`` (``retrievers: {name: {kind: ..., ...}}``); each entry validated alone.

    A missing component is an error of the entry that names it. A cycle of components is an error of
    the entries in it (and of those that use one of them), naming the cycle: each index asset depends
    on its components' indexes, so a cycle left in would make the whole asset graph unloadable and stop
    every dataset. :meth:`RetrieverRegistry.closure` still refuses a cycle it meets.
    """
    path = Path(path)
    doc = read_yaml_mapping(path, "retriever registry")
    raw = doc.get("retrievers")
    if not isinstance(raw, dict) or not raw:
        raise InputError("the retriever registry needs a non-empty 'retrievers' mapping", path=str(path))
    registry = RetrieverRegistry(path)
    for name, settings in raw.items():
        try:
            registry.specs[str(name)] = parse_spec(str(name), settings or {})
        except (ValidationError, ValueError, TypeError) as exc:
            registry.errors[str(name)] = _short(exc)
    for name, spec in list(registry.specs.items()):
        missing = [c for c in spec.components() if c not in registry.specs]
        if missing:
            registry.errors[name] = f"its component(s) {missing} are not valid retrievers in this file"
            del registry.specs[name]
    _refuse_cycles(registry)
    return registry


def _refuse_cycles(registry: RetrieverRegistry) -> None:
    """Move every retriever in a cycle of components to ``errors`` (``its own component, through a cycle: a -> b -> a``),
    then every one that needs such a retriever, so the others build and run."""
    cycles: dict[str, str] = {}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            loop = path[path.index(name) :] + (name,)
            for member in loop[:-1]:
                cycles.setdefault(member, " -> ".join(loop[loop.index(member) :] + loop[1 : loop.index(member) + 1]))
            return
        if name in done or name not in registry.specs:
            return
        for part in registry.specs[name].components():
            visit(part, (*path, name))
        done.add(name)

    for name in list(registry.specs):
        visit(name, ())
    for name, loop in cycles.items():
        registry.errors[name] = f"it is its own component, through a cycle: {loop}"
        del registry.specs[name]
    changed = bool(cycles)
    while changed:  # what needs a refused retriever cannot be built either
        changed = False
        for name, spec in list(registry.specs.items()):
            refused = [c for c in spec.components() if c not in registry.specs]
            if refused:
                registry.errors[name] = f"its component(s) {refused} are refused (see their errors in this file)"
                del registry.specs[name]
                changed = True


def _short(exc: Exception) -> str:
    """A validation error on one line per problem, without pydantic's input echo and URL."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
    return str(exc)


# -- building ------------------------------------------------------------------------------------


def corpus_hash(documents: Sequence[Document]) -> str:
    """SHA-256 over every ``(doc_id, text)`` in corpus order: an index is valid for exactly this corpus."""
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(doc.doc_id.encode("utf-8") + b"\0" + doc.text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def library_versions(
    packages: Iterable[str] = ("numpy", "scipy", "faiss-cpu", "sentence-transformers", "torch", "transformers"),
) -> dict[str, str | None]:
    """Installed versions (read from package metadata, nothing imported)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def build_index(spec: RetrieverSpec, ctx: RetrieverContext) -> dict[str, Any]:
    """Build ``spec`` for ``ctx``'s corpus into ``ctx.index_dir``, atomically; returns ``retriever.json``.

    The kind writes into a fresh sibling folder; only a complete build replaces the old index.

    Raises:
        RetrieverError: the kind failed; the message names the retriever and the dataset.
    """
    final = Path(ctx.index_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.with_name(f".{final.name}.building-{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        try:
            reported = spec.build(_with_dir(ctx, staging)) or {}
        except RetrieverError:
            raise
        except Exception as exc:  # a plug-in or model may raise anything: name who failed, keep the cause
            raise RetrieverError(
                f"retriever {spec.name!r} ({spec.kind}) failed to build for dataset {ctx.dataset!r}: {type(exc).__name__}: {exc}"
            ) from exc
        params = {
            "retriever": spec.name,
            "kind": spec.kind,
            "spec": spec.settings(),
            "dataset": ctx.dataset,
            "n_docs": len(ctx.documents),
            "corpus_sha256": corpus_hash(ctx.documents),
            "versions": library_versions(),
            **reported,
        }
        (staging / PARAMS_FILE).write_text(json.dumps(params, indent=2, sort_keys=True, default=str), encoding="utf-8")
        _swap_in(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return params


def _with_dir(ctx: RetrieverContext, directory: Path) -> RetrieverContext:
    return dataclasses.replace(ctx, index_dir=directory)


def _swap_in(staging: Path, final: Path) -> None:
    """Replace ``final`` by ``staging``: the old folder is renamed away first, then removed."""
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def read_params(index_dir: Path, spec: RetrieverSpec, dataset: str, documents: Sequence[Document] | None = None) -> dict[str, Any]:
    """The ``retriever.json`` of a built index, checked against the spec (and the corpus, when given).

    Raises:
        RetrieverError: the index is missing (says which asset to materialise), was built from other
            settings, or for another corpus.
    """
    path = Path(index_dir) / PARAMS_FILE
    if not path.is_file():
        raise RetrieverError(
            f"no index of retriever {spec.name!r} for dataset {dataset!r} at {index_dir}: "
            f"materialise `retrievers/{spec.name}_index` for this dataset first"
        )
    params = json.loads(path.read_text(encoding="utf-8"))
    if _identity(params.get("spec")) != _identity(spec.settings()):
        raise RetrieverError(
            f"the index of retriever {spec.name!r} for dataset {dataset!r} was built with other settings "
            f"({_identity(params.get('spec'))} != {_identity(spec.settings())}): materialise `retrievers/{spec.name}_index` again"
        )
    if documents is not None and params.get("corpus_sha256") != corpus_hash(documents):
        raise RetrieverError(
            f"the index of retriever {spec.name!r} for dataset {dataset!r} was built for another corpus: "
            f"materialise `retrievers/{spec.name}_index` again"
        )
    return params


def _identity(settings: Any) -> Any:
    """The settings that define an index: all of them but the free-text description."""
    return {k: v for k, v in settings.items() if k != "description"} if isinstance(settings, dict) else settings


# -- loading -------------------------------------------------------------------------------------


def load_retriever(
    registry: RetrieverRegistry,
    name: str,
    dataset: str,
    documents: Sequence[Document],
    index_root: Path,
    cache_dir: Path,
    encoder_for: Callable[[Any], Any],
    check_corpus: bool = True,
) -> CheckedRetriever:
    """Load retriever ``name`` of ``dataset`` from ``index_root/<name>`` (components recursively).

    Every answer goes through :class:`CheckedRetriever`; a kind that raises while loading is reported
    with the retriever and the dataset.
    """
    doc_ids = [d.doc_id for d in documents]
    known = frozenset(doc_ids)
    loaded: dict[str, CheckedRetriever] = {}

    def component(part: str) -> Retriever:
        if part not in loaded:
            loaded[part] = one(part)
        return loaded[part]

    def one(part: str) -> CheckedRetriever:
        spec = registry.get(part)
        directory = Path(index_root) / part
        read_params(directory, spec, dataset, documents if check_corpus else None)
        ctx = RetrieverContext(dataset, documents, directory, cache_dir, encoder_for, component)
        try:
            inner = spec.load(ctx)
        except RetrieverError:
            raise
        except Exception as exc:
            raise RetrieverError(
                f"retriever {part!r} ({spec.kind}) failed to load for dataset {dataset!r}: {type(exc).__name__}: {exc}"
            ) from exc
        return CheckedRetriever(inner, part, dataset, known)

    registry.closure([name])  # refuses cycles before anything loads
    return component(name)  # type: ignore[return-value]


def build_context(
    registry: RetrieverRegistry,
    dataset: str,
    documents: Sequence[Document],
    index_root: Path,
    cache_dir: Path,
    encoder_for: Callable[[Any], Any],
    name: str,
    log: Callable[[str], None] | None = None,
) -> RetrieverContext:
    """The context in which ``name``'s index is built: its components load from ``index_root``; progress goes to ``log``."""

    def component(part: str) -> Retriever:
        return load_retriever(registry, part, dataset, documents, index_root, cache_dir, encoder_for)

    return RetrieverContext(dataset, documents, Path(index_root) / name, cache_dir, encoder_for, component, log)


class CheckedRetriever:
    """Enforces the retriever contract on every answer, naming the retriever and the dataset.

    A query's answer must be a list of at most ``k`` ``(doc_id, score)`` hits with finite scores,
    sorted by score descending, each doc id once and from the corpus; or a :class:`QueryError`. An
    exception from the retriever is re-raised as :class:`RetrieverError` with the cause kept.
    """

    def __init__(self, inner: Retriever, name: str, dataset: str, doc_ids: frozenset[str]) -> None:
        self.inner = inner
        self.name = name
        self.dataset = dataset
        self._doc_ids = doc_ids

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        try:
            answers = self.inner.search(list(queries), k)
        except RetrieverError:
            raise
        except Exception as exc:
            raise RetrieverError(f"retriever {self.name!r} raised on dataset {self.dataset!r}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(answers, list) or len(answers) != len(queries):
            got = len(answers) if isinstance(answers, list) else type(answers).__name__
            raise self._broken(f"returned {got} answers for {len(queries)} queries")
        return [self._checked(i, answer, k) for i, answer in enumerate(answers)]

    def _checked(self, i: int, answer: Any, k: int) -> QueryResult:
        if isinstance(answer, QueryError):
            return answer
        if not isinstance(answer, (list, tuple)):
            raise self._broken(f"query {i}: expected a list of (doc_id, score), got {type(answer).__name__}")
        hits: list[tuple[str, float]] = []
        for hit in answer:
            if not isinstance(hit, (list, tuple)) or len(hit) != 2:
                raise self._broken(f"query {i}: a hit must be (doc_id, score), got {hit!r}"[:300])
            doc, score = str(hit[0]), hit[1]
            try:
                score = float(score)
            except (TypeError, ValueError):
                raise self._broken(f"query {i}: score {score!r} of {doc!r} is not a number") from None
            if score != score or score in (float("inf"), float("-inf")):
                raise self._broken(f"query {i}: score of {doc!r} is not finite ({score})")
            hits.append((doc, score))
        if len(hits) > k:
            raise self._broken(f"query {i}: returned {len(hits)} hits for k={k}")
        docs = [d for d, _ in hits]
        if len(set(docs)) != len(docs):
            raise self._broken(f"query {i}: duplicate hits {sorted({d for d in docs if docs.count(d) > 1})[:5]}")
        unknown = [d for d in docs if d not in self._doc_ids]
        if unknown:
            raise self._broken(f"query {i}: doc ids not in the corpus: {unknown[:5]}")
        if any(a[1] < b[1] for a, b in zip(hits, hits[1:])):
            raise self._broken(f"query {i}: hits are not sorted by score descending")
        return hits

    def _broken(self, what: str) -> RetrieverError:
        return RetrieverError(f"retriever {self.name!r} broke the retriever contract on dataset {self.dataset!r}: {what}")

    def __repr__(self) -> str:
        return f"CheckedRetriever({self.name!r}, dataset={self.dataset!r})"


def describe(specs: Mapping[str, RetrieverSpec]) -> list[dict[str, Any]]:
    """One row per spec (name, kind, description, settings), for metadata and reports."""
    return [{"retriever": n, "kind": s.kind, "description": s.description, "settings": s.settings()} for n, s in specs.items()]
