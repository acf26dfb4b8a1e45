"""More claim kinds: what a call does, members of classes and models, enums, subclasses, required
parameters, command-line flags, environment variables, and prose options that name code.

Every builder here has the signature of those in :mod:`~retrieval_pipeline.core.verifier.claims`
(``(case_id, letter, text, option, frame) -> Claim | None``) and sees the question and the option only. Each
claim it makes carries ``details["atoms"]``: the checks its proof runs against the installed library
(:mod:`~retrieval_pipeline.core.verifier.atom_proofs`). An atom is a JSON-able dict with a ``check``:

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
  ``holds`` (``path``, ``type``): an instance built without arguments holds a ``dict``;
* ``abstract`` (``path``): a class is abstract (abstract methods, ``abc.ABC`` among its bases, a method that
  raises ``NotImplementedError``);
* ``presence`` (``owner``, ``sets``, ``controls``) and ``deprecated`` (``owner``, ``name``): which combinations of
  fields a model accepts, and whether a field is deprecated (built by
  :mod:`~retrieval_pipeline.core.verifier.field_claims`).

The kinds (``details["decides"]`` as in :mod:`claims`):

* ``raises``, ``returns``: the option states what a call does, or answers "what does `E` return" with a type
  (``truth``);
* ``attribute``: the default of a member (``truth``);
* ``enum_member``: a member of an enum (``truth`` when the question asks which is a member, else ``necessary``);
* ``subclass``: one class derives from another (``truth``);
* ``param_required``: a parameter is required / optional (``truth``);
* ``cli_option``: a flag of a command named in the question (``necessary``);
* ``compound`` for "which abstract (base) class ...?": the named class exists and is abstract (``necessary``);
* ``compound`` for "how is data persisted with `X`?": the storage an option names is used by the code behind
  ``X`` (``necessary``);
* ``compound``: a prose option whose backticked code is turned into atoms, all of which must hold
  (``necessary``; an option that says "or ..." can never be proven false, and one that negates or
  retires what it names ("not", "deprecated", "instead of") gets no claim at all).
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any

from retrieval_pipeline.core.astutil import dotted_name
from retrieval_pipeline.core.verifier.claims import (
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
)

_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")
_FLAG = re.compile(r"^--?[A-Za-z][\w-]*$")
_CLI_WORD = re.compile(r"^[A-Za-z][\w.-]*$")
_FILE_NAME = re.compile(r"\.(?:py|pyi|json|ya?ml|toml|txt|cfg|ini|md|csv|env|sh)$")
_KWARG_SPAN = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(.+)$", re.S)
#: Words that make a prose option say something other than "this code exists": no claim is made from it.
_NEGATING = re.compile(
    r"\b(?:not|never|no|none|neither|nor|cannot|can't|don't|doesn't|isn't|aren't|won't|without|instead|unless|"
    r"deprecated|removed|renamed|replaced|replaces|formerly|previously|legacy|obsolete|no longer)\b",
    re.I,
)
_DISJUNCTIVE = re.compile(r"\bor\b", re.I)
#: Words after a backticked name saying it is a member of a class (``the `tools` parameter``).
_MEMBER_NOUN = re.compile(r"^\W{0,3}(?:\w+\s+){0,1}?(?:parameter|argument|field|attribute|property|method|kwarg|keyword)s?\b", re.I)
_LINKING = re.compile(r"\b(?:on|in|of|to|for|with|into|from)\b", re.I)
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


# --------------------------------------------------------------------------------------------------
# Prose options that name code


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
    for index, span in enumerate(spans):
        for atom in _span_atoms(index, span.strip(), spans, positions, option, frame, command):
            if atom not in atoms:
                atoms.append(atom)
    return atoms, bindings


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
    "ATOM_CHECKS",
    "STORAGE_TECHNOLOGIES",
    "abstract_class_claim",
    "call_sketch_claim",
    "clean_name_option",
    "cli_flag_claim",
    "default_claim",
    "enum_member_claim",
    "prose_atoms",
    "prose_claim",
    "question_command",
    "required_claim",
    "returns_type_claim",
    "role_bases",
    "stated_behaviour_claim",
    "storage_claim",
    "subclass_claim",
    "type_name",
]
