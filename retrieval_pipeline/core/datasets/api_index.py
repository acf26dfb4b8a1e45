"""Build an API corpus (one :class:`Document` per FQN) from a ranked-targets YAML or by introspection.

Both builders return a :class:`CorpusLoad`: the documents, the rejected entries, and a report of counts.
The document ``text`` is what BM25 and the embedding model see, so it is kept readable and bounded:
name, FQN, signature, the docstring (capped), and at most :data:`MAX_MEMBER_LINES` member lines.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Document, Rejected
from retrieval_pipeline.core.common.yaml_file import read_yaml

#: At most this many method/property lines go into a document's text.
MAX_MEMBER_LINES = 40
#: Docstrings are cut to this many characters in a document's text.
MAX_DOCSTRING_CHARS = 1500


@dataclass
class CorpusLoad:
    """A built corpus: documents in a deterministic order, rejected entries, and a count report."""

    documents: list[Document]
    rejects: list[Rejected] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- ranked targets


def load_ranked_targets(path: str | Path) -> CorpusLoad:
    """Load a ranked-targets YAML (a list of API entries) into one Document per unique ``id``.

    Entries without an ``id`` and later duplicates of an ``id`` are rejected; entries without a
    docstring are kept (their text falls back to name and signature) and counted.

    Args:
        path: The ``ranked_targets.yaml`` file.

    Returns:
        The corpus; ``report`` holds ``total``, ``kept``, ``rejected``, ``duplicates``, ``missing_id``,
        ``missing_docstring`` (among kept) and ``by_kind``.

    Raises:
        InputError: The file is unreadable, not valid YAML, or not a list of entries.
    """
    path = Path(path)
    entries = _read_entry_list(path)
    class_ids = {str(e["id"]) for e in entries if isinstance(e, Mapping) and e.get("type") == "CLASS" and e.get("id")}

    documents: list[Document] = []
    rejects: list[Rejected] = []
    first_seen: dict[str, int] = {}
    duplicates = missing_id = missing_docstring = 0
    for index, entry in enumerate(entries):
        doc_id = _entry_id(entry)
        if doc_id is None:
            missing_id += 1
            rejects.append(_reject(path, None, index, "entry has no 'id' (or is not a mapping)"))
        elif doc_id in first_seen:
            duplicates += 1
            problem = f"duplicate 'id' (kept the first, at index {first_seen[doc_id]})"
            rejects.append(_reject(path, doc_id, index, problem))
        else:
            first_seen[doc_id] = index
            documents.append(_entry_document(entry, doc_id, class_ids, path))
            missing_docstring += 0 if _text(entry.get("docstring")) else 1

    report = {
        "total": len(entries),
        "kept": len(documents),
        "rejected": len(rejects),
        "duplicates": duplicates,
        "missing_id": missing_id,
        "missing_docstring": missing_docstring,
        "by_kind": dict(sorted(Counter(d.kind for d in documents).items())),
    }
    return CorpusLoad(documents=documents, rejects=rejects, report=report)


def _read_entry_list(path: Path) -> list[Any]:
    """Read the YAML file and check it is a list."""
    data = read_yaml(path, "ranked targets")
    if not isinstance(data, list):
        raise InputError(f"top level must be a list of entries (got {type(data).__name__})", path=str(path))
    return data


def _entry_id(entry: Any) -> str | None:
    """Return the entry's id as a stripped string, or None when missing/empty/not a mapping."""
    if not isinstance(entry, Mapping) or entry.get("id") is None:
        return None
    return str(entry["id"]).strip() or None


def _reject(path: Path, doc_id: str | None, index: int, problem: str) -> Rejected:
    """Build a Rejected for one index entry, naming the file and the entry."""
    who = f"entry {doc_id!r} (index {index})" if doc_id else f"entry at index {index}"
    return Rejected(source_file=str(path), case_id=doc_id, index=index, reason=f"file {path}, {who}: {problem}")


def _entry_document(entry: Mapping[str, Any], doc_id: str, class_ids: set[str], path: Path) -> Document:
    """Turn one ranked-targets entry into a Document."""
    kind = _text(entry.get("type")).lower() or "unknown"
    name = _text(entry.get("name")) or doc_id.rsplit(".", 1)[-1]
    return Document(
        doc_id=doc_id,
        text=_entry_text(entry, doc_id, name, kind),
        title=name,
        kind=kind,
        module=_module_of(doc_id, kind, class_ids),
        aliases=[a for a in (_text(x) for x in entry.get("aliases") or []) if a],
        source=str(path),
    )


def _module_of(doc_id: str, kind: str, class_ids: set[str]) -> str:
    """The module an id lives in: itself for modules, else the nearest ancestor that is not a class."""
    if kind == "module" or "." not in doc_id:
        return doc_id
    parent = doc_id.rsplit(".", 1)[0]
    while parent in class_ids and "." in parent:
        parent = parent.rsplit(".", 1)[0]
    return parent


def _entry_text(entry: Mapping[str, Any], doc_id: str, name: str, kind: str) -> str:
    """Compose the searchable text: header, signature, docstring, then member lines."""
    lines = [f"{name} ({kind})", doc_id]
    signature = _text(entry.get("signature")) or _text(entry.get("constructor_signature"))
    if signature:
        lines.append(_compact_signature(signature))
    docstring = _text(entry.get("docstring"))
    if docstring:
        lines.append(_cap(docstring, MAX_DOCSTRING_CHARS))
    members = list(_member_lines(entry))
    if members:
        lines.append("Members:")
        lines.extend(members[:MAX_MEMBER_LINES])
        if len(members) > MAX_MEMBER_LINES:
            lines.append(f"... and {len(members) - MAX_MEMBER_LINES} more")
    return "\n".join(lines)


def _member_lines(entry: Mapping[str, Any]) -> Iterator[str]:
    """Yield one line per own method/property, then per inherited method/property."""
    for key in ("methods", "properties"):
        for member in entry.get(key) or []:
            line = _member_line(member)
            if line:
                yield line
    for key in ("inherited_methods", "inherited_properties"):
        inherited = entry.get(key)
        for base, members in inherited.items() if isinstance(inherited, Mapping) else []:
            for member in members or []:
                line = _member_line(member)
                if line:
                    yield f"{line} [from {base}]"


def _member_line(member: Any) -> str:
    """Format a member as ``- signature: first docstring line`` ('' when it has no signature)."""
    if not isinstance(member, Mapping):
        return ""
    signature = _compact_signature(_text(member.get("signature")))
    if not signature:
        return ""
    summary = _first_line(_text(member.get("docstring")))
    return f"- {signature}: {summary}" if summary else f"- {signature}"


def _compact_signature(signature: str) -> str:
    """Drop the ``def `` prefix and trailing colon of a source-style signature."""
    signature = signature.strip()
    signature = signature.removeprefix("async def ").removeprefix("def ")
    return signature.removesuffix(":").strip()


# --------------------------------------------------------------------------- introspection

#: A built document and whether its object had a docstring.
_Built = tuple[Document, bool]


def introspect_modules(module_names: Iterable[str]) -> CorpusLoad:
    """Build a corpus by importing modules and listing their public classes, functions and methods.

    For each module: one ``module`` document, one per public class/function (``<module>.<attr>``,
    respecting ``__all__``), and one ``method`` document per public routine in each class's own
    ``__dict__``. An object re-exported from elsewhere gets its defining path as an alias
    (``os.path.join`` -> ``posixpath.join``). A module that fails to import is a reject.

    Args:
        module_names: Importable module names, in the order wanted (repeats are ignored).

    Returns:
        The corpus; ``report`` holds ``modules``, ``failed_modules``, ``kept``, ``duplicates``,
        ``missing_docstring`` and ``by_kind``.
    """
    names = list(dict.fromkeys(module_names))
    built: list[_Built] = []
    rejects: list[Rejected] = []
    for module_name in names:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # any import-time failure is the module's problem, not ours
            rejects.append(_import_reject(module_name, exc))
            continue
        built.extend(_module_documents(module_name, module))

    unique = _first_per_id(built)
    documents = [doc for doc, _ in unique]
    report = {
        "modules": len(names),
        "failed_modules": len(rejects),
        "kept": len(documents),
        "duplicates": len(built) - len(unique),
        "missing_docstring": sum(1 for _, has_docstring in unique if not has_docstring),
        "by_kind": dict(sorted(Counter(d.kind for d in documents).items())),
    }
    return CorpusLoad(documents=documents, rejects=rejects, report=report)


def package_modules(package: str, max_modules: int = 5000) -> list[str]:
    """The package and its public submodules (no ``_``-prefixed or ``tests`` component), sorted.

    Walks the installed package's folders with :mod:`pkgutil` without importing the submodules, so a
    submodule that fails to import becomes a reject later in :func:`introspect_modules`, not a crash here.

    Raises:
        InputError: The package is not installed.
    """
    import pkgutil

    spec = importlib.util.find_spec(package)
    if spec is None:
        raise InputError(f"package {package!r} is not installed in this environment", path=package)
    found = [package]
    for info in pkgutil.walk_packages(spec.submodule_search_locations or [], prefix=f"{package}.", onerror=lambda _: None):
        parts = info.name.split(".")[1:]
        if any(p.startswith("_") or p in {"tests", "test"} for p in parts):
            continue
        found.append(info.name)
        if len(found) >= max_modules:
            break
    return sorted(found)


def _import_reject(module_name: str, exc: Exception) -> Rejected:
    """A reject naming the module that failed to import and why."""
    reason = f"module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
    return Rejected(source_file=f"introspection:{module_name}", case_id=module_name, index=None, reason=reason)


def _module_documents(module_name: str, module: ModuleType) -> Iterator[_Built]:
    """Yield the module's own document, then each public class/function followed by its methods."""
    yield _object_document(module_name, "module", module, module_name)
    for attr in _public_names(module):
        obj = getattr(module, attr, None)
        if not (inspect.isclass(obj) or inspect.isroutine(obj) or _is_wrapped_function(obj)):
            continue  # constants, instances, submodules
        fqn = f"{module_name}.{attr}"
        yield _object_document(fqn, "class" if inspect.isclass(obj) else "function", obj, module_name)
        if inspect.isclass(obj):
            yield from _method_documents(obj, fqn, module_name)


def _public_names(module: ModuleType) -> list[str]:
    """Sorted public attribute names: ``__all__`` when defined, else ``dir()``; ``_``-names skipped."""
    declared = getattr(module, "__all__", None)
    names = [str(n) for n in declared] if isinstance(declared, (list, tuple)) else dir(module)
    return sorted({n for n in names if not n.startswith("_")})


def _is_wrapped_function(obj: Any) -> bool:
    """A decorated function that is no longer a plain routine, e.g. ``functools.lru_cache`` wrappers
    (``urllib.parse.urlsplit``)."""
    return callable(obj) and not inspect.isclass(obj) and inspect.isroutine(getattr(obj, "__wrapped__", None))


def _method_documents(cls: type, class_fqn: str, module_name: str) -> Iterator[_Built]:
    """Yield one method document per public routine of the class.

    Routines defined in the class's own ``__dict__`` count, and so do those inherited from *private*
    base classes (``argparse.ArgumentParser.add_argument`` lives on ``argparse._ActionsContainer``):
    a private base's API is only documented through its public subclasses. Members inherited from
    public or builtin classes (``dict.get`` on ``OrderedDict``) are left to those classes.
    """
    own = dict(vars(cls))
    for base in cls.__mro__[1:]:
        if base.__name__.startswith("_") and base.__module__ != "builtins":
            for attr, raw in vars(base).items():
                own.setdefault(attr, raw)
    for attr, raw in sorted(own.items()):
        if not attr.startswith("_") and inspect.isroutine(raw) and not _patched_in(raw, cls):
            yield _object_document(f"{class_fqn}.{attr}", "method", getattr(cls, attr, raw), module_name)


def _patched_in(raw: Any, cls: type) -> bool:
    """A method another package attached at run time (transformers adds ``Logger.warning_once``).

    Such methods depend on what else the process imported, so they are left out: the corpus must be
    the same whichever process builds it.
    """
    module = getattr(getattr(raw, "__func__", raw), "__module__", None)
    return isinstance(module, str) and module.split(".")[0] != cls.__module__.split(".")[0]


def _object_document(fqn: str, kind: str, obj: Any, module_name: str) -> _Built:
    """A Document for one module/class/function/method, aliased to where it is really defined."""
    name = fqn.rsplit(".", 1)[-1]
    defined_at = _defined_path(obj) if kind != "module" else None
    docstring = inspect.getdoc(obj)
    doc = Document(
        doc_id=fqn,
        text=_object_text(name, fqn, kind, obj, docstring),
        title=name,
        kind=kind,
        module=module_name,
        aliases=[defined_at] if defined_at and defined_at != fqn else [],
        source=f"introspection:{module_name}",
    )
    return doc, bool(docstring and docstring.strip())


def _defined_path(obj: Any) -> str | None:
    """``obj.__module__ + '.' + obj.__qualname__`` when both are strings, else None."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        return f"{module}.{qualname}"
    return None


def _object_text(name: str, fqn: str, kind: str, obj: Any, docstring: str | None) -> str:
    """Compose the searchable text: header, FQN, signature when available, capped docstring."""
    lines = [f"{name} ({kind})", fqn]
    signature = _signature_of(obj) if kind != "module" else None
    if signature:
        lines.append(f"{name}{signature}")
    if docstring and docstring.strip():
        lines.append(_cap(docstring.strip(), MAX_DOCSTRING_CHARS))
    return "\n".join(lines)


class _Opaque:
    """Stands in for a default value whose repr changes from one process to the next."""

    def __repr__(self) -> str:
        return "<default>"


_OPAQUE = _Opaque()


def _signature_of(obj: Any) -> str | None:
    """The signature as text, stable across processes; None when Python cannot tell.

    Defaults whose repr carries a memory address (``copy_function=<function copy2 at 0x7f...>``) or
    runtime state (``logging.shutdown``'s handler list) are shown as ``<default>``: otherwise the
    document text, and so its embedding-cache key, would change on every run.
    """
    try:
        signature = inspect.signature(obj)
    except (ValueError, TypeError):
        return None
    params = [
        p.replace(default=_OPAQUE) if p.default is not p.empty and _unstable_repr(p.default) else p for p in signature.parameters.values()
    ]
    return str(signature.replace(parameters=params))


def _unstable_repr(value: Any) -> bool:
    text = repr(value)
    return " at 0x" in text or (text.startswith("<") and text.endswith(">"))


def _first_per_id(built: list[_Built]) -> list[_Built]:
    """Keep the first document of each ``doc_id``, preserving order."""
    seen: set[str] = set()
    unique: list[_Built] = []
    for doc, has_docstring in built:
        if doc.doc_id not in seen:
            seen.add(doc.doc_id)
            unique.append((doc, has_docstring))
    return unique


# --------------------------------------------------------------------------- text helpers


def _text(value: Any) -> str:
    """A value as stripped text ('' for None and non-strings)."""
    return value.strip() if isinstance(value, str) else ""


def _first_line(text: str) -> str:
    """The first non-empty line of ``text``."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _cap(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
