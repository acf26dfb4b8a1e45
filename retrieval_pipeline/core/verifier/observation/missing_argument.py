"""A missing argument, observed: the option naming the argument the snippet's error says is missing is true.

"Which argument is missing in this `Runner` initialization?" with options `` `tools` ``, `` `app_name` ``, ...: the
proofs show which names are parameters (a necessary check: *consistent*), never which one the snippet lacks. The kind of
claim is *an exception type and message, observed*: the snippet is run once (:func:`..snippet_observation.observe`), and
when what it raised names the arguments it lacks (a call's ``TypeError: ... missing 1 required keyword-only argument:
'x'``, pydantic's ``Field required`` at ``x``: :func:`..abridged.missing_arguments`), the option that names one of them
is **true**: the library says that argument is missing. Nothing else changes: an option naming an argument that is not
listed stays as its own proof left it (a ``TypeError`` lists only the positional or only the keyword-only ones).

It decides nothing when the observation is not to be trusted (:func:`..snippet_observation.untrusted`: a limit, the
guard, tampering, ...), when the snippet is not the code the question describes
(:func:`..snippet_observation.question_mismatch`), or when it is abridged (:func:`..abridged.abridged`: a required argument
neither the question nor an option names is missing, a placeholder, a name defined elsewhere): soundness rule 3; nor
when the error does not come from the class the question names (:func:`from_named_class`: another call of the snippet
failed first). Only a question that asks which argument (parameter, field, keyword) is missing is read so.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS, Claim
from retrieval_pipeline.core.verifier.observation.abridged import abridged, missing_arguments
from retrieval_pipeline.core.verifier.observation.snippet_decisions import what_happened
from retrieval_pipeline.core.verifier.observation.snippet_observation import observe, question_mismatch, split, untrusted
from retrieval_pipeline.core.verifier.verdicts.verdict import EVIDENCE_CHARS, OptionEvidence

#: "Which argument is missing in this `Runner` initialization?", "What required parameter was omitted?".
_MISSING_QUESTION = re.compile(
    r"\b(?:which|what)\b[^?]*\b(?:arguments?|parameters?|fields?|keywords?|kwargs?)\b[^?]*\b(?:missing|omitted|left\s+out|forgotten|lacking)\b",
    re.I,
)
_NAME = re.compile(r"^\s*`?([A-Za-z_]\w*)`?\s*\.?\s*$")


def asks_missing(question: str) -> bool:
    """Whether the question asks which argument (parameter, field, keyword) is missing."""
    return _MISSING_QUESTION.search(" ".join(question.split())) is not None


def named_argument(claim: Claim) -> str | None:
    """The argument an option names: a keyword claim's parameter, else an option that is one name (`` `app_name` ``)."""
    if claim.kind in ("constructor_kwarg", "signature_param") and claim.details.get("param"):
        return str(claim.details["param"])
    match = _NAME.match(claim.option_text)
    return match.group(1) if match else None


def from_named_class(question: str, raised: dict[str, Any]) -> bool:
    """Whether the error comes from the call the question is about: when the question names classes in backticks
    (`` `Runner` ``), the message names one of them (``Runner.__init__() missing ...``, ``1 validation error for Runner``);
    another call of the snippet that failed first (an ``LlmAgent`` lacking its ``name``) says nothing of it."""
    named = {span.strip().rsplit(".", 1)[-1] for span in re.findall(r"`([^`]+)`", question)}
    classes = {name for name in named if re.fullmatch(r"_?[A-Z]\w*", name)}
    message = str(raised.get("message", ""))
    return not classes or any(re.search(rf"(?<![\w]){re.escape(name)}(?!\w)", message) for name in classes)


def missing_argument(
    question: str, snippet: str, evidence: Sequence[OptionEvidence], settings: SandboxSettings, index: Any = None
) -> list[OptionEvidence]:
    """The evidence with every option that names an argument the snippet's error says is missing made true (see the
    module docstring); unchanged when the rule does not apply or the observation decides nothing."""
    named = {e.letter: named_argument(e.claim) for e in evidence if e.claim.kind not in DERIVED_KINDS}
    if not asks_missing(question) or not any(named.values()):
        return list(evidence)
    claims = [e.claim for e in evidence]
    observation, execution = observe(snippet, claims, settings, index)
    context, section = split(snippet)
    why = untrusted(observation, execution) or question_mismatch(question, snippet)
    if why or observation is None:
        return list(evidence)
    if abridged(observation, section, context, question, [c.option_text for c in claims]):
        return list(evidence)
    raised = observation.get("raised") or {}
    missing = missing_arguments(raised)
    if not missing or not from_named_class(question, raised):
        return list(evidence)
    out = []
    for e in evidence:
        name = named.get(e.letter)
        if name and name in missing:
            note = f"the snippet's error names {name!r} as missing: the snippet {what_happened(observation)}"
            e = dataclasses.replace(e, state="true", option_true=True, note=safe_text(note, EVIDENCE_CHARS))
        out.append(e)
    return out
