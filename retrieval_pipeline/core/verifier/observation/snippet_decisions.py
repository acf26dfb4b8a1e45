"""Decide each ``snippet`` claim of a code question against the one observation of its snippet (run by
:mod:`~retrieval_pipeline.core.verifier.observation.snippet_observation`), on the host (:func:`decide_option`, then
:func:`decide_options` across the options):

* ``raises`` with a quoted message (``ValueError: Agent name cannot be `user`.``): the type must match (the
  class or a base of it; a pydantic ``ValidationError`` counts as a ``ValueError``/``AssertionError`` only
  when a validator raised one) and the message must match after normalising case, quotes, backticks,
  ``[type=..., input_value=...]`` details, a parenthesised comment and a trailing ellipsis (word for word, or
  every key term). A message that differs in substance (under half of its key terms are in the raised one) makes
  the option false: same type, other message is another outcome. One that partly matches (half or more) is false
  when another option quotes the raised message word for word, and otherwise undecided (neither consistent nor
  false: it may be a paraphrase);
* ``raises`` with a description (``A ValidationError indicating the name is reserved``): the type must
  match; true when every key term of the description is in the message, else ``consistent``;
* ``raises`` with something more (``RuntimeError on initialization``): false when the type does not match,
  else ``consistent``; a bare type (``TypeError.``) is decided by the type alone;
* ``runs`` (``No error.``): true when nothing was raised; what follows (``No error, but the second agent
  will be ignored``) is a claim of its own: false when something was raised; when it says what is printed or returned
  in values written out (``No error; it prints `None`.``) it is compared with that
  (:func:`~retrieval_pipeline.core.verifier.observation.printed_output.decide_rest`), else ``consistent``;
* ``prints`` and ``value``: false when the snippet raised (the state is never reached), else compared;
* ``output`` (a plain text option of a question about what the code returns, prints, which message or
  substring comes out or which error it gives), when nothing was raised: values written out are compared with the
  printed lines, and the text that is all of what was printed or returned is true
  (:mod:`~retrieval_pipeline.core.verifier.observation.printed_output`); a text that is only part of it (word for word,
  or every key term) is consistent, and false beside an option that is all of it; one that holds under half of its key
  terms is false, and one with no key term undecided. A substring question takes the text word for word as true. When
  the snippet raised: true when the text is in the exception's message or one of its per-field errors, false when it
  holds under half of their key terms and another option quotes one word for word, else undecided (the question may
  mean the message);
* ``field_error`` ("The `type` field is missing"): against the per-field errors
  (:mod:`~retrieval_pipeline.core.verifier.observation.snippet_errors`).

``consistent`` is what a passing necessary check gives elsewhere: it never makes the option true, and the
verdict can only reach Valid by elimination (every other option false).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.observation.printed_output import (
    PART_OF_OUTPUT,
    WHOLE_OUTPUT,
    decide_printed,
    decide_rest,
    output_texts,
)
from retrieval_pipeline.core.verifier.observation.snippet_errors import decide_field_error
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionState

#: Words that carry no meaning of their own in a message.
_STOP = frozenset(
    "the and for with that this these those are was were has have had been being its into from then than "
    "when will would should shows show".split()
)
#: pydantic line-error type -> the exception a validator raised to cause it.
_WRAPPED = {"value_error": "ValueError", "assertion_error": "AssertionError"}


def what_happened(observation: Mapping[str, Any]) -> str:
    """One line: what the run did."""
    raised = observation.get("raised")
    if raised:
        message = " ".join(str(raised["message"]).split())
        return f"raises {raised['type']}: {message if len(message) <= 240 else message[:237] + '...'}"
    returned = observation.get("returned")
    called = f"{observation['called']}() " if observation.get("called") else ""
    return f"{called}runs without an exception" + (f" and returns {returned['repr']}" if returned else "")


def type_matches(name: str, raised: Mapping[str, Any]) -> bool:
    """Whether the exception named in an option is what was raised (its class or a base of it; see the module docstring)."""
    short = name.rsplit(".", 1)[-1]
    if short == raised.get("type"):
        return True
    names = set(raised.get("mro") or [])
    errors = raised.get("errors") or []
    if "ValidationError" in names and errors:
        names.discard("ValueError")
        names |= {_WRAPPED[e["type"]] for e in errors if e.get("type") in _WRAPPED}
    return short in names


def _normal(text: str) -> str:
    text = re.sub(r"\[[^\]]*(?:\]|$)", " ", str(text))  # pydantic's [type=..., input_value=...] details, cut or whole
    text = re.sub(r"for further information visit\s+\S+", " ", text, flags=re.I)  # pydantic's link, versioned
    text = re.sub(r"[`'\"\u2018\u2019\u201c\u201d]", "", text.lower())
    text = re.sub(r"(?:\.\.\.|\u2026)", " ", text)
    return re.sub(r"\s+", " ", text).strip(" .:;,!")


def _terms(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9_]+", _normal(text)) if len(w) >= 3 and w not in _STOP]


def _messages(raised: Mapping[str, Any]) -> list[str]:
    """The texts an option may quote: the message, and each line error's (with pydantic's "Value error, " cut), alone
    and with its field before or after it (``author Field required``, ``Field required: author``)."""
    texts = [str(raised.get("message", ""))]
    for error in raised.get("errors") or []:
        msg = re.sub(r"^(?:value error|assertion failed),\s*", "", str(error.get("msg", "")), flags=re.I)
        parts = [str(part) for part in error.get("loc", [])]
        texts += [msg, " ".join([*parts, msg]), f"{msg}: {'.'.join(parts)}"] if parts else [msg]
    return texts


#: Where a clause, a sentence or a line of a message ends (a "." inside a name such as ``Agent.tools`` does not).
_CLAUSE_END = re.compile(r"[.!?,;:]\s+|\s*\n\s*")
#: An option that marks its quote as cut (``cannot be user...``) claims only that part.
_CUT = re.compile(r"(?:\.\.\.|\u2026)\s*$")


def _clause_heads(text: str) -> list[str]:
    """``text`` up to each end of a clause, a sentence or a line of it, and whole, normalised."""
    ends = sorted({len(text), *(m.start() for m in _CLAUSE_END.finditer(text))})[:40]
    return [_normal(text[:end]) for end in ends]


def _ends_a_clause(wanted: str, text: str) -> bool:
    """Whether ``wanted`` (normalised) is word for word in ``text`` and ends where a clause, a sentence or a line of it
    ends (or at its end). Where it starts is free: an option may leave out ``Runner.__init__()`` before ``missing 1
    required ...`` or stop at a comma, but one that stops where the message goes on without a break quotes another,
    shorter message (a message a later version extended: ``Context variable not found: `x`.`` against ``Context
    variable not found: `x` in agent 'a'.``)."""
    return any(head.endswith(wanted) and (len(head) == len(wanted) or not head[-len(wanted) - 1].isalnum()) for head in _clause_heads(text))


def _terms_end_a_clause(terms: Sequence[str], text: str) -> bool:
    """The same for a key-term match: some clause end of ``text`` has every term before it and the last one last."""
    for head in _clause_heads(text):
        have = _terms(head)
        if have and have[-1] == terms[-1] and set(terms) <= set(have):
            return True
    return False


#: What :func:`message_match` finds, grouped: the option's text word for word in the message (``quoted``, ``part``) or only
#: its key terms (``match``, ``terms part``); the message it quotes being the raised one (``quoted``, ``match``) or a
#: shorter one, stopping where the raised message goes on (``part``, ``terms part``).
WORD_FOR_WORD = frozenset({"quoted", "part"})
TERMS_ONLY = frozenset({"match", "terms part"})
WHOLE_MESSAGE = frozenset({"quoted", "match"})
STOPS_SHORT = frozenset({"part", "terms part"})
IN_MESSAGE = WORD_FOR_WORD | TERMS_ONLY


def message_match(option: str, raised: Mapping[str, Any]) -> tuple[str, float]:
    """``(kind, coverage)``: how the option's message compares with what was raised.

    * ``quoted``: word for word (after normalising) in a raised message, ending where a clause, a sentence or a line of
      it ends (:func:`_ends_a_clause`), or cut by the option itself (``...``);
    * ``part``: word for word in one, but stopping where the message goes on without a break: it claims another,
      shorter message (``Context variable not found: `x`.`` against ``... `x` in agent 'a'.``);
    * ``match``: every key term is in one, the last one where a clause ends (``terms part`` when not);
    * ``differs``: fewer than half of its key terms are in one; ``partial``: half or more.
    """
    quoted = re.sub(r"\([^)]+\)", " ", option)  # "(shows the provided name)": a comment on the message
    wanted = _normal(quoted)
    raw = _messages(raised)
    texts = [_normal(t) for t in raw]
    cut = bool(_CUT.search(quoted.strip(" `'\"")))
    if wanted and any(wanted in t for t in texts):
        if cut or any(_ends_a_clause(wanted, t) for t in raw):
            return "quoted", 1.0
        return "part", 1.0
    terms = _terms(quoted)
    have = set(_terms(" ".join(texts)))
    coverage = sum(t in have for t in terms) / len(terms) if terms else 0.0
    if terms and coverage == 1.0:
        return ("match" if cut or any(_terms_end_a_clause(terms, t) for t in raw) else "terms part"), coverage
    return ("differs" if coverage < 0.5 else "partial"), coverage


#: A claim's state against the observation, and why.
Decision = tuple[OptionState, str]


def decide_option(details: Mapping[str, Any], observation: Mapping[str, Any]) -> Decision:
    """The state of one claim against a trusted observation, and why (see the module docstring).

    ``consistent``: what the observation can check holds (nothing was raised; the type matches) and the rest of the
    option is not checked. A quoted message that differs comes back ``undecided`` with a note starting
    ``"message differs"`` (or ``"message partly"``): :func:`decide_options` settles it against the other options.
    """
    raised, happened = observation.get("raised"), what_happened(observation)
    outcome = details["outcome"]
    rest = details.get("rest")
    if outcome == "field_error":
        return decide_field_error(details, raised, happened)  # type: ignore[return-value]
    if outcome == "runs":
        if raised:
            return "false", f"the snippet {happened}"
        said = decide_rest(rest, observation) if rest else None
        if said is not None:
            return said  # type: ignore[return-value]
        if rest:
            return "consistent", f"the snippet {happened}; the rest of the option ({rest!r}) is a claim of its own, not checked"
        return "true", f"the snippet {happened}"
    if outcome == "raises":
        if not raised:
            return "false", f"the snippet {happened}"
        if not type_matches(str(details["exception"]), raised):
            if rest and re.search(r"(?:Error|Exception|Warning)\b", rest):  # "KeyError or ValueError": another one offered
                return "undecided", f"undecided: the snippet {happened}; the option offers another exception too ({rest!r})"
            return "false", f"the snippet {happened}; not {details['exception']}"
        if details.get("message"):
            found, coverage = message_match(str(details["message"]), raised)
            if found in WHOLE_MESSAGE:
                return "true", f"the snippet {happened}"
            if found == "differs":
                return "undecided", f"message differs: the snippet {happened} ({coverage:.0%} of the option's key terms)"
            if found in STOPS_SHORT:
                return (
                    "undecided",
                    f"message partly: the option quotes the raised message only up to where it goes on without a break: the snippet {happened}",
                )
            return "undecided", f"message partly: the type matches, {coverage:.0%} of the message's key terms: the snippet {happened}"
        if details.get("describes"):
            terms = _terms(str(details["describes"]))
            have = set(_terms(" ".join(_messages(raised))))
            if terms and all(t in have for t in terms):
                return "true", f"the snippet {happened}"
            missing = [t for t in terms if t not in have]
            return "consistent", f"the type matches; the message does not name {missing}: the snippet {happened}"
        if rest:
            return "consistent", f"the type matches; the rest of the option ({rest!r}) is not checked: the snippet {happened}"
        return "true", f"the snippet {happened}"
    if raised and outcome == "output":  # the message may be the text the question asks about
        found, coverage = message_match(str(details["output_text"]), raised)
        if found in TERMS_ONLY and details.get("substring"):
            return "consistent", f"terms only: every key term is in the message, not as one substring: the snippet {happened}"
        if found in IN_MESSAGE:  # a text that describes an error, not `Type: message`
            return "true", f"the snippet {happened}"
        if found == "differs" and details.get("asks_error"):
            return "undecided", f"text differs: the snippet {happened} ({coverage:.0%} of the option's key terms are in its message)"
        return "undecided", f"undecided: the snippet {happened} ({coverage:.0%} of the option's key terms are in its message)"
    if raised:
        return "false", f"the snippet {happened} before that state is reached"
    if outcome == "output":
        texts = output_texts(observation)
        if not any(t.strip() for t in texts):
            return "undecided", f"the snippet {happened}, with no text to compare"
        printed = decide_printed(details, observation)  # values written out, the whole output, no key term
        if printed is not None:
            return printed  # type: ignore[return-value]
        found, coverage = message_match(str(details["output_text"]), {"message": " ".join(texts)})
        shown = " | ".join(t.strip() for t in texts if t.strip())
        if found in TERMS_ONLY and details.get("substring"):
            return "consistent", f"terms only: every key term is in the output, not as one substring: {shown!r}"
        if found in WORD_FOR_WORD and details.get("substring"):
            return "true", f"the snippet's output holds it word for word: {shown!r}"
        if found in IN_MESSAGE:
            return "consistent", f"{PART_OF_OUTPUT}: {shown!r}"
        return "false", f"the snippet's output does not hold it ({coverage:.0%} of its key terms): {shown!r}"
    if outcome == "prints":
        printed = str(observation.get("stdout", "")).strip()
        return ("true" if printed == str(details["printed"]).strip() else "false"), f"the snippet prints {printed!r}"
    value = (observation.get("expressions") or {}).get(str(details["expr"])) or {}
    if "error" in value:
        return "false", f"{details['expr']} raises {value['error']} after the snippet"
    if not value.get("literal"):
        return "undecided", f"{details['expr']} is {value.get('repr')!r} after the snippet, not a literal to compare"
    actual, expected = ast.literal_eval(value["repr"]), ast.literal_eval(str(details["expected"]))
    same = type(actual) is type(expected) and actual == expected
    return ("true" if same else "false"), f"{details['expr']} is {value['repr']} after the snippet"


def _quotes(details: Mapping[str, Any], observation: Mapping[str, Any]) -> bool:
    """Whether an option's message or text is, word for word, in what was raised (else what was printed or returned)."""
    text = details.get("message") or details.get("output_text")
    if not text:
        return False
    raised = observation.get("raised")
    if not raised:
        raised = {"message": " ".join(output_texts(observation))}
    found = message_match(str(text), raised)[0]
    return found == "quoted" or (found == "part" and not details.get("message"))  # a text describing an error: a part


def decide_options(claims: Sequence[Claim], observation: Mapping[str, Any]) -> list[Decision]:
    """Each claim decided (:func:`decide_option`). A quoted message that differs in substance from what was raised
    (under half of its key terms in it, quotes, backticks and spaces aside) is false: "same type, other message" is
    another outcome, not a consistent one. One that only partly matches it (half of its key terms or more) is false
    when another option quotes the raised message word for word, and otherwise undecided (never consistent: it may
    be a paraphrase or another message).
    A text option (``output``) holding under half the key terms of every raised message and per-field error is
    false on the same condition, and otherwise undecided (no type was checked). In a question about a substring, a
    text whose key terms are all there but not as one substring is consistent, and false when another option is one."""
    decided = [decide_option(c.details, observation) for c in claims]
    quoting = [i for i, c in enumerate(claims) if decided[i][0] == "true" and _quotes(c.details, observation)]
    whole = [i for i, (state, note) in enumerate(decided) if state == "true" and note.startswith(WHOLE_OUTPUT)]
    out: list[Decision] = []
    for i, (state, note) in enumerate(decided):
        others = [claims[j].letter for j in quoting if j != i]
        if state == "undecided" and note.startswith("message differs"):  # same type, another message: not consistent
            out.append(("false", f"the option quotes another message than the one raised; {note}"))
        elif state == "undecided" and note.startswith("message partly"):
            if others:
                out.append(("false", f"{note}; option(s) {', '.join(others)} quote the message raised"))
            else:
                out.append(("undecided", f"undecided: {note} (part of a message is neither that message nor another)"))
        elif state == "consistent" and note.startswith(PART_OF_OUTPUT) and whole:
            out.append(("false", f"{note}; option(s) {', '.join(claims[j].letter for j in whole)} are the whole output"))
        elif state == "consistent" and note.startswith("terms only") and others:
            out.append(("false", f"{note}; option(s) {', '.join(others)} quote it word for word"))
        elif state == "undecided" and note.startswith("text differs"):
            out.append(
                ("false", f"{note}; option(s) {', '.join(others)} quote the message raised")
                if others
                else ("undecided", f"undecided: {note}")
            )
        else:
            out.append((state, note))
    return out
