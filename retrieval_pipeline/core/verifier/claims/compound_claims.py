"""Compound claims: an option that stands for several atoms, all of which must hold (``necessary``).

The builders have the signature of those in :mod:`~retrieval_pipeline.core.verifier.claims.claims`
(``(case_id, letter, text, option, frame) -> Claim | None``); their atoms (listed in
:mod:`~retrieval_pipeline.core.verifier.claims.claim_kinds`) are checked by :mod:`~retrieval_pipeline.core.verifier.proofs.atom_proofs`.

* "which abstract (base) class ...?": the named class exists and is abstract (:func:`abstract_class_claim`);
* "how is data persisted with `X`?": the storage an option names is used by the code behind ``X``
  (:func:`storage_claim`);
* a prose option whose backticked code is turned into atoms by the shape of each span (:func:`prose_atoms`),
  and a call sketch with placeholders whose callees must accept its keywords (:func:`call_sketch_claim`). An
  option that says "or ..." can never be proven false, and one that negates or retires what it names
  ("not", "deprecated", "instead of") gets no claim at all.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from retrieval_pipeline.core.common.astutil import dotted_name
from retrieval_pipeline.core.verifier.claims.claim_kinds import (
    _DISJUNCTIVE,
    _FLAG,
    _IDENT,
    _NEGATING,
    _PATH,
    _PLACEHOLDER_HEADS,
    _camelish,
    _claim,
    _owner_like,
    _plain,
    question_command,
)
from retrieval_pipeline.core.verifier.claims.claims import _CAMEL, _SPAN, Claim, _Frame, _has_placeholder, _parses

_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")
_FILE_NAME = re.compile(r"\.(?:py|pyi|json|ya?ml|toml|txt|cfg|ini|md|csv|env|sh)$")
_KWARG_SPAN = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(.+)$", re.S)
#: Words after a backticked name saying it is a member of a class (``the `tools` parameter``).
_MEMBER_NOUN = re.compile(r"^\W{0,3}(?:\w+\s+){0,1}?(?:parameter|argument|field|attribute|property|method|kwarg|keyword)s?\b", re.I)
_LINKING = re.compile(r"\b(?:on|in|of|to|for|with|into|from)\b", re.I)

_ABSTRACT_QUESTION = re.compile(r"\bwhich\b[^?]*?\babstract\s+(?:base\s+)?class(?:es)?\b", re.I)
_CLASS_OPTION = re.compile(r"^\s*`?(?P<path>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)`?\s*\.?\s*$")


def abstract_class_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A class named in answer to "which abstract (base) class ...?": it must exist and be abstract (``necessary``).

    Not for a negated question ("which is NOT an abstract class"), nor for an option that is more than one name.
    """
    if frame.negated or not _ABSTRACT_QUESTION.search(frame.question):
        return None
    named, alternative = clean_name_option(option)
    match = _CLASS_OPTION.match(named)
    if match is None or not _camelish(match.group("path")):
        return None
    path = match.group("path")
    atoms = [{"check": "exists", "path": path}, {"check": "abstract", "path": path}]
    return _claim(case_id, letter, text, "compound", f"`{path}` exists and is an abstract class", path, atoms, frame,
                  decides="necessary", disjunctive=alternative)  # fmt: skip


_STORAGE_QUESTION = re.compile(r"\b(?:how|where)\s+(?:is|are)\b[^?]*\b(?:persisted|stored|saved|kept)\b", re.I)
#: (what, pattern on the option, patterns on the code behind the class): a storage an option may name, and the
#: text any code that uses it must hold (a module, a call). Absent from every module behind the class: not used.
STORAGE_TECHNOLOGIES: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("SQLite", re.compile(r"\bsqlite\d?\b", re.I), (r"sqlite",)),
    ("PostgreSQL", re.compile(r"\bpostgres(?:ql)?\b", re.I), (r"postgres", r"psycopg", r"asyncpg")),
    ("MySQL", re.compile(r"\bmysql\b", re.I), (r"mysql",)),
    ("Redis", re.compile(r"\bredis\b", re.I), (r"redis",)),
    ("Firestore", re.compile(r"\bfirestore\b", re.I), (r"firestore",)),
    ("Google Cloud Storage", re.compile(r"\bgoogle cloud storage\b|\bgcs\b", re.I),
     (r"google\.cloud\b[^\n]*\bstorage\b", r"\bgcs\b", r"\bstorage\.Client\b", r"gs://")),
    ("a file", re.compile(r"\bfiles?\b|\bon disk\b", re.I),
     (r"\bopen\(", r"\.write_text\(", r"\.write_bytes\(", r"\baiofiles\b", r"\bjson\.dump\(", r"\bpickle\b", r"\bshelve\b",
      r"\bshutil\b", r"\bos\.replace\(", r"\btempfile\b")),
)  # fmt: skip
_IN_MEMORY_DICT = re.compile(r"\bdict(?:ionary)?\b[^.;]*\b(?:ram|memory)\b|\b(?:ram|memory)\b[^.;]*\bdict(?:ionary)?\b", re.I)


def storage_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """Where a class keeps its data ("How is session data persisted with `X`?"): each storage the option names must
    be mentioned by the code behind `X` (:data:`STORAGE_TECHNOLOGIES`); "a dictionary in memory" needs an ``X()`` that
    holds a dict. ``necessary``: using SQLite somewhere does not show the data goes there. No claim for an option
    that negates or offers an alternative ("or"), nor for one that names no storage."""
    subject = frame.subject
    if not (_STORAGE_QUESTION.search(frame.question) and subject and _camelish(subject)):
        return None
    plain = _plain(option)
    if _NEGATING.search(plain) or _DISJUNCTIVE.search(plain):
        return None
    atoms: list[dict[str, Any]] = [
        {"check": "mentions", "path": subject, "patterns": list(patterns), "what": what}
        for what, pattern, patterns in STORAGE_TECHNOLOGIES
        if pattern.search(plain)
    ]
    if _IN_MEMORY_DICT.search(plain):
        atoms.append({"check": "holds", "path": subject, "type": "dict"})
    if not atoms:
        return None
    shown = ", ".join(str(a.get("what") or "a dict in memory") for a in atoms)
    return _claim(case_id, letter, text, "compound", f"the code behind `{subject}` uses {shown}", subject, atoms, frame,
                  decides="necessary")  # fmt: skip


#: "How should sub-agents be passed to `SequentialAgent`?", "... How do you pass them?": how things are handed over.
_PASS_QUESTION = re.compile(r"\bhow\b[^?]*\b(?:pass|passed|provide|provided|supply|supplied|give|given)\b", re.I)
#: "As a list to the `sub_agents` parameter.", "Pass a list containing the tool instances to the `tools` parameter."
_LIST_TO_PARAMETER = re.compile(
    r"^\s*(?:(?:pass|provide|supply|give)\s+(?:them\s+)?)?(?:as\s+)?an?\s+(?:list|sequence)\b[^`]*?\bto\s+(?:the\s+)?"
    r"`(?P<name>[a-z_]\w*)`\s+(?:parameter|argument|field|keyword(?:\s+argument)?)\s*\.?\s*$",
    re.I,
)


def names_the_things(name: str, question: str) -> bool:
    """The question names what it hands over with the parameter's own name: ``sub_agents`` in "sub-agents",
    ``tools`` in "a set of tools" (not ``agents`` in "sub-agents")."""
    words = [re.escape(w) for w in name.removesuffix("s").split("_") if w]
    return bool(words) and re.search(r"(?<![\w-])" + r"[-_ ]".join(words) + r"s?(?![\w-])", question, re.I) is not None


def list_parameter_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """The option "As a list to the `p` parameter", answering how things are passed to the question's class: ``p`` is a
    parameter or field of it whose declared type takes a list. That proves the answer (``truth``) when ``p`` is named for the
    very things the question hands over ("sub-agents" and ``sub_agents``); otherwise it is only ``necessary``."""
    match = _LIST_TO_PARAMETER.match(option)
    owner = frame.subject
    if match is None or frame.negated or not _PASS_QUESTION.search(frame.question) or not owner or not _owner_like(owner):
        return None
    name = match.group("name")
    atoms = [{"check": "member", "owner": owner, "name": name}, {"check": "takes_list", "owner": owner, "name": name}]
    named = names_the_things(name, frame.question)
    hypothesis = f"`{owner}` takes a list through `{name}`" + (", the parameter named for what the question passes" if named else "")
    return _claim(case_id, letter, text, "compound", hypothesis, owner, atoms, frame, decides="truth" if named else "necessary")


def prose_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """Atoms for each piece of code a prose option names; the option needs all of them (``necessary``)."""
    atoms, bindings = prose_atoms(option, frame)
    if not atoms:
        return None
    disjunctive = bool(_DISJUNCTIVE.search(_plain(option)))
    shown = "; ".join(_describe(a) for a in atoms)
    return _claim(case_id, letter, text, "compound", f"what the option names exists as it says: {shown}", None, atoms, frame,
                  decides="necessary", disjunctive=disjunctive, bindings=bindings)  # fmt: skip


def call_sketch_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A call written with placeholders (``data=...``, ``my_image``): each callee must accept its keywords."""
    expr = option.strip().strip("`").rstrip(".")
    tree = _parses(expr)
    if tree is None or not isinstance(tree.body, ast.Call) or not _has_placeholder(expr):  # type: ignore[attr-defined]
        return None
    atoms = _call_atoms(tree)
    if not atoms:
        return None
    shown = "; ".join(_describe(a) for a in atoms)
    return _claim(case_id, letter, text, "compound", f"the call sketch fits the signatures: {shown}", None, atoms, frame,
                  decides="necessary")  # fmt: skip


def prose_atoms(option: str, frame: _Frame) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """The atoms of a prose option and the short names its dotted module paths bind (``telemetry``).

    Nothing when the option negates or retires what it names (see :data:`_NEGATING`), or names no code.
    """
    spans = _SPAN.findall(option)
    if not spans or _NEGATING.search(_plain(option)):
        return [], {}
    bindings: dict[str, dict[str, str]] = {}
    for span in spans:
        path = span.strip().removesuffix("()")
        if "." in path and _PATH.match(path) and path.split(".")[0].islower() and not _camelish(path):
            bindings.setdefault(path.rsplit(".", 1)[1], {"path": path})
    command = next((s.split() for s in spans if question_command(f"`{s}`")), None) or question_command(frame.question)
    positions = _span_positions(option)
    atoms: list[dict[str, Any]] = []
    own = question_own_names(frame.question)
    for index, span in enumerate(spans):
        if span.strip().removesuffix("()") in own:
            continue  # `city` of the question's own `def get_weather(city: str)`: the user's name, not the library's
        for atom in _span_atoms(index, span.strip(), spans, positions, option, frame, command):
            if atom not in atoms:
                atoms.append(atom)
    return atoms, bindings


def question_own_names(question: str) -> set[str]:
    """The names the question's own code defines: the functions it shows in backticks and their parameters (``def
    get_weather(city: str, unit: str = "celsius") -> dict``, a ``lambda``). An option naming one speaks of the user's
    code, so no lookup in the library decides it. (``include_contents='none'`` defines nothing: it sets a library
    parameter.)"""
    names: set[str] = set()
    for span in _SPAN.findall(question):
        code = span.strip()
        for text in (code, code + ": ..."):  # a signature written without its body
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(node.name)
                elif isinstance(node, ast.arg):
                    names.add(node.arg)
            break
    return names


def _span_positions(option: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _SPAN.finditer(option)]


def _span_atoms(
    index: int,
    span: str,
    spans: list[str],
    positions: list[tuple[int, int]],
    option: str,
    frame: _Frame,
    command: list[str] | None,
) -> list[dict[str, Any]]:
    """The atoms one backticked span stands for, by its shape (see :func:`prose_atoms`)."""
    if _FLAG.match(span):
        return [{"check": "cli_option", "command": command, "option": span}] if command else []
    kwarg = _KWARG_SPAN.match(span)
    environment = re.search(r"\benv(?:ironment)?\s+var(?:iable)?s?\b", option, re.I) is not None
    variable = kwarg.group(1) if kwarg else span
    if _ENV_NAME.match(variable) and (environment or "_" in variable):
        return [{"check": "env_var", "name": variable}]
    if kwarg and _IDENT.match(kwarg.group(1)) and _parses(span) is None:
        owner = _owner(index, spans, positions, option, frame)
        return [{"check": "member", "owner": owner, "name": kwarg.group(1)}] if owner else []
    tree = _parses(span)
    if tree is None:
        return []
    body = tree.body  # type: ignore[attr-defined]
    if isinstance(body, ast.Call):
        return _call_atoms(tree, owner=_owner(index, spans, positions, option, frame))
    path = dotted_name(body)
    if path is None or path.split(".")[0] in _PLACEHOLDER_HEADS or _FILE_NAME.search(path):
        return []
    if _camelish(path) or ("." in path and any(_CAMEL.match(p) for p in path.split("."))):
        return [{"check": "exists", "path": path}]
    if "." in path:
        return [{"check": "exists", "path": path}]
    owner = _owner(index, spans, positions, option, frame)
    if owner and _names_a_member(index, positions, option, frame):
        return [{"check": "member", "owner": owner, "name": path}]
    return []


def _call_atoms(tree: ast.AST, owner: str | None = None) -> list[dict[str, Any]]:
    """One atom per call in an expression: a class-like callee must accept its keywords; a method must exist."""
    atoms: list[dict[str, Any]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = dotted_name(node.func)
        if callee is None or callee.split(".")[0] in _PLACEHOLDER_HEADS or re.match(r"^(my|your|some)_", callee):
            continue
        keywords = [k.arg for k in node.keywords if k.arg]
        if _camelish(callee) or callee.split(".")[-1][:1].isupper():
            atoms.append({"check": "accepts", "callee": callee, "keywords": keywords})
        elif "." in callee:
            atoms.append({"check": "exists", "path": callee})
        elif owner:
            atoms.append({"check": "member", "owner": owner, "name": callee})
    return atoms


def _owner(index: int, spans: list[str], positions: list[tuple[int, int]], option: str, frame: _Frame) -> str | None:
    """Whose member a lower-case name is: the next owner-like span it is linked to, else the previous, else the subject."""
    for later in range(index + 1, len(spans)):
        candidate = spans[later].strip().removesuffix("()")
        between = option[positions[index][1] : positions[later][0]]
        if _owner_like(candidate) and _LINKING.search(between) and len(between.split()) <= 6:
            return candidate
    for earlier in range(index - 1, -1, -1):
        candidate = spans[earlier].strip().removesuffix("()")
        if _owner_like(candidate):
            return candidate
    subject = frame.subject
    return subject if subject and _owner_like(subject) else None


def _names_a_member(index: int, positions: list[tuple[int, int]], option: str, frame: _Frame) -> bool:
    """A bare lower-case name is a member when the option says so: ``the `x` parameter``, "Set `x` on ...", or
    the question asks for parameters of its subject."""
    after = option[positions[index][1] :]
    if _MEMBER_NOUN.match(after):
        return True
    before = option[: positions[index][0]]
    if re.match(r"^\s*set\s+(?:the\s+|a\s+)?$", before, re.I):
        return True
    return frame.param_question and frame.subject is not None


def _describe(atom: dict[str, Any]) -> str:
    check = atom["check"]
    if check == "member":
        return f"{atom['owner']} has {atom['name']}"
    if check == "accepts":
        return f"{atom['callee']}({', '.join(atom['keywords'])}) is accepted"
    if check == "env_var":
        return f"the environment variable {atom['name']} is read"
    if check == "cli_option":
        return f"`{' '.join(atom['command'])}` has {atom['option']}"
    return f"{atom.get('path') or atom.get('module')} exists"


def clean_name_option(option: str) -> tuple[str, bool]:
    """An option naming one thing with an alternative in parentheses (``LoggingPlugin (or a custom plugin)``):
    the name alone, and True when an alternative was dropped (the option can then not be proven false)."""
    match = re.match(r"^\s*`?([A-Za-z_][\w.]*(?:\(\))?)`?\s*\((?:or\b|e\.g\.|such as\b)[^)]*\)\s*\.?\s*$", option, re.I)
    if match:
        return match.group(1), True
    return option, False


__all__ = [
    "STORAGE_TECHNOLOGIES",
    "abstract_class_claim",
    "call_sketch_claim",
    "clean_name_option",
    "list_parameter_claim",
    "names_the_things",
    "prose_atoms",
    "prose_claim",
    "storage_claim",
]
