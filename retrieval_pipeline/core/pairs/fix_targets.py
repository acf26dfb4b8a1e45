"""Infer the primary subject class of a ``fix_error`` case (the API object the fix is about).

:class:`TargetInferer` is the seam: :class:`AstTargetInferer` reads the solution code when it exists
(fixed file, else test file, else unfixed file) and falls back to the case description; an LLM-based
inferer can later implement the same protocol.

AST rules: imported names are mapped to FQNs; every call of an imported name (or of a bare name that
is neither a builtin nor defined locally, e.g. a class whose import is missing) counts once, so does
subclassing, and a call of a locally defined class credits its bases. A call whose result is bound
to a name (or returned) and never passed into another call is a *root* object
(``root_agent = SequentialAgent(sub_agents=[a, b])``) and gets :data:`ROOT_BONUS`.
Candidates are resolved through the corpus (exact / alias / suffix, then by short name); the highest
score wins, ties going to root objects, then to the more frequent, then to the first seen.

Every inference carries a :class:`TargetRecord` (``evidence["target_record"]``): the target, its source
(``code:<file role>`` or ``description``), what the description alone names, whether the two agree, and
every solution file that was tried but not used (a syntax error with its line, a refused or unreadable
file, a file that calls no corpus object), so a report can say how many targets came from code.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from retrieval_pipeline.core.common.astutil import dotted_name
from retrieval_pipeline.core.common.paths import PathRefused, read_bounded
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.pairs.gold import CorpusLookup, resolve_gold

InferenceMethod = Literal["ast", "description", "llm", "none"]

#: Extra score for a root object (bound or returned, never passed into another call).
ROOT_BONUS = 3
#: Solution files tried in order (roles of ``Case.files``).
FILE_ORDER = ("fixed", "test", "unfixed")
#: Largest solution file read, in bytes (a bigger one is skipped with a warning).
MAX_CODE_BYTES = 1_000_000

_BUILTIN_NAMES = frozenset(dir(builtins))
_BACKTICKED = re.compile(r"`([^`]+)`")
_CAMEL_CASE = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+\b")
_DOTTED_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass
class TargetInference:
    """The inferred subject of one case: a corpus ``doc_id`` (or None), how, and the evidence."""

    case_id: str
    target: str | None
    method: InferenceMethod
    evidence: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class TargetRecord:
    """Where one case's target came from, and what the description alone would have named.

    Attributes:
        case_id: The case.
        target: The inferred document id (None when nothing was found).
        source: ``code:<role>`` (the file of that role in ``Case.files``), ``description`` or ``none``.
        description_target: The document the description alone resolves to (None when it names none).
        agrees: For a target from code, whether it equals ``description_target``; None when either is
            missing or the target came from the description itself (nothing to compare).
        file_problems: Solution files tried and not used, in the order tried: ``role``, ``file``,
            ``line`` (of a syntax error, else None) and ``problem``.
        missing_files: Files the suite named that do not exist (``role``, ``path``).
    """

    case_id: str
    target: str | None
    source: str
    description_target: str | None
    agrees: bool | None
    file_problems: list[dict[str, Any]] = field(default_factory=list)
    missing_files: list[dict[str, str]] = field(default_factory=list)

    @property
    def from_code(self) -> bool:
        """True when the target was read from a solution file."""
        return self.source.startswith("code:")

    @classmethod
    def from_evidence(cls, evidence: dict[str, Any]) -> TargetRecord | None:
        """The record an inference stored in its evidence (None when there is none, e.g. another inferer's)."""
        raw = evidence.get("target_record")
        return cls(**raw) if isinstance(raw, dict) else None


@runtime_checkable
class TargetInferer(Protocol):
    """Anything that names the primary subject of a fix_error case."""

    name: str

    def infer(self, case: Case, lookup: CorpusLookup) -> TargetInference: ...


class AstTargetInferer:
    """Infer the subject from solution code with :mod:`ast`, else from the description."""

    name = "ast"

    def infer(self, case: Case, lookup: CorpusLookup) -> TargetInference:
        """Infer the subject of ``case`` against the corpus behind ``lookup``.

        Args:
            case: A fix_error case (``files`` holds existing solution/test files by role).
            lookup: The corpus indexes.

        Returns:
            The inference; ``warnings`` name missing or unparsable files together with the case, and
            ``evidence["target_record"]`` holds its :class:`TargetRecord` (as a dict).
        """
        warnings = _missing_file_warnings(case)
        problems: list[dict[str, Any]] = []
        from_code = None
        for role in (r for r in FILE_ORDER if case.files.get(r) is not None):
            from_code = _infer_from_file(case.case_id, role, Path(case.files[role]), lookup, warnings, problems)
            if from_code is not None:
                break
        from_description = _infer_from_description(case, lookup, warnings)
        inference = from_code or from_description
        inference.evidence["target_record"] = asdict(target_record(case, inference, from_description.target, problems))
        return inference


def target_record(case: Case, inference: TargetInference, description_target: str | None, problems: list[dict[str, Any]]) -> TargetRecord:
    """The :class:`TargetRecord` of an inference: its source, the description's target and their agreement."""
    source = f"code:{inference.evidence['role']}" if inference.method == "ast" else inference.method
    compared = source.startswith("code:") and inference.target is not None and description_target is not None
    missing = [m for m in case.extra.get("missing_files", []) if isinstance(m, dict)]
    agrees = inference.target == description_target if compared else None
    return TargetRecord(case.case_id, inference.target, source, description_target, agrees, problems, missing)


# --------------------------------------------------------------------------- symbol resolution


@dataclass
class SymbolMatch:
    """A symbol resolved to a document: how (exact/alias/suffix/name), and the other plausible ids."""

    doc_id: str
    how: str
    alternatives: list[str]


def resolve_symbol(symbol: str, lookup: CorpusLookup) -> SymbolMatch | None:
    """Resolve a symbol: a bare name by short name; a dotted one gold-style, then by its last part.

    A dotted symbol only falls back to same-named ids of its own top-level package, so
    ``pydantic.BaseModel`` never lands on some ``google.adk...BaseModel``.
    """
    if "." not in symbol and symbol not in lookup:
        return _pick_canonical(lookup.by_name(symbol), lookup)
    resolution = resolve_gold(symbol, lookup)
    if resolution.doc_id is not None:
        return SymbolMatch(resolution.doc_id, resolution.method, resolution.candidates)
    package, name = symbol.split(".", 1)[0], symbol.rsplit(".", 1)[-1]
    pool = resolution.candidates or [d for d in lookup.by_name(name) if d.split(".", 1)[0] == package]
    return _pick_canonical(pool, lookup)


def _pick_canonical(doc_ids: list[str], lookup: CorpusLookup) -> SymbolMatch | None:
    """Pick among same-named ids: classes first, then the shortest public path (id or alias), then shortest id."""
    if not doc_ids:
        return None
    ranked = sorted(doc_ids, key=lambda d: (lookup.kind(d) != "class", _shortest_path_depth(d, lookup), len(d)))
    return SymbolMatch(ranked[0], "name", ranked[1:])


def _shortest_path_depth(doc_id: str, lookup: CorpusLookup) -> int:
    """Components in the shortest dotted name a document is known by (a re-export is more canonical)."""
    return min(name.count(".") + 1 for name in [doc_id, *lookup.aliases(doc_id)])


# --------------------------------------------------------------------------- warnings


def _missing_file_warnings(case: Case) -> list[str]:
    """One warning per file the suite named but that does not exist."""
    return [
        f"case {case.case_id!r}: {item.get('role', '?')} file not found: {item.get('path', '?')}"
        for item in case.extra.get("missing_files", [])
        if isinstance(item, dict)
    ]


# --------------------------------------------------------------------------- from a file


def _infer_from_file(
    case_id: str, role: str, path: Path, lookup: CorpusLookup, warnings: list[str], problems: list[dict[str, Any]]
) -> TargetInference | None:
    """Infer from one solution file; None (with a warning and a problem record) when it is unusable or yields nothing."""
    tree = _parse_file(case_id, role, path, warnings, problems)
    if tree is None:
        return None
    uses = _SymbolUses.collect(tree)
    scored, unresolved = _score(uses, lookup)
    evidence: dict[str, Any] = {"source": "file", "role": role, "file": str(path), "unresolved": unresolved}
    if not scored:
        warnings.append(f"case {case_id!r}: no corpus object is called in {role} file {path}")
        problems.append({"role": role, "file": str(path), "line": None, "problem": "no corpus object is called"})
        return None
    winner = scored[0]
    evidence["candidates"] = scored
    evidence["reason"] = _why_won(winner, scored[1:])
    return TargetInference(case_id, winner["doc_id"], "ast", evidence, warnings)


def _parse_file(case_id: str, role: str, path: Path, warnings: list[str], problems: list[dict[str, Any]]) -> ast.Module | None:
    """The parsed solution file; None when it is refused, unreadable or does not parse (warned and recorded)."""
    line: int | None = None
    try:
        return ast.parse(read_case_file(path, role), filename=str(path))
    except PathRefused as exc:
        problem, warning = f"not read: {exc.reason}", f"{role} file {path} not read: {exc.reason}"
    except SyntaxError as exc:
        line, problem = exc.lineno, f"syntax error at line {exc.lineno}: {exc.msg}"
        warning = f"syntax error in {role} file {path} at line {exc.lineno}: {exc.msg}"
    except (OSError, UnicodeDecodeError) as exc:
        problem, warning = f"cannot read: {exc}", f"cannot read {role} file {path}: {exc}"
    except (ValueError, RecursionError) as exc:  # NUL bytes; nesting too deep for the parser
        problem, warning = f"cannot parse: {type(exc).__name__}", f"cannot parse {role} file {path}: {type(exc).__name__}"
    warnings.append(f"case {case_id!r}: {warning}")
    problems.append({"role": role, "file": str(path), "line": line, "problem": problem})
    return None


def read_case_file(path: str | Path, role: str) -> str:
    """The text of a solution file a suite named: a regular file, not a symlink, at most :data:`MAX_CODE_BYTES`.

    The suite loader already checked that the path resolves inside the suite's files root and stored the
    resolved path; refusing a symlink here means the file cannot be swapped for one between loading and reading.
    The text is decoded as Python decodes source (PEP 263: UTF-8, a BOM or a ``# -*- coding: ... -*-`` line).
    Binary content (a NUL byte) or bytes that do not decode are refused, naming the offset, so neither the AST
    nor an LLM prompt ever gets them, and callers warn naming the case and the file.

    Raises:
        PathRefused: A symlink, not a regular file, too large, binary or not decodable; no text is returned.
        OSError: Missing or unreadable.
    """
    data = read_bounded(path, f"{role} file", MAX_CODE_BYTES, follow_symlinks=False)
    nul = data.find(b"\0")
    if nul >= 0:
        raise PathRefused(f"{role} file holds binary data (a NUL byte at offset {nul}), not Python source: refused", path=str(path))
    try:
        encoding, declaration = tokenize.detect_encoding(io.BytesIO(data).readline)[0], None
    except SyntaxError as exc:  # undecodable first lines, or an unknown or contradictory coding declaration
        encoding, declaration = "utf-8", exc.msg
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise PathRefused(
            f"{role} file is not {exc.encoding} text (byte 0x{data[exc.start]:02x} at offset {exc.start}: {exc.reason}): refused",
            path=str(path),
        ) from None
    if declaration is not None:
        raise PathRefused(f"{role} file has an unusable encoding declaration ({declaration}): refused", path=str(path))
    return text


@dataclass
class _SymbolUses:
    """What a module uses: per expanded symbol, how often it is called/subclassed, and if it is a root."""

    counts: dict[str, int] = field(default_factory=dict)
    roots: set[str] = field(default_factory=set)
    via: dict[str, str] = field(default_factory=dict)  # symbol -> local class it was reached through

    @classmethod
    def collect(cls, tree: ast.Module) -> _SymbolUses:
        """Walk a parsed module and record every call/subclassing of an external symbol."""
        uses = cls()
        imports = _import_map(tree)
        local_classes = _local_class_bases(tree, imports)
        local_defs = _local_definitions(tree)
        consumed_names = _names_passed_to_calls(tree)
        for class_name, bases in local_classes.items():
            for base in bases:
                uses._add(base, root=False, via=class_name)
        for call, bound_names in _calls_with_binding(tree):
            dotted = dotted_name(call.func)
            if dotted is None:
                continue
            root = bound_names is not None and not (bound_names & consumed_names)
            if dotted in local_classes:
                for base in local_classes[dotted]:
                    uses._add(base, root=root, via=dotted)
                continue
            symbol = _expand(dotted, imports, local_defs)
            if symbol is not None:
                uses._add(symbol, root=root)
        return uses

    def _add(self, symbol: str, *, root: bool, via: str | None = None) -> None:
        """Count one use of ``symbol``."""
        self.counts[symbol] = self.counts.get(symbol, 0) + 1
        if root:
            self.roots.add(symbol)
        if via is not None:
            self.via.setdefault(symbol, via)


def _import_map(tree: ast.Module) -> dict[str, str]:
    """Local name -> FQN for every import in the module (relative imports map to the bare name)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    root = alias.name.split(".", 1)[0]
                    names[root] = root
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    continue
                qualified = f"{node.module}.{alias.name}" if node.module and not node.level else alias.name
                names[alias.asname or alias.name] = qualified
    return names


def _local_class_bases(tree: ast.Module, imports: dict[str, str]) -> dict[str, list[str]]:
    """Locally defined class -> its base classes as expanded symbols."""
    classes: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            dotted = (dotted_name(base) for base in node.bases)
            classes[node.name] = [_expand(d, imports, set()) or d for d in dotted if d and d != "object"]
    return classes


def _local_definitions(tree: ast.Module) -> set[str]:
    """Names of functions and classes defined in the module (never corpus objects themselves)."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in ast.walk(tree) if isinstance(node, defs)}


def _names_passed_to_calls(tree: ast.Module) -> set[str]:
    """Names that appear anywhere inside the arguments of a call (their objects are consumed)."""
    passed: set[str] = set()
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        for argument in [*call.args, *(k.value for k in call.keywords)]:
            passed |= {n.id for n in ast.walk(argument) if isinstance(n, ast.Name)}
    return passed


def _calls_with_binding(tree: ast.Module) -> list[tuple[ast.Call, set[str] | None]]:
    """Every call, paired with the names its result is bound to ('<return>' when returned).

    Only a call that *is* the whole assigned/returned value is bound; nested calls get None.
    """
    bound: dict[int, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound[id(node.value)] = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            bound[id(node.value)] = {"<return>"}
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    return [(call, bound.get(id(call))) for call in calls]


def _expand(dotted: str, imports: dict[str, str], local_defs: set[str]) -> str | None:
    """Map a called dotted name to a symbol: through imports, or a bare non-builtin, non-local name."""
    root, _, rest = dotted.partition(".")
    if root in imports:
        return f"{imports[root]}.{rest}" if rest else imports[root]
    if rest or root in _BUILTIN_NAMES or root in local_defs:
        return None  # attribute of a local object, a builtin, or our own helper
    return root  # e.g. a class used without its import: resolved by name


def _score(uses: _SymbolUses, lookup: CorpusLookup) -> tuple[list[dict[str, Any]], list[str]]:
    """Resolve used symbols to documents and score them, best first; also list unresolved symbols."""
    by_doc: dict[str, dict[str, Any]] = {}
    unresolved: list[str] = []
    for order, (symbol, count) in enumerate(uses.counts.items()):
        resolved = resolve_symbol(symbol, lookup)
        if resolved is None:
            unresolved.append(symbol)
            continue
        entry = by_doc.setdefault(resolved.doc_id, _candidate_entry(resolved, order))
        entry["symbols"].append(symbol if symbol not in uses.via else f"{symbol} (via {uses.via[symbol]})")
        entry["count"] += count
        entry["root"] = entry["root"] or symbol in uses.roots
    for entry in by_doc.values():
        entry["score"] = entry["count"] + (ROOT_BONUS if entry["root"] else 0)
    ranked = sorted(by_doc.values(), key=lambda e: (-e["score"], not e["root"], -e["count"], e["first_seen"]))
    return ranked, unresolved


def _candidate_entry(match: SymbolMatch, order: int) -> dict[str, Any]:
    """An empty evidence record for one candidate document."""
    return {
        "doc_id": match.doc_id,
        "symbols": [],
        "resolved_by": match.how,
        "alternatives": match.alternatives,
        "count": 0,
        "root": False,
        "first_seen": order,
    }


def _why_won(winner: dict[str, Any], others: list[dict[str, Any]]) -> str:
    """A one-line explanation of the winning candidate."""
    parts = [f"score {winner['score']}", f"used {winner['count']}x"]
    if winner["root"]:
        parts.append(f"root object (+{ROOT_BONUS})")
    if others and others[0]["score"] == winner["score"]:
        parts.append(f"tie with {others[0]['doc_id']} broken by root/frequency/first use")
    return f"{winner['doc_id']}: " + ", ".join(parts)


# --------------------------------------------------------------------------- from the description


def _infer_from_description(case: Case, lookup: CorpusLookup, warnings: list[str]) -> TargetInference:
    """Backticked names first, then CamelCase words; the first resolving to a class wins."""
    tried = [(name, resolve_symbol(name, lookup)) for name in description_names(case.query)]
    names = [
        {"name": name, "doc_id": match.doc_id if match else None, "kind": lookup.kind(match.doc_id) if match else None}
        for name, match in tried
    ]
    resolved = [(name, match) for name, match in tried if match is not None]
    classes = [(name, match) for name, match in resolved if lookup.kind(match.doc_id) == "class"]
    if not resolved:
        reason = "no solution file parsed and no description name resolves in the corpus"
        evidence = {"source": "description", "names": names, "reason": reason}
        return TargetInference(case.case_id, None, "none", evidence, warnings)
    name, match = (classes or resolved)[0]
    why = "first description name resolving to a class" if classes else "no name resolves to a class; first one"
    evidence = {
        "source": "description",
        "names": names,
        "alternatives": match.alternatives,
        "reason": f"{why}: {name!r} ({match.how})",
    }
    return TargetInference(case.case_id, match.doc_id, "description", evidence, warnings)


def description_names(text: str) -> list[str]:
    """Candidate API names in a description: backticked identifiers, then CamelCase words (deduplicated)."""
    backticked = [m.strip().strip("'\"").removesuffix("()") for m in _BACKTICKED.findall(text)]
    names = [n for n in backticked if _DOTTED_NAME.match(n)]
    names += _CAMEL_CASE.findall(_BACKTICKED.sub(" ", text))
    return list(dict.fromkeys(names))
