"""Options that blame one field for the error a snippet raises, decided against the run's per-field errors.

A question that presupposes an error ("Why does this code raise a ValidationError?", "What error occurs?") often
offers reasons of the form "The `type` field is missing", "The `random_field` argument is not a valid field for
Event", "The `content` field must be a list". :func:`field_error_details` reads such an option into a
``field_error`` outcome: the field, and what the option says is wrong with it (:data:`CATEGORIES`: ``missing``,
``extra``, a ``type`` the value must have; ``None`` when the reason is prose such as "cannot be inferred").

:func:`decide_field_error` decides it against the one observation of the snippet
(:mod:`~retrieval_pipeline.core.verifier.observation.snippet_observation`): pydantic's line errors (``loc``, ``type``, ``msg``),
or a ``TypeError`` naming an unexpected or missing keyword argument.

* nothing raised: undecided (the question's premise does not hold here; a field the option calls "not valid" may
  be one the class silently ignores, so the statement may hold while being no error's cause);
* an error at the field whose kind is the option's: true (``type``: the message says "valid list" and so on);
* errors at the field, none of the option's kind: false; a prose reason: consistent (an error concerns the field);
* no error at the field: false only when the list of errors is complete (pydantic lists every field it rejects; a
  ``TypeError`` names only the first problem) and no model-level error (empty ``loc``) could concern it; otherwise
  undecided. A model-level error whose message names the field counts as concerning it, of no known kind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: A question that presupposes an error: only then is an option about a field read as the error's cause.
_ASKS_ERROR = re.compile(r"\b(?:errors?|exceptions?|raises?|raised|fails?|failed|failure|invalid|ValidationError)\b", re.I)
_FIELD_OPTION = re.compile(
    r"^\s*(?:the\s+)?`(?P<field>[A-Za-z_]\w*)`\s*(?P<noun>(?:keyword\s+)?(?:field|argument|parameter|keyword|attribute|input|kwarg)s?\b)?"
    r"(?P<rest>.*)$",
    re.I | re.S,
)
#: Words that open what an option says of the field when it names no noun (``author`` is required).
_PREDICATE = re.compile(r"^\s*(?:is|are|must|should|cannot|can't|can\s+not|was|were|has|have)\b", re.I)
_NEGATED_MISSING = re.compile(r"\bnot\s+(?:missing|required)\b", re.I)
_TYPE_WORDS = {
    "list": "list", "dict": "dictionary", "dictionary": "dictionary", "mapping": "dictionary", "str": "string",
    "string": "string", "int": "integer", "integer": "integer", "float": "number", "number": "number",
    "bool": "boolean", "boolean": "boolean",
}  # fmt: skip
#: (category, pattern on what the option says of the field, the pydantic error types of that kind).
CATEGORIES: tuple[tuple[str, re.Pattern[str], frozenset[str]], ...] = (
    ("missing",
     re.compile(r"\b(?:is|are)\s+(?:missing|required|not\s+(?:provided|set|given|passed|supplied))\b|\bmissing\b", re.I),
     frozenset({"missing", "missing_argument", "missing_keyword_only_argument", "missing_positional_only_argument"})),
    ("extra",
     re.compile(r"\bnot\s+an?\s+(?:valid|known|recogni[sz]ed|allowed|accepted|permitted|defined)\s+"
                r"(?:field|argument|parameter|keyword|attribute|input)\b|\b(?:is|are)\s+not\s+(?:allowed|permitted|accepted|"
                r"recogni[sz]ed|supported|expected)\b|\bunexpected\b|\bunknown\b|\bextra\b|\bdoes\s+not\s+exist\b", re.I),
     frozenset({"extra_forbidden", "unexpected_keyword_argument"})),
    ("type",
     re.compile(r"\bmust\s+be\s+(?:an?\s+)?(?P<type>" + "|".join(_TYPE_WORDS) + r")\b", re.I),
     frozenset()),
)  # fmt: skip
#: How many line errors the observer keeps; a list that long may have been cut.
KEPT_ERRORS = 20


def field_error_details(option: str, question: str) -> dict[str, Any] | None:
    """The ``field_error`` outcome of an option that blames one field, in a question that presupposes an error; else None."""
    if not _ASKS_ERROR.search(question):
        return None
    match = _FIELD_OPTION.match(option.strip())
    if match is None or len(re.findall(r"`[^`]+`", option)) != 1:
        return None
    rest = match.group("rest").strip()
    if not match.group("noun") and not _PREDICATE.match(rest):
        return None
    if _NEGATED_MISSING.search(rest):
        return None
    details: dict[str, Any] = {"outcome": "field_error", "field": match.group("field"), "category": None, "reason": rest}
    for category, pattern, _ in CATEGORIES:
        found = pattern.search(rest)
        if found:
            details["category"] = category
            if category == "type":
                details["expected_type"] = _TYPE_WORDS[found.group("type").lower()]
            break
    return details


def hypothesis(details: Mapping[str, Any]) -> str:
    """What a ``field_error`` claim says, in words."""
    what = {"missing": "is missing", "extra": "is not accepted", "type": f"must be a {details.get('expected_type')}"}
    said = what.get(str(details.get("category")), f"is at fault ({details.get('reason')!r})")
    return f"the snippet's error is that `{details['field']}` {said}"


def line_errors(raised: Mapping[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The per-field errors of what was raised, and whether the list is complete (every problem listed)."""
    errors = [dict(e) for e in raised.get("errors") or []]
    if errors:
        count = raised.get("error_count")
        complete = len(errors) >= int(count) if isinstance(count, int) else len(errors) < KEPT_ERRORS
        return errors, complete
    message = str(raised.get("message") or "")
    if "TypeError" in (raised.get("mro") or []):
        unexpected = re.search(r"unexpected keyword argument '(\w+)'", message)
        if unexpected:
            return [{"loc": [unexpected.group(1)], "type": "unexpected_keyword_argument", "msg": message}], False
        missing = re.search(r"missing \d+ required (?:positional |keyword-only )?arguments?: (.+)$", message)
        if missing:
            names = re.findall(r"'(\w+)'", missing.group(1))
            return [{"loc": [name], "type": "missing_argument", "msg": message} for name in names], False
    return [], False


def _kind_matches(details: Mapping[str, Any], error: Mapping[str, Any]) -> bool:
    category = details["category"]
    if category == "type":
        return re.search(rf"\bvalid\s+{re.escape(str(details['expected_type']))}\b", str(error.get("msg", "")), re.I) is not None
    kinds = next(kinds for name, _, kinds in CATEGORIES if name == category)
    return str(error.get("type")) in kinds


def _shown(errors: list[dict[str, Any]]) -> str:
    return "; ".join(f"{'.'.join(map(str, e.get('loc') or [])) or '(model)'}: {e.get('type')}: {e.get('msg')}" for e in errors)[:300]


def decide_field_error(details: Mapping[str, Any], raised: Mapping[str, Any] | None, happened: str) -> tuple[str, str]:
    """``(state, why)`` of a ``field_error`` claim against what the snippet raised (see the module docstring)."""
    field = str(details["field"])
    if not raised:
        return "undecided", f"undecided: the snippet {happened}, so no error's cause can be read (the question presupposes one)"
    errors, complete = line_errors(raised)
    if not errors:
        return "undecided", f"undecided: the snippet {happened}, naming no field it rejects"
    at = [e for e in errors if field in [str(part) for part in e.get("loc") or []]]
    model_level = [e for e in errors if not e.get("loc")]
    naming = [e for e in model_level if re.search(rf"\b{re.escape(field)}\b", str(e.get("msg", "")))]
    if not at and not naming:
        if model_level or not complete:
            return "undecided", f"undecided: no listed error is at `{field}`, but the list may not say all: {_shown(errors)}"
        return "false", f"no error concerns `{field}`: {_shown(errors)}"
    if details.get("category") is None:
        return "consistent", f"an error concerns `{field}` ({_shown(at + naming)}); the option's reason is not checked"
    if any(_kind_matches(details, e) for e in at):
        return "true", f"the snippet's error at `{field}`: {_shown(at)}"
    if naming:
        return "consistent", f"a model-level error names `{field}` ({_shown(naming)}); its kind is not read"
    return "false", f"the error at `{field}` is another one: {_shown(at)}"
