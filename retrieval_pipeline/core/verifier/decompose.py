"""Options into claims: each option of a question becomes one :class:`~retrieval_pipeline.core.verifier.claims.claims.Claim`.

:func:`decompose` reads the question once (:func:`~retrieval_pipeline.core.verifier.claims.claims.analyse_question`),
then asks the claim builders in turn, most specific first (:func:`builders`): the basic kinds of
:mod:`~retrieval_pipeline.core.verifier.claims.claims`, the kinds of :mod:`~retrieval_pipeline.core.verifier.claims.claim_kinds`,
:mod:`~retrieval_pipeline.core.verifier.claims.compound_claims` and :mod:`~retrieval_pipeline.core.verifier.claims.field_claims`. An option of a question about a code snippet is read as
what running the snippet does (:mod:`~retrieval_pipeline.core.verifier.claims.snippet_claims`) first, then as the field it
blames for the snippet's error (:mod:`~retrieval_pipeline.core.verifier.observation.snippet_errors`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from retrieval_pipeline.core.verifier.claims import claim_kinds as more
from retrieval_pipeline.core.verifier.claims import compound_claims, field_claims, snippet_claims, value_claims
from retrieval_pipeline.core.verifier.claims.claim_kinds import role_bases
from retrieval_pipeline.core.verifier.claims.claims import (
    _ALL_OF_THE_ABOVE,
    _CAMEL,
    _NAME_PATH_OPTION,
    _NONE_OF_THE_ABOVE,
    DERIVED_KINDS,
    Claim,
    _call_claim,
    _Frame,
    _import_claim,
    _make,
    _param_claim,
    _signature_claim,
    _value_claim,
    analyse_question,
)
from retrieval_pipeline.core.verifier.claims.compound_claims import clean_name_option
from retrieval_pipeline.core.verifier.observation import snippet_errors
from retrieval_pipeline.core.verifier.observation.snippet_observation import split


def decompose(case_id: str, question: str, options: Mapping[str, str], *, snippet: str | None = None) -> list[Claim]:
    """One claim per option, from the question and option texts only (see the module docstring).

    Args:
        case_id: The case's id.
        question: The question text.
        options: Letter -> option text.
        snippet: The code the question is about (``Case.extra["code_snippet"]``): the options are then read as
            what running it does (:func:`_snippet_claim`), or, naming no outcome, as any other option.
    """
    listed = value_claims.enumerated_options(question, options)
    frame = analyse_question(listed[0] if listed else question)
    if listed:
        options = listed[1]
    if snippet is not None:
        claims = [_snippet_claim(case_id, str(letter), str(text), snippet, frame) for letter, text in options.items()]
        return [dataclasses.replace(c, question=question) for c in claims]
    return [dataclasses.replace(_claim(case_id, str(letter), str(text), frame), question=question) for letter, text in options.items()]


def _snippet_claim(case_id: str, letter: str, text: str, snippet: str, frame: _Frame) -> Claim:
    """A ``snippet`` claim for an option of a question about code; None/All of the above stay derived; an option that
    names no outcome is read as any other (:func:`_claim`), with the snippet's names in ``details["snippet_names"]``."""
    derived = _derived_claim(case_id, letter, text)
    if derived is not None:
        return derived
    details = snippet_claims.snippet_details(text, snippet)
    blamed = snippet_errors.field_error_details(text, frame.question) if details is None else None
    if blamed is not None:
        return _make(case_id, letter, text, "snippet", snippet_errors.hypothesis(blamed), None, **blamed, snippet=snippet, decides="truth")
    if details is None:
        claim = _claim(case_id, letter, text, frame)
        section = split(snippet)[1]  # what the question shows, not the rest of its file
        typed = value_claims.param_type_claim(case_id, letter, text, text.strip(), frame, section) if claim.kind == "unknown" else None
        if typed is not None:
            return typed
        output = snippet_claims.output_details(text, frame.question, snippet) if claim.kind == "unknown" else None
        if output is not None:
            return _make(case_id, letter, text, "snippet", snippet_claims.hypothesis(output), None, **output)
        if claim.kind == "unknown" or claim.kind in DERIVED_KINDS:
            return claim
        return dataclasses.replace(claim, details={**claim.details, "snippet_names": snippet_claims.snippet_names(snippet)})
    return _make(case_id, letter, text, "snippet", snippet_claims.hypothesis(details), None, **details)


Builder = Callable[[str, str, str, str, _Frame], "Claim | None"]


@functools.cache
def builders() -> tuple[Builder, ...]:
    """The claim builders, most specific first: the first that recognises an option makes its claim.

    The basic kinds live in :mod:`~retrieval_pipeline.core.verifier.claims.claims`, the others in
    :mod:`~retrieval_pipeline.core.verifier.claims.claim_kinds`, :mod:`~retrieval_pipeline.core.verifier.claims.compound_claims` and,
    for statements about a pair of fields,
    :mod:`~retrieval_pipeline.core.verifier.claims.field_claims`.
    """

    return (
        value_claims.valid_value_claim,
        value_claims.param_type_claim,
        _import_claim,
        _signature_claim,
        more.stated_behaviour_claim,
        _value_claim,
        more.returns_type_claim,
        more.default_claim,
        more.required_claim,
        more.enum_member_claim,
        more.subclass_claim,
        _param_claim,
        more.cli_flag_claim,
        compound_claims.abstract_class_claim,
        compound_claims.storage_claim,
        _name_claim,
        compound_claims.call_sketch_claim,
        _call_claim,
        field_claims.field_pair_claim,
        compound_claims.list_parameter_claim,
        compound_claims.prose_claim,
    )


def _derived_claim(case_id: str, letter: str, text: str) -> Claim | None:
    """A claim for "None of the above" or "All of the above" (decided from the other options, never proven), else None."""
    if _NONE_OF_THE_ABOVE.match(text.strip()):
        return _make(case_id, letter, text, "none_of_the_above", "no other option is true", None)
    if _ALL_OF_THE_ABOVE.match(text.strip()):
        return _make(case_id, letter, text, "all_of_the_above", "every other option is true", None)
    return None


def _claim(case_id: str, letter: str, text: str, frame: _Frame) -> Claim:
    derived = _derived_claim(case_id, letter, text)
    if derived is not None:
        return derived
    option = text.strip()
    for builder in builders():
        claim = builder(case_id, letter, text, option, frame)
        if claim is not None:
            return claim
    return _make(case_id, letter, text, "unknown", "not checkable offline", None, reason="no heuristic applies")


def _instance_class(head: str, frame: _Frame) -> str | None:
    """The class a lower-case head of an option stands for an instance of: the class the question names in backticks
    whose name is the head's, case aside (`event` for `Event`, `types.Part` for `part`); else None. Such a head is read
    as that class's instance, not as a module of the same name (``google.adk.events.event``)."""
    if not head[:1].islower():
        return None
    named = [span.strip().removesuffix("()") for span in frame.spans]
    classes = [span for span in named if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", span) and _CAMEL.match(span.split(".")[-1])]
    matching = sorted({c for c in classes if c.split(".")[-1].lower() == head.lower()})
    return matching[0] if len(matching) == 1 else None


def _name_claim(case_id: str, letter: str, text: str, option: str, frame: _Frame) -> Claim | None:
    named, alternative = clean_name_option(option)
    match = _NAME_PATH_OPTION.match(named.rstrip("."))
    if not match:
        return None
    path = match.group(1)
    called = bool(match.group(2))
    role = role_bases(frame.question) if not called and _CAMEL.match(path.split(".")[-1]) else []
    extra: dict[str, Any] = {"role_bases": role} if role else {}
    if alternative:
        extra["disjunctive"] = True
    role_note = f" (and derives from {' or '.join(role)} where the library defines it)" if role else ""
    if "." in path:
        head, _, rest = path.partition(".")
        instance_of = _instance_class(head, frame)
        if instance_of is not None:  # `event.get_function_responses()` in a question about `Event`: an Event's member
            if "." in rest:
                return None  # a member of a member of an instance: the class alone does not say what that is
            full = f"{instance_of}.{rest}"
            return _make(
                case_id, letter, text, "exists", f"`{full}` exists (`{head}` being an instance of `{instance_of}`)", full,
                path=full, called=called, decides="necessary", free_names=[instance_of.split(".")[0]],
                bindings=frame.bindings, instance=head,
            )  # fmt: skip
        return _make(
            case_id, letter, text, "exists", f"`{path}` exists{role_note}", path,
            path=path, called=called, decides="necessary", free_names=[head], bindings=frame.bindings, **extra,
        )  # fmt: skip
    subject = frame.subject
    if subject and (frame.member_question or (called and not frame.name_question)) and not _CAMEL.match(path):
        full = f"{subject}.{path}"
        return _make(
            case_id, letter, text, "exists", f"`{full}` exists", full,
            path=full, called=called, decides="necessary", free_names=[subject.split(".")[0]],
            bindings=frame.bindings,
        )  # fmt: skip
    if _CAMEL.match(path) and (frame.name_question or len(frame.spans) == 0 or called):
        return _make(
            case_id, letter, text, "exists", f"`{path}` is defined by the library under test{role_note}", path,
            path=path, called=called, decides="necessary", library_symbol=True, free_names=[path],
            bindings=frame.bindings, **extra,
        )  # fmt: skip
    return None
