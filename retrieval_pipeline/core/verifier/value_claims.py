"""Options that name one value, in a question asking which value is valid for a field of a class.

"Which of the following is a VALID agent name?" with the options `my-agent`, `123agent`, `my_agent_1`: each option
becomes a ``compound`` claim with one ``valid_value`` atom (``sandbox_files/value_atoms.py``): the class the noun
names (``Agent``) is built with the value in the field (``name``) and sample values in its other required fields.
Accepted: the value is valid (true); rejected with an error at that field: invalid (false). A rejection elsewhere,
a class that is not a pydantic model with that field, or a noun that names no class of the library leaves the
option undecided. "Which ... is NOT a valid ..." / "invalid" turns the claim around.

:func:`enumerated_options` reads options that are only letters ("A", "B") whose values the question lists inline
("... name? A. `my-agent` B. `123agent`"): the option stands for the value the question lists under its letter.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from retrieval_pipeline.core.verifier.claim_kinds import _claim
from retrieval_pipeline.core.verifier.claims import Claim, _Frame

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


__all__ = ["enumerated_options", "valid_value_claim"]
