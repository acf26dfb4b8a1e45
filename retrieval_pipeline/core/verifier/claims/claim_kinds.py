"""More claim kinds: what a call does, members of classes and models, enums, subclasses, required
parameters and command-line flags (one atom each); the atoms every kind may use.

Every builder here has the signature of those in :mod:`~retrieval_pipeline.core.verifier.claims.claims`
(``(case_id, letter, text, option, frame) -> Claim | None``) and sees the question and the option only. Each
claim it makes carries ``details["atoms"]``: the checks its proof runs against the installed library
(:mod:`~retrieval_pipeline.core.verifier.proofs.atom_proofs`). An atom is a JSON-able dict with a ``check``:

* ``exists`` (``path``): a name, module attribute or class member exists;
* ``member`` (``owner``, ``name``): ``owner`` has ``name`` as a parameter, a pydantic/dataclass field, a class
  attribute, or an attribute its source assigns (``self.name = ...``);
* ``accepts`` (``callee``, ``keywords``): the callee accepts these keyword arguments (a call sketch, not run);
* ``subclass`` (``path``, ``base``) and ``role`` (``path``, ``bases``): class relations;
* ``raises`` / ``returns`` (``expr``, ``setup``, ``free``, ``exception`` / ``expected`` or ``type``): what
  evaluating an expression does;
* ``default`` (``owner``, ``name``, ``expected``): the default of a parameter, field or class attribute;
* ``enum_member`` (``enum``, ``member``); ``required`` (``owner``, ``name``, ``required``);
* ``env_var`` (``name``): some installed source mentions the variable; ``cli_option`` (``command``, ``option``):
  a console script's (sub)command has that flag; ``import`` (``module``);
* ``mentions`` (``path``, ``patterns``, ``what``): the code behind a class mentions a technology;
  ``holds`` (``path``, ``type``): an instance built without arguments holds a ``dict``; ``takes_list`` (``owner``,
  ``name``): a parameter or field declares a type that takes a list;
* ``abstract`` (``path``): a class is abstract (abstract methods, ``abc.ABC`` among its bases, a method that
  raises ``NotImplementedError``);
* ``presence`` (``owner``, ``sets``, ``controls``) and ``deprecated`` (``owner``, ``name``): which combinations of
  fields a model accepts, and whether a field is deprecated (built by
  :mod:`~retrieval_pipeline.core.verifier.claims.field_claims`).

The kinds (``details["decides"]`` as in :mod:`claims`):

* ``raises``, ``returns``: the option states what a call does, or answers "what does `E` return" with a type
  (``truth``);
* ``attribute``: the default of a member (``truth``);
* ``enum_member``: a member of an enum (``truth`` when the question asks which is a member, else ``necessary``);
* ``subclass``: one class derives from another (``truth``);
* ``param_required``: a parameter is required / optional (``truth``);
* ``cli_option``: a flag of a command named in the question (``necessary``);
* ``compound``: several atoms that must all hold (``necessary``), built by
  :mod:`~retrieval_pipeline.core.verifier.claims.compound_claims`: an abstract class, where a class keeps its
  data, and prose options that name code. This module holds the helpers the builders share.
"""

from __future__ import annotations

import builtins
import re
from typing import Any

from retrieval_pipeline.core.verifier.claims.claims import (
    _CAMEL,
    _SPAN,
    Claim,
    _Frame,
    _has_placeholder,
    _literal,
    _literal_source,
    _make,
    _parses,
    free_names,
)

ATOM_CHECKS: tuple[str, ...] = (
    "exists",
    "member",
    "accepts",
    "subclass",
    "role",
    "raises",
    "returns",
    "default",
    "enum_member",
    "required",
    "env_var",
    "cli_option",
    "import",
    "presence",
    "deprecated",
    "abstract",
    "mentions",
    "holds",
    "takes_list",
)

_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_FLAG = re.compile(r"^--?[A-Za-z][\w-]*$")
_CLI_WORD = re.compile(r"^[A-Za-z][\w.-]*$")
#: Words that make a prose option say something other than "this code exists": no claim is made from it.
_NEGATING = re.compile(
    r"\b(?:not|never|no|none|neither|nor|cannot|can't|don't|doesn't|isn't|aren't|won't|without|instead|unless|"
    r"deprecated|removed|renamed|replaced|replaces|formerly|previously|legacy|obsolete|no longer)\b",
    re.I,
)
_DISJUNCTIVE = re.compile(r"\bor\b", re.I)
_PLACEHOLDER_HEADS = frozenset({"self", "cls"})
#: Nouns after "which" that name no role a library base class could stand for.
_GENERIC_NOUNS = frozenset(
    "of the a an these those following is are one class classes type types object objects method methods function functions "
    "parameter parameters argument arguments attribute attributes import statement statements value values option options call "
    "calls decorator decorators exception exceptions component components configuration field fields member members flag flags "
    "format formats way ways abstract base keyword keywords expression expressions code python google genai library module "
    "modules name names setting settings file files command commands property properties would should can could do does "
    "did must will shall may might you we i it help helps be use used need needs".split()
)


# --------------------------------------------------------------------------------------------------
# What the question and option name


def question_command(question: str) -> list[str] | None:
    """The shell command a question names in backticks (``adk deploy cloud_run``), as words; None if none.

    A command is a span of two or more plain words that is not Python (``adk api_server`` does not parse).
    """
    for span in _SPAN.findall(question):
        words = span.split()
        if len(words) >= 2 and all(_CLI_WORD.match(w) for w in words) and _parses(span) is None:
            return words
    return None


def role_bases(question: str) -> list[str]:
    """Base classes a "which <noun>" question may mean: ``which plugin`` -> ``BasePlugin``.

    The noun is the first word after "which" (of at most three) that is not generic (:data:`_GENERIC_NOUNS`:
    class, type, object, ...). The prover keeps only the bases the library defines; with none, no role is checked.
    """
    match = re.search(r"\bwhich\s+((?:[A-Za-z]+\s+){0,2}[A-Za-z]+)", question, re.I)
    if not match:
        return []
    nouns = [w.lower() for w in match.group(1).split() if w.isalpha() and w.lower() not in _GENERIC_NOUNS]
    if not nouns:
        return []
    noun = nouns[0]  # the first word that is not generic: "which plugin would you use" -> plugin
    stems = [noun] + ([noun[:-1]] if noun.endswith("s") and len(noun) > 3 else [])
    return [f"Base{stem.capitalize()}" for stem in stems]


def _camelish(path: str) -> bool:
    """A class-like path: ``App``, ``types.Content`` (the last part is CamelCase)."""
    return bool(_PATH.match(path)) and _CAMEL.match(path.split(".")[-1]) is not None


def _owner_like(path: str) -> bool:
    """Something that can own members: a class-like path, or a dotted path (``json.dumps``)."""
    return _camelish(path) or ("." in path and bool(_PATH.match(path)) and path.split(".")[0] not in _PLACEHOLDER_HEADS)


def _heads(atoms: list[dict[str, Any]]) -> list[str]:
    """The first name of every path the atoms load, plus the free names of their expressions, in order."""
    heads: list[str] = []
    for atom in atoms:
        for key in ("path", "owner", "callee", "base", "enum", "type"):
            value = atom.get(key)
            if isinstance(value, str) and value:
                heads.append(value.split(".")[0])
        heads += list(atom.get("free") or [])
    return list(dict.fromkeys(h for h in heads if h and not hasattr(builtins, h)))


def _claim(
    case_id: str,
    letter: str,
    text: str,
    kind: str,
    hypothesis: str,
    subject: str | None,
    atoms: list[dict[str, Any]],
    frame: _Frame,
    *,
    decides: str,
    disjunctive: bool = False,
    bindings: dict[str, dict[str, str]] | None = None,
) -> Claim:
    merged = {**frame.bindings, **(bindings or {})}
    return _make(
        case_id, letter, text, kind, hypothesis, subject,
        atoms=atoms, free_names=_heads(atoms), bindings=merged, decides=decides, disjunctive=disjunctive,
    )  # fmt: skip


def _plain(text: str) -> str:
    """The option's words outside backticks."""
    return _SPAN.sub(" ", text)


# --------------------------------------------------------------------------------------------------
# Behaviour of a call: raises / returns


_STATED_RAISES = re.compile(
    r"^(?:calling\s+|evaluating\s+|running\s+)?`(?P<expr>[^`]+)`\s+(?:always\s+)?raises?\s+(?:an?\s+)?`?(?P<exc>[A-Za-z_][\w.]*)`?\W*$",
    re.I,
)
_STATED_RETURNS = re.compile(
    r"^(?:calling\s+|evaluating\s+)?`(?P<expr>[^`]+)`\s+(?:returns|evaluates to|gives)\s+(?P<rest>.+?)\s*\.?$", re.I
)
_TYPE_PHRASE = re.compile(
    r"^(?:it\s+returns\s+)?(?:an?\s+(?:new\s+)?|an\s+instance\s+of\s+|the\s+)?`?(?P<type>[A-Za-z_][\w.]*)`?"
    r"(?:\s+(?:object|instance|value))?\s*\.?$",
    re.I,
)


def type_name(phrase: str) -> str | None:
    """The type a phrase names (``a `list```, ``An instance of `Path```, ``str``), or None."""
    match = _TYPE_PHRASE.match(phrase.strip())
    if not match:
        return None
    name = match.group("type")
    if _camelish(name):
        return name
    return name if isinstance(getattr(builtins, name, None), type) and not name[:1].isupper() else None


def _expression_ok(expr: str) -> bool:
    tree = _parses(expr)
    return tree is not None and not _has_placeholder(expr)


def _behaviour_atom(expr: str, setup: str, rest: str) -> tuple[str, dict[str, Any], str] | None:
    """A ``returns`` atom for what an expression is said to give: a literal value, else a type."""
    free = free_names(setup + "\n" + expr if setup else expr)
    value = rest.strip().strip("`")
    ok, literal = _literal(value)
    if ok:
        return "returns", {"check": "returns", "expr": expr, "setup": setup, "free": free,
                           "expected": _literal_source(value, literal), "type": None}, f"`{expr}` == {literal!r}"  # fmt: skip
    named = type_name(rest)
    if named:
        return "returns", {"check": "returns", "expr": expr, "setup": setup, "free": free, "expected": None,
                           "type": named}, f"`{expr}` returns a {named}"  # fmt: skip
    return None


def stated_behaviour_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """The option states what a call does: "`int('x')` raises `ValueError`", "`len('ab')` returns 2"."""
    raises = _STATED_RAISES.match(option)
    if raises and _expression_ok(raises.group("expr")):
        expr, exception = raises.group("expr").strip(), raises.group("exc").rstrip(".")
        atom = {"check": "raises", "expr": expr, "setup": "", "free": free_names(expr), "exception": exception}
        return _claim(case_id, letter, text, "raises", f"`{expr}` raises {exception}", expr, [atom], frame, decides="truth")
    returns = _STATED_RETURNS.match(option)
    if returns and _expression_ok(returns.group("expr")):
        built = _behaviour_atom(returns.group("expr").strip(), "", returns.group("rest"))
        if built:
            kind, atom, hypothesis = built
            return _claim(case_id, letter, text, kind, hypothesis, atom["expr"], [atom], frame, decides="truth")
    return None


def returns_type_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A "what does `E` return?" question answered with a type: "a `list`", "An instance of `Path`"."""
    spec = frame.expression
    if spec is None or spec["mode"] != "equals" or _literal(option)[0]:
        return None
    named = type_name(option)
    if named is None:
        return None
    expr, setup = spec["expr"], spec["setup"]
    atom = {"check": "returns", "expr": expr, "setup": setup, "free": free_names(setup + "\n" + expr if setup else expr),
            "expected": None, "type": named}  # fmt: skip
    return _claim(case_id, letter, text, "returns", f"`{expr}` returns a {named}", expr, [atom], frame, decides="truth")


# --------------------------------------------------------------------------------------------------
# Members: defaults, required parameters, enum members


_DEFAULT_QUESTION = (
    re.compile(
        r"what is the default(?: value)? (?:of|for) (?:the )?`(?P<target>[^`]+)`"
        r"(?:\s+(?:parameter|argument|field|attribute|option|keyword argument))?(?:\s+(?:of|in|on)\s+(?:the\s+|an?\s+)?`(?P<owner>[^`]+)`)?",
        re.I,
    ),
    re.compile(r"what does\s+`(?P<target>[^`]+)`\s+default to", re.I),
    re.compile(r"what is\s+`(?P<target>[^`]+)`\s+by default", re.I),
)
_STATED_DEFAULT = re.compile(r"^`(?P<target>[^`]+)`\s+defaults\s+to\s+(?P<value>.+?)\s*\.?$", re.I)


def _member_target(target: str, owner: str | None, frame: _Frame) -> tuple[str, str] | None:
    """``(owner, name)`` for ``Owner.name``, or ``name`` with an owner from the question."""
    target = target.strip()
    if target.endswith("()"):
        return None
    if "." in target and _PATH.match(target):
        head, _, name = target.rpartition(".")
        return head, name
    if _IDENT.match(target):
        holder = (owner or "").strip().removesuffix("()") or frame.subject
        if holder and _owner_like(holder) and holder != target:
            return holder, target
    return None


def default_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """The default of a parameter, field or class attribute: "What is the default of `X.y`?" / "`X.y` defaults to 3"."""
    stated = _STATED_DEFAULT.match(option)
    if stated:
        member, value = _member_target(stated.group("target"), None, frame), stated.group("value").strip("` ")
    else:
        member, value = None, option.strip().strip("`").rstrip(".")
        for pattern in _DEFAULT_QUESTION:
            match = pattern.search(frame.question)
            if match:
                member = _member_target(match.group("target"), match.groupdict().get("owner"), frame)
                break
    ok, literal = _literal(value)
    if member is None or not ok:
        return None
    owner, name = member
    atom = {"check": "default", "owner": owner, "name": name, "expected": _literal_source(value, literal)}
    return _claim(case_id, letter, text, "attribute", f"`{owner}.{name}` defaults to {literal!r}", f"{owner}.{name}", [atom],
                  frame, decides="truth")  # fmt: skip


_REQUIRED_QUESTION = re.compile(
    r"\bwhich\b[^?]*?\b(?:arguments?|parameters?|fields?|keyword arguments?|kwargs?)\b[^?]*?\b(?P<word>required|mandatory|optional)\b",
    re.I,
)
_STATED_REQUIRED = re.compile(r"^`?(?P<name>[A-Za-z_]\w*)`?\s+is\s+(?P<word>required|mandatory|optional)\W*$", re.I)


def required_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A parameter or field is required / optional: "Which argument of `X` is required?" -> ``fieldnames``."""
    subject = frame.subject
    if subject is None or not _owner_like(subject):
        return None
    stated = _STATED_REQUIRED.match(option)
    question = _REQUIRED_QUESTION.search(frame.question)
    if stated:
        name, word = stated.group("name"), stated.group("word")
    elif question:
        match = re.match(r"^\s*`?([A-Za-z_]\w*)`?\s*\.?\s*$", option)
        if not match:
            return None
        name, word = match.group(1), question.group("word")
    else:
        return None
    required = word.lower() != "optional"
    atom = {"check": "required", "owner": subject, "name": name, "required": required}
    return _claim(case_id, letter, text, "param_required", f"`{name}` of `{subject}` is {'required' if required else 'optional'}",
                  subject, [atom], frame, decides="truth")  # fmt: skip


_ENUM_QUESTION = (
    re.compile(r"\bwhich\s+(?:member|value|enum member|enum value)s?\s+of\s+(?:the\s+)?`(?P<enum>[^`]+)`", re.I),
    re.compile(r"\bwhich\s+`(?P<enum>[^`]+)`\s+(?:enum\s+)?(?:member|value)s?\b", re.I),
    re.compile(r"\bis\s+(?:a\s+)?(?:valid\s+)?(?:member|value)\s+of\s+(?:the\s+)?`(?P<enum>[^`]+)`", re.I),
)
_MEMBERSHIP_IS_THE_ANSWER = re.compile(r"\b(?:is|are)\s+(?:a\s+)?(?:valid\s+)?(?:members?|values?)\s+of\b", re.I)


def enum_member_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A member of an enum: "Which `StreamingMode` value ...?" -> ``BIDI`` or ``StreamingMode.BIDI``."""
    enum = None
    for pattern in _ENUM_QUESTION:
        match = pattern.search(frame.question)
        if match and _camelish(match.group("enum").strip()):
            enum = match.group("enum").strip()
            break
    if enum is None:
        return None
    name = option.strip().strip("`").rstrip(".").strip("`")
    if name.startswith(enum + "."):
        name = name[len(enum) + 1 :]
    elif "." in name and _PATH.match(name) and name.split(".")[-2] == enum.split(".")[-1]:
        name = name.rsplit(".", 1)[1]
    if not _IDENT.match(name):
        return None
    decides = "truth" if _MEMBERSHIP_IS_THE_ANSWER.search(frame.question) else "necessary"
    atom = {"check": "enum_member", "enum": enum, "member": name}
    return _claim(case_id, letter, text, "enum_member", f"`{enum}` has the member `{name}`", enum, [atom], frame, decides=decides)


# --------------------------------------------------------------------------------------------------
# Class relations


_BASE_QUESTION = (
    re.compile(r"\bwhich\s+(?:class|base class|type)\s+does\s+`(?P<cls>[^`]+)`\s+(?:inherit|derive)\s+from", re.I),
    re.compile(r"\bwhat is (?:a|the) (?:base|parent) class of\s+`(?P<cls>[^`]+)`", re.I),
    re.compile(r"`(?P<cls>[^`]+)`\s+is a subclass of which\b", re.I),
)
_STATED_SUBCLASS = re.compile(
    r"^`(?P<cls>[^`]+)`\s+(?:is\s+a\s+subclass\s+of|inherits\s+from|derives\s+from|subclasses|extends)\s+`(?P<base>[^`]+)`\W*$", re.I
)


def subclass_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """One class derives from another: "Which class does `X` inherit from?" -> ``Base``, or "`X` inherits from `Y`"."""
    stated = _STATED_SUBCLASS.match(option)
    if stated:
        cls, base = stated.group("cls").strip(), stated.group("base").strip()
    else:
        cls = next((m.group("cls").strip() for p in _BASE_QUESTION if (m := p.search(frame.question))), None)
        base = option.strip().strip("`").rstrip(".").strip("`")
    builtin_class = isinstance(getattr(builtins, base, None), type)
    if not cls or not _PATH.match(cls) or not _PATH.match(base) or not (_camelish(base) or builtin_class):
        return None
    atom = {"check": "subclass", "path": cls, "base": base}
    return _claim(case_id, letter, text, "subclass", f"`{cls}` is a subclass of `{base}`", cls, [atom], frame, decides="truth")


# --------------------------------------------------------------------------------------------------
# Command-line flags


def cli_flag_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A flag of the command the question names: "`adk deploy cloud_run` ... which flag?" -> ``--service_name``."""
    flag = option.strip().rstrip(".").strip("`")
    command = question_command(frame.question)
    if not _FLAG.match(flag) or command is None:
        return None
    atom = {"check": "cli_option", "command": command, "option": flag}
    return _claim(case_id, letter, text, "cli_option", f"`{' '.join(command)}` has the flag `{flag}`", " ".join(command), [atom],
                  frame, decides="necessary")  # fmt: skip


__all__ = [
    "ATOM_CHECKS",
    "cli_flag_claim",
    "default_claim",
    "enum_member_claim",
    "question_command",
    "required_claim",
    "returns_type_claim",
    "role_bases",
    "stated_behaviour_claim",
    "subclass_claim",
    "type_name",
]
