"""Options that name one value, in a question asking which value is valid for a field of a class.

"Which of the following is a VALID agent name?" with the options `my-agent`, `123agent`, `my_agent_1`: each option
becomes a ``compound`` claim with one ``valid_value`` atom (``sandbox_side/value_atoms.py``): the class the noun
names (``Agent``) is built with the value in the field (``name``) and sample values in its other required fields.
Accepted: the value is valid (true); rejected with an error at that field: invalid (false). A rejection elsewhere,
a class that is not a pydantic model with that field, or a noun that names no class of the library leaves the
option undecided. "Which ... is NOT a valid ..." / "invalid" turns the claim around.

"What data type does the `input_schema` argument expect?" with options describing kinds of values ("A Pydantic model
class.", "A JSON schema dictionary.", "A list of field definitions.") is read the same way (:func:`param_type_claim`):
the atom builds a sample of the kind the option names (:data:`SAMPLE_KINDS`) and passes it in that parameter of the
class the question names, or else the class the question's snippet passes it to. An option naming no kind, or more
than one ("a string or a list"), gets no claim.

:func:`enumerated_options` reads options that are only letters ("A", "B") whose values the question lists inline
("... name? A. `my-agent` B. `123agent`"): the option stands for the value the question lists under its letter.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from retrieval_pipeline.core.common.astutil import dotted_name
from retrieval_pipeline.core.verifier.claims.claim_kinds import _claim
from retrieval_pipeline.core.verifier.claims.claims import _CAMEL, Claim, _Frame

#: The fields a "valid <class> <field>" question is read for: attribute-like words, not "valid keyword argument".
FIELD_WORDS = ("name", "id", "identifier", "key", "url", "uri", "path", "version", "label")
_VALID_QUESTION = re.compile(
    rf"\bwhich\b[^?]*?\b(?P<negation>not\s+(?:an?\s+)?|in)?valid\s+(?P<noun>[A-Za-z][a-z]*)\s+(?P<field>{'|'.join(FIELD_WORDS)})s?\b",
    re.I,
)
_VALUE_OPTION = re.compile(r"^\s*(?:`(?P<span>[^`\n]+)`|(?P<bare>[^\s`]+))\s*\.?\s*$")
_LETTER_OPTION = re.compile(r"^\s*\(?(?P<letter>[A-Ha-h])[.)]?\s*$")
_LISTED = re.compile(r"(?:^|(?<=\s))\(?(?P<letter>[A-H])[.)]\s+")


def enumerated_options(question: str, options: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """``(question stem, letter -> listed value)`` when every option is a letter the question lists a value under; else None.

    The question must list the letters in order (``A. x B. y C. z``) and hold every letter an option names; the stem
    is the question before its list. Options such as "None of the above" keep their text.
    """
    letters = {key: _LETTER_OPTION.match(text) for key, text in options.items()}
    named = {key: m.group("letter").upper() for key, m in letters.items() if m}
    if len(named) < 2:
        return None
    markers = list(_LISTED.finditer(question))
    listed = [m.group("letter") for m in markers]
    if not markers or listed != sorted(listed) or len(set(listed)) != len(listed) or not set(named.values()) <= set(listed):
        return None
    values: dict[str, str] = {}
    for index, marker in enumerate(markers):
        end = markers[index + 1].start() if index + 1 < len(markers) else len(question)
        values[marker.group("letter")] = question[marker.end() : end].strip()
    if not all(values.values()):
        return None
    resolved = {key: values[named[key]] if key in named else text for key, text in options.items()}
    return question[: markers[0].start()].strip(), resolved


def _value(option: str) -> str | None:
    """The one value an option names (a backticked span, a quoted string, a bare word), or None."""
    match = _VALUE_OPTION.match(option)
    if match is None:
        return None
    raw = (match.group("span") or match.group("bare") or "").strip()
    try:
        literal = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        literal = None
    return literal if isinstance(literal, str) else raw or None


#: (sample kind, pattern on the option): the kind of value an option describes; first match wins. The pydantic kinds
#: need the option to say it is a (pydantic) model.
SAMPLE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pydantic_instance", re.compile(r"\b(?:pydantic|model)\b[^.;]*\binstance\b|\binstance\b[^.;]*\b(?:pydantic|model)\b", re.I)),
    (
        "pydantic_class",
        re.compile(r"\b(?:pydantic|model)\b[^.;]*\bclass\b|\bclass\b[^.;]*\b(?:pydantic|model)\b|\bsubclass of `?BaseModel", re.I),
    ),
    ("json_schema", re.compile(r"\bjson\s+schema\b", re.I)),
    ("dict", re.compile(r"\bdict(?:ionary)?\b|\bmapping\b", re.I)),
    ("list", re.compile(r"\blist\b", re.I)),
    ("str", re.compile(r"\bstring\b|\bstr\b", re.I)),
    ("int", re.compile(r"\binteger\b|\bint\b", re.I)),
    ("bool", re.compile(r"\bboolean\b|\bbool\b", re.I)),
)
_TYPE_QUESTION = re.compile(
    r"\bwhat\s+(?:data\s+)?(?:type|kind\s+of\s+(?:value|object))\b[^?]*?`(?P<param>[A-Za-z_]\w*)`"
    r"|\bwhat\b[^?]*?`(?P<param2>[A-Za-z_]\w*)`\s+(?:argument|parameter|field|keyword)\s+(?:expect|accept|take)s?\b",
    re.I,
)


def sample_kind(option: str) -> str | None:
    """The one kind of value an option describes (:data:`SAMPLE_KINDS`), or None (none, or an alternative offered)."""
    if re.search(r"\bor\b|\beither\b|\bnot\b", option, re.I):
        return None
    return next((kind for kind, pattern in SAMPLE_KINDS if pattern.search(option)), None)


def snippet_callee(snippet: str, param: str) -> str | None:
    """The class-like callee the snippet passes ``param`` to (``LlmAgent(**{"param": ...})`` or through a dict bound to
    a name); None when there is none or more than one."""
    try:
        tree = ast.parse(snippet)
    except (SyntaxError, ValueError):
        return None
    dicts = {
        target.id: node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    callees = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            spread = dicts.get(keyword.value.id) if isinstance(keyword.value, ast.Name) else keyword.value
            keys = [k.value for k in spread.keys if isinstance(k, ast.Constant)] if isinstance(spread, ast.Dict) else []
            if keyword.arg == param or (keyword.arg is None and param in keys):
                callees.add(dotted_name(node.func))
    named = [c for c in callees if c and _CAMEL.match(c.split(".")[-1])]
    return named[0] if len(callees) == 1 and named else None


def param_type_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame, snippet: str | None = None) -> Claim | None:
    """A ``valid_value`` claim with a sample of the kind an option names, for "what type does the `x` argument expect?"."""
    match = _TYPE_QUESTION.search(frame.question)
    kind = sample_kind(option) if match else None
    if match is None or kind is None:
        return None
    param = match.group("param") or match.group("param2")
    subject = frame.subject if frame.subject and _CAMEL.match(frame.subject.split(".")[-1]) else None
    owner = subject or (snippet_callee(snippet, param) if snippet else None)
    if owner is None:
        return None
    atom = {"check": "valid_value", "owner": owner, "field": param, "sample": kind, "valid": True}
    return _claim(case_id, letter, text, "compound", f"`{owner}` accepts a {kind} sample in `{param}`", owner, [atom], frame,
                  decides="truth")  # fmt: skip


def valid_value_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A ``valid_value`` claim for an option naming one value in a "which is a valid <class> <field>" question."""
    match = _VALID_QUESTION.search(frame.question)
    value = _value(option) if match else None
    if match is None or value is None:
        return None
    owner = match.group("noun")[:1].upper() + match.group("noun")[1:].lower()
    field = match.group("field").lower()
    valid = not match.group("negation")
    atom = {"check": "valid_value", "owner": owner, "field": field, "value": value, "valid": valid}
    said = "a valid" if valid else "an invalid"
    return _claim(case_id, letter, text, "compound", f"{value!r} is {said} `{owner}.{field}`", owner, [atom], frame, decides="truth")


__all__ = ["SAMPLE_KINDS", "enumerated_options", "param_type_claim", "sample_kind", "snippet_callee", "valid_value_claim"]
