"""Turn each option of a multiple-choice question into a checkable claim.

Decomposition sees the question and the options ONLY: :func:`decompose` takes ``(case_id, question,
options)``, never a :class:`~retrieval_pipeline.core.common.types.Case`, so the marked answer and the
explanation cannot leak into what gets proven.

One :class:`Claim` per option. Kinds:

* ``import``: ``from x import Y`` / ``import x`` works (true) or raises ImportError (false);
* ``exists``: a module attribute / class / function / method exists (``shutil.copy2``,
  ``func.cache_info()``, a bare ``CamelCase`` name of the library under test, a method of a named class);
* ``signature_param``: a named callable has a parameter of that name (``sort_keys`` of
  ``json.dumps``); or, with ``details["exact"]``, its whole signature is the one written in the option;
* ``constructor_kwarg``: ``Class(kw=...)`` is accepted (or, for a "which is NOT accepted" question,
  rejected);
* ``expression``: evaluating a short expression gives a value / raises an exception (``mode`` =
  ``equals``, ``raises``, ``match``), or an option that *is* an expression evaluates without error
  (``mode`` = ``evaluates``);
* ``raises``, ``returns``, ``attribute`` (a member's default), ``enum_member``, ``subclass``,
  ``param_required``, ``cli_option`` and ``compound`` (prose that names code): the kinds built in
  :mod:`~retrieval_pipeline.core.verifier.claims.claim_kinds` (and, for statements about a pair of fields of a model,
  :mod:`~retrieval_pipeline.core.verifier.claims.field_claims`); each carries ``details["atoms"]``, the checks its
  proof runs;
* ``snippet``: for a question about a code snippet, what running it does (raises, runs, prints, leaves a value):
  :mod:`~retrieval_pipeline.core.verifier.claims.snippet_claims`; an option of such a question that names no outcome is
  read as any other option (``As a list to the `sub_agents` parameter``), with the names the snippet and its file
  define and import recorded (``details["snippet_names"]``): a lower-case name there is the snippet's, not the
  library's;
* ``none_of_the_above``: true iff no other option is true (derived, never tested);
* ``all_of_the_above``: true iff every other option is true, false iff one is false (derived, never tested);
* ``unknown``: prose the heuristics cannot check; it stays unverifiable offline.

A name question about a role ("which plugin ...") also checks that a named class is a subclass of the
library's base for that role (``details["role_bases"]``: ``BasePlugin``), when the library defines one. An
option with an alternative ("``LoggingPlugin`` (or a custom plugin)") is ``disjunctive``: its proof can make
it consistent, never false. Every claim keeps the question (:attr:`Claim.question`) for a prover that writes
proofs from it (an LLM); the marked answer is never part of a claim.

``details["decides"]`` says what a passing proof establishes: ``truth`` (the option is right, e.g. an
import that works, an expression that returns the stated value) or ``necessary`` (a condition the
option needs but which does not prove the behaviour the question describes: ``shutil.copy`` existing
does not show that it preserves timestamps). A failing ``necessary`` proof still makes the option
false.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

ClaimKind = Literal[
    "import",
    "exists",
    "signature_param",
    "constructor_kwarg",
    "expression",
    "raises",
    "returns",
    "attribute",
    "enum_member",
    "subclass",
    "param_required",
    "cli_option",
    "compound",
    "snippet",
    "none_of_the_above",
    "all_of_the_above",
    "unknown",
]
CLAIM_KINDS: tuple[str, ...] = get_args(ClaimKind)
#: The kinds decided from the other options' states, never proven themselves.
DERIVED_KINDS: frozenset[str] = frozenset({"none_of_the_above", "all_of_the_above"})
#: The kinds whose proofs run the atoms of ``details["atoms"]``.
ATOM_KINDS: frozenset[str] = frozenset(
    {"raises", "returns", "attribute", "enum_member", "subclass", "param_required", "cli_option", "compound"}
)
#: Names that stand for "some object of the kind the question describes" (``func.cache_info()``).
PLACEHOLDER_NAMES = ("func", "f", "fn", "function", "wrapped", "decorated")


@dataclass(frozen=True)
class Claim:
    """What one option asserts, in a form a prover can test."""

    case_id: str
    letter: str
    option_text: str
    kind: ClaimKind
    hypothesis: str
    subject: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    question: str = ""

    @property
    def decides(self) -> str:
        """``truth`` or ``necessary`` (see the module docstring); ``unknown``/E decide nothing."""
        return str(self.details.get("decides", "truth"))

    @property
    def decidable(self) -> bool:
        return self.kind != "unknown" and self.kind not in DERIVED_KINDS


# --------------------------------------------------------------------------------------------------
# Patterns

_NONE_OF_THE_ABOVE = re.compile(r"^\s*none of (the )?(above|these)\.?\s*$", re.I)
_ALL_OF_THE_ABOVE = re.compile(r"^\s*all of (the )?(above|these)\.?\s*$", re.I)
_FROM_IMPORT = re.compile(r"^\s*from\s+([A-Za-z_][\w.]*)\s+import\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*;?\s*$")
_PLAIN_IMPORT = re.compile(r"^\s*import\s+([A-Za-z_][\w.]*)\s*;?\s*$")
_DEF = re.compile(r"^\s*(async\s+)?def\s+([A-Za-z_]\w*)\s*\((.*)\)\s*(->\s*[^:]+)?:?\s*$", re.S)
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_NAME_PATH_OPTION = re.compile(r"^\s*`?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\(\))?`?\s*$")
_KWARG_OPTION = re.compile(r"^\s*`?([A-Za-z_]\w*)\s*(?:=\s*(.+?))?`?\s*$")
_CAMEL = re.compile(r"^_?[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")
_RAISES_OPTION = re.compile(r"^\s*(?:it\s+)?raises?\s+(?:an?\s+)?`?([A-Za-z_][\w.]*)`?", re.I)
_MATCH_OPTION = re.compile(r"^\s*an?\s+match object for\s+(.+?)\s*\.?\s*$", re.I)
_SPAN = re.compile(r"`([^`]+)`")
_PARAM_WORDS = r"(?:keyword arguments?|keywords?|arguments?|parameters?|kwargs?|params?)"
_PARAM_QUESTION = re.compile(rf"\bwhich\b[^?]*?\b{_PARAM_WORDS}\b|\b(?:which|what)\s+`[^`]+`\s+{_PARAM_WORDS}\b", re.I)
_NAME_QUESTION = re.compile(
    r"\bwhich\b[^?]*?\b(class methods?|methods?|attributes?|fields?|propert(?:y|ies)|functions?|calls?|class(?:es)?|"
    r"decorators?|types?|plugins?|tools?|"
    r"exceptions?|objects?|services?|base class|configuration object)\b",
    re.I,
)
_ACCEPTANCE = re.compile(r"\b(accepted|accepts|accept|valid keyword|allowed)\b", re.I)
_NEGATED = re.compile(r"\bNOT\b|\bnot\s+(?:an?\s+)?(?:accepted|valid|allowed|supported)\b")
_CONSTRUCTOR = re.compile(r"\b(constructor|constructing|construct|initiali[sz](?:e|ing))\b", re.I)
_DECORATED = re.compile(r"decorated with\s+`([^`]+)`", re.I)
_SUBJECT_AFTER = re.compile(
    r"(?:\bof(?: the)?|\bby|\bto(?: the)?|\bfor|constructing an?|calling|initiali[sz]ing an?|"
    r"inheriting from|subclassing|in(?: an?)?|an?)\s+`([^`]+)`",
    re.I,
)


# --------------------------------------------------------------------------------------------------
# Question analysis


@dataclass
class _Frame:
    """What the question says, independent of any option."""

    question: str
    spans: list[str]
    bindings: dict[str, dict[str, str]]  # name -> {"path": ...} or {"decorated_with": ...}
    expression: dict[str, str] | None  # {"expr", "setup", "mode"} for "what does `E` return"
    negated: bool
    param_question: bool
    name_question: bool
    member_question: bool  # the name question asks for a member of its subject (a method, an attribute)
    acceptance: bool
    constructor: bool
    subject: str | None  # the callable/class/module the question is about


def _parses(text: str, mode: str = "eval") -> ast.AST | None:
    try:
        return ast.parse(text, mode=mode)
    except (SyntaxError, ValueError):
        return None


def _has_call(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.Call) for node in ast.walk(tree))


def _clean_callable(span: str) -> str | None:
    """``runner.run_async()`` -> ``runner.run_async``; None when the span is not a name path."""
    text = span.strip()
    if text.endswith("()"):
        text = text[:-2]
    if _DOTTED.match(text) or (_IDENT.match(text) and _CAMEL.match(text)):
        return text
    return None


def _question_expression(question: str) -> dict[str, str] | None:
    """The expression a "what does `E` return / raise" question evaluates, if any."""
    patterns: list[tuple[str, str]] = [
        (r"after\s+`(?P<setup>[^`]+)`\s*,\s*what does\s+`(?P<expr>[^`]+)`\s+return", "equals"),
        (r"what exception does\s+`(?P<expr>[^`]+)`\s+raise", "raises"),
        (r"how many characters (?:long )?is\s+`(?P<expr>[^`]+)`", "len"),
        (r"what is the\s+`\.(?P<attr>\w+)`\s+of\b[^`]*`(?P<expr>[^`]+)`", "attr"),
        (r"what (?:does|is)\s+`(?P<expr>[^`]+)`\s*(?:return|evaluate to|give|produce)?\s*[?(]", "equals"),
    ]
    for pattern, mode in patterns:
        match = re.search(pattern, question, re.I)
        if not match:
            continue
        expr = match.group("expr").strip()
        tree = _parses(expr)
        if tree is None or not _has_call(tree):
            continue
        setup = match.groupdict().get("setup") or ""
        if setup and _parses(setup, "exec") is None:
            continue
        if mode == "len":
            expr, setup, mode = f"len({expr})", "", "equals"
        elif mode == "attr":
            expr, setup, mode = f"({expr}).{match.group('attr')}", "", "equals"
        if _parses(expr) is None:  # ``len(x  # note)``: the wrapped text is no expression
            continue
        return {"expr": expr, "setup": setup, "mode": mode}
    return None


def _bindings(question: str, spans: list[str]) -> dict[str, dict[str, str]]:
    """Short names the question introduces: ``collections.deque`` binds ``deque``; decorated functions."""
    found: dict[str, dict[str, str]] = {}
    for span in spans:
        name = _clean_callable(span)
        if name and "." in name:
            short = name.rsplit(".", 1)[1]
            found.setdefault(short, {"path": name})
    decorated = _DECORATED.search(question)
    if decorated:
        decorator = _clean_callable(decorated.group(1)) or decorated.group(1).strip()
        for placeholder in PLACEHOLDER_NAMES:
            found[placeholder] = {"decorated_with": decorator}
    return found


def _subject(question: str, spans: list[str]) -> str | None:
    """The callable/class the question is about: ``Which `X` parameter``, ``... of `X```, else the first."""
    candidates = [c for c in (_clean_callable(s) for s in spans) if c]
    if not candidates:
        return None
    direct = re.search(rf"(?:which|what)\s+`([^`]+)`\s+(?:{_PARAM_WORDS}|attributes?|methods?|fields?|propert(?:y|ies))", question, re.I)
    if direct and _clean_callable(direct.group(1)):
        return _clean_callable(direct.group(1))
    for match in _SUBJECT_AFTER.finditer(question):
        name = _clean_callable(match.group(1))
        if name:
            return name
    return candidates[0]


def _asks_for_parameter(question: str) -> bool:
    """Whether the question asks which parameter (argument, keyword) to use: "which `X` parameter ...", "which ...
    argument ...". Not when it first asks for something else and names parameters after ("Which method do you override
    to give the model the tool's declaration (name, description, parameters)?" asks for a method)."""
    param = _PARAM_QUESTION.search(question)
    if param is None:
        return False
    name = _NAME_QUESTION.search(question)
    if name is None:
        return True
    word = re.search(rf"\b{_PARAM_WORDS}\b", question[param.start() :], re.I)
    return word is None or param.start() + word.start() < name.start(1)


#: The nouns of a name question that ask for a member of the question's subject ("which method of `Runner`", "which
#: `EventActions` field", "which `LlmAgent` property").
_MEMBER_NOUNS = re.compile(r"^(?:(?:class )?methods?|attributes?|fields?|propert(?:y|ies)|calls?)$", re.I)


def _asks_for_member(question: str, subject: str | None) -> bool:
    """Whether a name question asks for a member of its subject: a method, an attribute or a call, or a function of a
    module. "Which built-in tool do you give a `LoopAgent`'s sub-agent?" asks for a tool, which the library defines
    wherever it likes: a bare name is not looked up on `LoopAgent` (where its absence would prove nothing)."""
    match = _NAME_QUESTION.search(question)
    if match is None or subject is None:
        return False
    noun = match.group(1)
    return bool(_MEMBER_NOUNS.match(noun)) or (noun.lower().startswith("function") and subject.split(".")[-1][:1].islower())


def analyse_question(question: str) -> _Frame:
    spans = _SPAN.findall(question)
    subject = _subject(question, spans)
    return _Frame(
        question=question,
        spans=spans,
        bindings=_bindings(question, spans),
        expression=_question_expression(question),
        negated=bool(_NEGATED.search(question)),
        param_question=_asks_for_parameter(question),
        name_question=bool(_NAME_QUESTION.search(question)),
        member_question=_asks_for_member(question, subject),
        acceptance=bool(_ACCEPTANCE.search(question)),
        constructor=bool(_CONSTRUCTOR.search(question)),
        subject=subject,
    )


def free_names(expr: str) -> list[str]:
    """Names an expression (or statements) reads without defining them, builtins excluded, in order."""
    tree = _parses(expr) or _parses(expr, "exec")
    if tree is None:
        return []
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    lambda_args = {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda) for a in n.args.args}
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            name = node.id
            if name in assigned or name in lambda_args or hasattr(builtins, name) or name in names:
                continue
            names.append(name)
    return names


def _has_placeholder(expr: str) -> bool:
    """``data=...`` or ``my_image``: an option that is a sketch, not runnable code."""
    tree = _parses(expr)
    if tree is None:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            return True
        if isinstance(node, ast.Name) and re.match(r"^(my|your|some)_", node.id):
            return True
    return False


def _literal(text: str) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def is_literal(text: str) -> bool:
    """Whether ``text`` is a Python literal (``'x'``, ``[0, 1]``, ``{'k': 40}``), as ``ast.literal_eval`` reads it."""
    return _literal(text)[0]


def _literal_source(text: str, value: Any) -> str:
    """Source that ``ast.literal_eval`` turns back into ``value``: its repr, or the option's own text when the
    repr is no literal (``1e999`` is ``inf``)."""
    ok, again = _literal(repr(value))
    return repr(value) if ok and again == value else text.strip()


# --------------------------------------------------------------------------------------------------
# Options


def _make(case_id: str, letter: str, text: str, kind: str, hypothesis: str, subject: str | None, **details: Any):
    return Claim(case_id, letter, text, kind, hypothesis, subject, details)  # type: ignore[arg-type]


def _import_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    match = _FROM_IMPORT.match(option)
    if match:
        module, names = match.group(1), [n.strip() for n in match.group(2).split(",")]
        return _make(
            case_id, letter, text, "import", f"`{option}` runs without ImportError", module,
            statement=option, module=module, names=names, decides="truth",
        )  # fmt: skip
    match = _PLAIN_IMPORT.match(option)
    if match:
        module = match.group(1)
        return _make(
            case_id, letter, text, "import", f"`{option}` runs without ImportError", module,
            statement=option, module=module, names=[], decides="truth",
        )  # fmt: skip
    return None


def _signature_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    match = _DEF.match(option)
    if not match:
        return None
    source = option.rstrip().rstrip(":") + ":\n    ..."
    tree = _parses(source, "exec")
    if tree is None or not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    func = tree.body[0]
    if not re.search(rf"(?<![\w]){re.escape(func.name)}(?!\w)", frame.question):  # `async def callback(...)`: the user's own
        return _make(case_id, letter, text, "unknown", "not checkable offline", None,
                     reason=f"`{func.name}` is a function the user writes (the question does not name it), not a library object to look up")  # fmt: skip
    params: list[list[str]] = []
    args = func.args
    for arg in args.posonlyargs:
        params.append([arg.arg, "POSITIONAL_ONLY"])
    for arg in args.args:
        params.append([arg.arg, "POSITIONAL_OR_KEYWORD"])
    if args.vararg:
        params.append([args.vararg.arg, "VAR_POSITIONAL"])
    for arg in args.kwonlyargs:
        params.append([arg.arg, "KEYWORD_ONLY"])
    if args.kwarg:
        params.append([args.kwarg.arg, "VAR_KEYWORD"])
    owner = next((c for c in (_clean_callable(s) for s in frame.spans) if c and _CAMEL.match(c.split(".")[-1])), None)
    subject = f"{owner}.{func.name}" if owner else func.name
    is_async = isinstance(func, ast.AsyncFunctionDef)
    return _make(
        case_id, letter, text, "signature_param",
        f"`{subject}` is {'async ' if is_async else ''}with parameters ({', '.join(p[0] for p in params)})", subject,
        exact=True, params=params, is_async=is_async, decides="truth",
    )  # fmt: skip


def _value_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    spec = frame.expression
    if spec is None:
        return None
    expr, setup = spec["expr"], spec["setup"]
    names = free_names(setup + "\n" + expr if setup else expr)
    common = dict(expr=expr, setup=setup, free_names=names, bindings=frame.bindings, decides="truth")
    raises = _RAISES_OPTION.match(option)
    if raises or spec["mode"] == "raises":
        exception = raises.group(1) if raises else option.strip("` .")
        if not re.match(r"^[A-Za-z_][\w.]*$", exception):
            return None
        return _make(
            case_id, letter, text, "expression", f"`{expr}` raises {exception}", expr,
            mode="raises", exception=exception, **common,
        )  # fmt: skip
    match = _MATCH_OPTION.match(option)
    if match:
        ok, value = _literal(match.group(1))
        if ok and isinstance(value, str):
            return _make(
                case_id, letter, text, "expression", f"`{expr}` returns a match object for {value!r}", expr,
                mode="match", expected=repr(value), **common,
            )  # fmt: skip
        return None
    ok, value = _literal(option)
    if not ok:
        return None
    return _make(
        case_id, letter, text, "expression", f"`{expr}` == {value!r}", expr,
        mode="equals", expected=_literal_source(option, value), **common,
    )  # fmt: skip


def _param_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    if not frame.param_question or frame.subject is None:
        return None
    match = _KWARG_OPTION.match(option)
    if not match:
        return None
    name, value = match.group(1), match.group(2)
    if value is not None and not _literal(value)[0]:
        return None
    subject = frame.subject
    is_class = _CAMEL.match(subject.split(".")[-1]) is not None
    kind = "constructor_kwarg" if (frame.constructor or is_class) else "signature_param"
    if frame.negated and not frame.acceptance:
        return None  # "which parameter does NOT do X": behaviour, not checkable by signature
    decides = "truth" if frame.acceptance else "necessary"
    accepted = not frame.negated
    verb = "accepts" if accepted else "does not accept"
    head = subject.split(".")[0]
    return _make(
        case_id, letter, text, kind, f"`{subject}` {verb} the keyword argument `{name}`", subject,
        param=name, value=value, expect_accepted=accepted, decides=decides,
        free_names=[head], bindings=frame.bindings,
    )  # fmt: skip


def _call_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    expr = option.strip().strip("`").rstrip(".")
    tree = _parses(expr)
    if tree is None or not isinstance(tree.body, ast.Call) or _has_placeholder(expr):  # type: ignore[attr-defined]
        return None
    if not (tree.body.args or tree.body.keywords):  # type: ignore[attr-defined]
        return None
    return _make(
        case_id, letter, text, "expression", f"`{expr}` evaluates without error", expr,
        mode="evaluates", expr=expr, setup="", free_names=free_names(expr), bindings=frame.bindings,
        decides="necessary",
    )  # fmt: skip
