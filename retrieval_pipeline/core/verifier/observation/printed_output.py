"""What a snippet printed or returned, read as text: the ``output`` claim of a question that asks what the code gives.

The key-term reading of :func:`~retrieval_pipeline.core.verifier.observation.snippet_decisions.message_match` is made
for exception messages: it drops short words, numbers and brackets (pydantic's ``[type=...]`` details), and takes a
text that is part of a message as the message. Printed values are not messages, and three readings of it were wrong on
questions of that kind (kind of claim: *a text the code prints or returns*):

* **Values written out** (``"`0`, `1`, then `[0, 1]`."``): the option lists what is printed, in backticks, joined by
  commas and "then"/"and"/"followed by", perhaps with a comment after a colon. The values are compared with the
  printed lines, in order (:func:`listed_values`): the same lines are true (consistent when a comment follows, which is
  a claim of its own), some of them in order consistent, and anything else false: the run ended without an
  exception, so every line it printed is there.
* **An option with no key terms** (``0``, ``[1, 2]``): no key term is no evidence; without values to compare it is
  undecided, never false.
* **"No error; it prints `X`"**: what follows "No error" is a claim of its own; when it says what is printed
  (``it prints `None` ``) or returned (``it returns `'yes'` ``), in values written out, it is compared as above
  (:func:`decide_rest`), a comment after "because" or a colon being a claim of its own again. A value returned is
  compared by its repr only when one of them is a literal: an enum member's repr (``<WriteMode.ALLOWED: 'allowed'>``)
  is the member written as code (``WriteMode.ALLOWED``), and any other object's repr is no text to compare with a value
  written as code (undecided).
* **Part of the output is not the output**: "What does this print?" asks for what is printed. An option is true when
  it is the whole printed text or the whole returned string (spaces, surrounding quotes and backticks and a final
  period aside); ``lambda`` inside ``<lambda>`` is only consistent with it (:func:`decide_printed`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from retrieval_pipeline.core.verifier.claims.claims import is_literal

#: What may join the values an option writes out: commas, "then", "and", "followed by" (and a final period).
_JOINERS = re.compile(r"[\s,;.]*(?:(?:and\s+then|then|and|followed\s+by)[\s,;.]*)*", re.I)
#: A value said to be printed more than once: "`x` twice", "`x` three times".
_REPEATS = re.compile(r"\s*(?P<n>twice|two times|three times|(?P<digits>\d+)\s+times)\b", re.I)
_COUNTS = {"twice": 2, "two times": 2, "three times": 3}
_SPAN = re.compile(r"`([^`]*)`")
#: How a note starts when the option is all the snippet printed or returned: another option that is only part of it
#: is then false (:func:`~..snippet_decisions.decide_options`).
WHOLE_OUTPUT = "the snippet printed exactly this"
#: How a note starts when the option is only part of what was printed or returned: consistent, never true.
PART_OF_OUTPUT = "part of the output"


def _plain(text: str) -> str:
    """A printed text as compared: spaces collapsed, one pair of surrounding quotes or backticks and a final period
    dropped (case and brackets kept: ``[0, 1]`` is a value)."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "`'\"":
        text = text[1:-1].strip()
    return text[:-1].rstrip() if text.endswith(".") and not text.endswith("..") else text


def listed_values(option: str) -> tuple[list[str], str] | None:
    """``(values, comment)`` when the option writes out printed values in backticks (joined by commas, "then", "and",
    "followed by"; "`x` twice" is `x` two times), with what follows a colon outside the backticks as ``comment``;
    None for any other option."""
    pieces = _SPAN.split(option)  # text, value, text, value, ..., text
    if len(pieces) < 3:
        return None
    values: list[str] = []
    for i in range(1, len(pieces), 2):
        value, after = _plain(pieces[i]), pieces[i + 1]
        repeat = _REPEATS.match(after)
        count = 1
        if repeat:
            count = int(repeat.group("digits")) if repeat.group("digits") else _COUNTS[repeat.group("n").lower()]
            after = after[repeat.end() :]
        values += [value] * count
        joiner, colon, comment = after.partition(":")
        if colon:
            return (values, comment.strip()) if _JOINERS.fullmatch(joiner) and _JOINERS.fullmatch(pieces[0]) else None
        if not _JOINERS.fullmatch(after):
            return None
    return (values, "") if _JOINERS.fullmatch(pieces[0]) else None


def _in_order(values: list[str], lines: list[str]) -> bool:
    """Whether ``values`` are some of ``lines``, in their order."""
    rest = iter(lines)
    return all(any(value == line for line in rest) for value in values)


def output_texts(observation: Mapping[str, Any]) -> list[str]:
    """The texts a run gave: what it printed, then the string it returned (when it returned one)."""
    texts = [str(observation.get("stdout") or "")]
    returned = observation.get("returned") or {}
    if returned.get("type") == "str" and returned.get("literal"):
        texts.append(str(ast.literal_eval(returned["repr"])))
    return texts


def decide_printed(details: Mapping[str, Any], observation: Mapping[str, Any]) -> tuple[str, str] | None:
    """The state of an ``output`` claim against a run that raised nothing, or None to leave it to the key-term reading.

    Decides the options that write out values (compared line by line) and the option that is the whole printed text
    or returned string (true); an option with no key term and nothing to compare is undecided.
    """
    if details.get("substring"):
        return None  # only the text word for word is a substring: the key-term reading's own rule
    option = str(details["output_text"])
    stdout = str(observation.get("stdout") or "")
    lines = [_plain(line) for line in stdout.splitlines() if line.strip()]
    shown = " | ".join(lines)
    listed = listed_values(option)
    if listed is not None and lines:
        return _compare_values(*listed, lines, "prints", exact=f"{WHOLE_OUTPUT}, value by value: {shown!r}")
    printed, *returned_text = output_texts(observation)
    wholes = [_plain(printed)] if printed.strip() else []
    wholes += [_plain(text) for text in returned_text]
    if _plain(option) in wholes:
        return "true", f"{WHOLE_OUTPUT} (or returned it): {' | '.join(wholes)!r}"
    if not re.search(r"[A-Za-z0-9_]{3,}", re.sub(r"\d+", "", option)):
        return "undecided", f"undecided: the option holds no key term to compare, and is not the whole output: {' | '.join(wholes)!r}"
    return None


#: "it prints `X`", "and returns `Y`" (the rest of a "No error" option once its joining words are cut), with a comment
#: after ", because".
_SAYS_OUTPUT = re.compile(r"^(?:it\s+)?(?P<verb>prints|outputs|returns)\s+(?P<values>`.*?)(?:,?\s+because\b(?P<why>.*))?$", re.I | re.S)


#: The repr of an enum member: ``<WriteMode.ALLOWED: 'allowed'>``.
_ENUM_MEMBER = re.compile(r"<(?P<path>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+): .*>", re.S)


def decide_rest(rest: str, observation: Mapping[str, Any]) -> tuple[str, str] | None:
    """The state of what a "No error" option adds, when it says what the run prints or returns in values written out
    (the run raised nothing); None for anything else (a claim of its own, not checked)."""
    said = _SAYS_OUTPUT.match(rest.strip())
    listed = listed_values(said.group("values").strip()) if said else None
    if said is None or listed is None:
        return None
    values, comment = listed
    comment = " ".join(x for x in (comment, (said.group("why") or "").strip()) if x)
    if said.group("verb").lower() == "returns":
        returned = observation.get("returned") or {}
        lines = [_plain(returned["repr"])] if "repr" in returned else ["None"]
        member = _ENUM_MEMBER.fullmatch(str(returned.get("repr", "")))
        enum_class = member.group("path").rsplit(".", 1)[0] + "." if member else None
        if enum_class and len(values) == 1 and values[0].startswith(enum_class):
            lines = [member.group("path")]  # `<WriteMode.ALLOWED: 'allowed'>` is the member `WriteMode.ALLOWED`
        elif "repr" in returned and not returned.get("literal") and not all(is_literal(v) for v in values):
            return "undecided", (f"no error; undecided: it returns {returned['repr']!r}, an object whose repr is no text to "
                                 f"compare with {', '.join(values)!r} written as code")  # fmt: skip
    else:
        lines = [_plain(line) for line in str(observation.get("stdout") or "").splitlines() if line.strip()]
    verb = said.group("verb").lower()
    state, note = _compare_values(values, comment, lines, verb, exact=f"it {verb} exactly these values: {' | '.join(lines)!r}")
    return state, f"no error; {note}"


def _compare_values(values: list[str], comment: str, lines: list[str], verb: str, exact: str) -> tuple[str, str]:
    """Values written out against what the run printed (or returned), line by line: the same lines are true (``exact``
    is the note; consistent when a comment follows, a claim of its own), some of them in order consistent, anything
    else false."""
    shown = " | ".join(lines)
    if values == lines:
        if comment:
            return "consistent", f"it {verb} these values; the comment ({comment!r}) is a claim of its own: {shown!r}"
        return "true", exact
    if lines and _in_order(values, lines):
        return "consistent", f"it {verb} these values among others: {shown!r}"
    return "false", f"it {verb} other values: {shown!r}"
