"""Claims about a pair of fields of a model: which of them must be provided, and whether one is deprecated.

A question such as "When defining an `EvalCase`, which statement is true regarding `conversation` and
`conversation_scenario` fields?" names a class and two of its fields; its options say how the two may be
combined. Each such statement is a set of constructions of the class with some fields provided and whether
each is accepted (a ``presence`` atom, :mod:`~retrieval_pipeline.core.verifier.proofs.atom_proofs`), which the
sandbox builds with sample values (every required field filled, the listed ones given a truthy value):

* "Exactly one of them must be provided (XOR)": none rejected, each alone accepted, both rejected;
* "At least one of them must be provided": none rejected, each alone and both accepted;
* "Both must be provided": each alone rejected, both accepted;
* "Both are optional": none and each alone accepted;
* "Neither is required (if `c` is set)": none of them (but ``c``) accepted.

What is checked is the constructor: a rule the library enforces only later (when the object is used) is not
seen, so an "exactly one" that construction does not enforce reads as false. "`b` is deprecated" becomes a
``deprecated`` atom. A statement with a condition these do not model
("unless", "except", "when", "only", a negation) gets no claim; the builder fires only on questions that
name the class and the pair as "`a` and `b` fields/parameters/arguments". Everything here sees the question
and the option only, never the marked answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from retrieval_pipeline.core.verifier.claims.claim_kinds import _camelish, _claim
from retrieval_pipeline.core.verifier.claims.claims import _SPAN, Claim, _Frame

#: "`a` and `b` fields" in the question: the pair the options talk about.
_PAIR = re.compile(r"`(?P<a>[a-z_]\w*)`\s+and\s+`(?P<b>[a-z_]\w*)`\s+(?:fields|parameters|arguments|attributes|keyword arguments)\b", re.I)
#: Words that add a condition or a negation the presence rules do not model.
_CONDITIONAL = re.compile(r"\b(?:not|never|no|unless|except|when|if|only|n't|depends|sometimes|may)\b", re.I)
_BUT_NOT_BOTH = re.compile(r"\bbut not both\b", re.I)
_PROVIDED = r"(?:provided|set|given|specified|passed|supplied)"

Sets = list[dict[str, Any]]


def _given(*fields: str, accepted: bool) -> dict[str, Any]:
    return {"given": list(fields), "accepted": accepted}


def _exactly_one(a: str, b: str, _: re.Match[str]) -> Sets:
    return [_given(accepted=False), _given(a, accepted=True), _given(b, accepted=True), _given(a, b, accepted=False)]


def _at_least_one(a: str, b: str, _: re.Match[str]) -> Sets:
    return [_given(accepted=False), _given(a, accepted=True), _given(b, accepted=True), _given(a, b, accepted=True)]


def _both_required(a: str, b: str, _: re.Match[str]) -> Sets:
    return [_given(a, accepted=False), _given(b, accepted=False), _given(a, b, accepted=True)]


def _both_optional(a: str, b: str, _: re.Match[str]) -> Sets:
    return [_given(accepted=True), _given(a, accepted=True), _given(b, accepted=True)]


def _neither_required(a: str, b: str, match: re.Match[str]) -> Sets:
    condition = match.group("cond")
    return [_given(condition, accepted=True) if condition else _given(accepted=True)]


#: (pattern on the option, whether it may carry a condition of its own, the constructions it states).
PRESENCE_RULES: tuple[tuple[re.Pattern[str], bool, Callable[[str, str, re.Match[str]], Sets]], ...] = (
    (re.compile(r"\bexactly one\b[^.;]*\b(?:must|has to|is required)\b|\bxor\b|\beither\b[^.;]*\bbut not both\b", re.I),
     False, _exactly_one),
    (re.compile(rf"\bat least one\b[^.;]*\b(?:must be {_PROVIDED}|is required)\b", re.I), False, _at_least_one),
    (re.compile(rf"^\s*both\b(?:\s+(?:of\s+them|fields|parameters|arguments))?\s+(?:must be {_PROVIDED}|are required|are mandatory)\b",
                re.I), False, _both_required),
    (re.compile(r"^\s*both\b(?:\s+(?:of\s+them|fields|parameters|arguments))?\s+are\s+optional\W*$", re.I), False, _both_optional),
    (re.compile(rf"^\s*neither\b(?:\s+(?:of\s+them|field|parameter|argument))?\s+is\s+required"
                rf"(?:\s+(?:if|when)\s+`(?P<cond>[a-z_]\w*)`\s+is\s+{_PROVIDED})?\W*$", re.I), True, _neither_required),
)  # fmt: skip

_DEPRECATED = re.compile(r"^\s*`(?P<field>[a-z_]\w*)`\s+is\s+deprecated\b(?P<rest>.*)$", re.I | re.S)


def question_pair(frame: _Frame) -> tuple[str, str, str] | None:
    """``(owner, a, b)`` when the question names a class and "`a` and `b` fields"; else None."""
    match = _PAIR.search(frame.question)
    if not match:
        return None
    owners = [span.strip() for span in _SPAN.findall(frame.question) if _camelish(span.strip())]
    if len(owners) != 1:  # no class, or several: whose fields they are is not certain
        return None
    return owners[0], match.group("a"), match.group("b")


def presence_sets(option: str, a: str, b: str) -> Sets | None:
    """The constructions an option's statement about fields ``a`` and ``b`` stands for, or None."""
    for pattern, conditional, build in PRESENCE_RULES:
        match = pattern.search(option)
        if match is None:
            continue
        if not conditional and _CONDITIONAL.search(_BUT_NOT_BOTH.sub(" ", option)):
            return None
        return build(a, b, match)
    return None


def field_pair_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    """A statement about which of the question's two fields must be provided, or that one is deprecated."""
    pair = question_pair(frame)
    if pair is None:
        return None
    owner, a, b = pair
    deprecated = _DEPRECATED.match(option)
    if deprecated and deprecated.group("field") in (a, b):
        name, rest = deprecated.group("field"), deprecated.group("rest")
        atom = {"check": "deprecated", "owner": owner, "name": name}
        decides = "truth" if not rest.strip(" .") else "necessary"  # "...; only `a` is supported" is not checked
        return _claim(case_id, letter, text, "attribute", f"`{owner}.{name}` is deprecated", owner, [atom], frame, decides=decides)
    sets = presence_sets(option, a, b)
    if sets is None:
        return None
    atom = {"check": "presence", "owner": owner, "sets": sets, "controls": [[a], [b]]}
    shown = "; ".join(f"{owner}({', '.join(s['given'])}) is {'accepted' if s['accepted'] else 'rejected'}" for s in sets)
    return _claim(case_id, letter, text, "param_required", shown, owner, [atom], frame, decides="truth")


__all__ = ["PRESENCE_RULES", "field_pair_claim", "presence_sets", "question_pair"]
