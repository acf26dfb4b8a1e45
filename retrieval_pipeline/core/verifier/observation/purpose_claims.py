"""A documented purpose: the one option whose library documentation states what the question asks for is true.

"Which `LlmAgent` parameter saves the agent's output to the session state?" with options ``save_to_state``,
``output_key``, ... : the proofs show which names exist (a necessary check: *consistent*), never what a name is
*for*. Valid by elimination needs "None of the above" proven false too (``verdict.py``), and only a proof that the
existing name is the one the question means gives that. This module gives it the way :mod:`.doc_claims` does for
prose options: what a parameter, field or class is for is what the library's own documentation says it is for.

It applies to an option that passed its necessary check and names a documented thing: a keyword of a class
(``constructor_kwarg``, ``signature_param`` of a class), a class or a dotted name (``exists``), or a call's one
keyword (``RunConfig(enable_affective_dialog=True)``, an ``expression`` that evaluates). Its documentation (the
field's description or attribute docstring, else the class docstring; read once in the sandbox by
:mod:`..sandbox_side.read_docs`) together with the words of its own name is compared with the question's **purpose
terms**: the question's key terms less the words of what it names in backticks (the class the parameter belongs
to is no purpose) and less the words that only say what kind of thing is asked for (parameter, class, field...).

The option becomes **true** when that text holds at least :data:`PURPOSE_TERMS` of the purpose terms and at least
:data:`PURPOSE_SHARE` of them, and it is the only option of the question that passed its check and whose
documentation does (two documented candidates leave both consistent: the documentation cannot single one out).
Nothing is read while another regular option is still undecided or more than :data:`MAX_CANDIDATES` passed, so no
verdict can rest on an option the proofs left open.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS
from retrieval_pipeline.core.verifier.observation.doc_claims import key_terms, read_docs, same_stem
from retrieval_pipeline.core.verifier.verdicts.verdict import EVIDENCE_CHARS, OptionEvidence

#: Purpose terms the documentation (with the option's own name) must hold: at least this many ...
PURPOSE_TERMS = 2
#: ... and this share of them.
PURPOSE_SHARE = 0.4
#: Options that passed their check, at most, for the documentation to be read.
MAX_CANDIDATES = 2
#: Words that say what kind of thing the question asks for, not what it is for.
_KIND_WORDS = frozenset(
    "parameter parameters argument arguments field fields attribute attributes class classes type types object objects "
    "option options setting settings config configuration value values name names method methods function tool "
    "correct correctly way want need pass passed specify specific should would which what who whom whose where why "
    "you your does do primary main given following".split()
)


def purpose_terms(question: str) -> list[str]:
    """The question's key terms less the words of its backticked names and of the kind of thing it asks for."""
    named = {w for span in re.findall(r"`([^`]+)`", question) for w in _name_words(span)}
    text = re.sub(r"`[^`]+`", " ", question)
    return [t for t in dict.fromkeys(key_terms(text)) if t not in _KIND_WORDS and not any(same_stem(t, n) for n in named)]


def _name_words(name: str) -> list[str]:
    """``LlmAgent`` -> llm, agent; ``enable_affective_dialog`` -> enable, affective, dialog."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace(".", " ")
    return key_terms(spaced)


def documented_target(evidence: OptionEvidence, index: Any) -> tuple[str, str | None, str] | None:
    """``(class or object path, member or None, the name the option gives)`` whose documentation says what the option
    names is for; None when the option names nothing documented."""
    claim, details = evidence.claim, evidence.claim.details
    if claim.kind in ("constructor_kwarg", "signature_param") and details.get("param") and claim.subject:
        path = _resolve(str(claim.subject), index)
        return (path, str(details["param"]), str(details["param"])) if path else None
    if claim.kind == "exists" and details.get("path"):
        path = _resolve(str(details["path"]), index)
        return (path, None, str(details["path"]).rsplit(".", 1)[-1]) if path else None
    if claim.kind == "expression" and details.get("mode") == "evaluates":
        try:
            call = ast.parse(str(details.get("expr")), mode="eval").body
        except SyntaxError:
            return None
        keywords = [k.arg for k in getattr(call, "keywords", []) if k.arg]
        callee = ast.unparse(call.func) if isinstance(call, ast.Call) else None
        path = _resolve(callee, index) if callee else None
        return (path, keywords[0], keywords[0]) if path and len(keywords) == 1 else None
    return None


def _resolve(dotted: str, index: Any) -> str | None:
    """The full path of a (dotted) name through the library index, or None."""
    head, _, rest = dotted.partition(".")
    found = index.resolve(head) if index is not None and re.fullmatch(r"[A-Za-z_][\w.]*", dotted) else None
    if found is None or found[0] != "path":
        return None
    return f"{found[1]}.{rest}" if rest else found[1]


def documented_purpose(question: str, evidence: Sequence[OptionEvidence], settings: SandboxSettings, index: Any) -> list[OptionEvidence]:
    """The evidence with the one consistent option whose documentation states the question's purpose made true (see the
    module docstring); unchanged when the rule does not apply."""
    regular = [e for e in evidence if e.claim.kind not in DERIVED_KINDS]
    candidates = [e for e in regular if e.state == "consistent"]
    if not candidates or len(candidates) > MAX_CANDIDATES or any(e.state not in ("consistent", "false") for e in regular):
        return list(evidence)
    wanted = purpose_terms(question)
    if len(wanted) < PURPOSE_TERMS:
        return list(evidence)
    spoken: dict[str, tuple[int, str]] = {}
    for e in candidates:
        target = documented_target(e, index)
        if target is None:
            return list(evidence)  # an option passed whose purpose cannot be read: nothing singles one out
        path, member, name = target
        docs = read_docs(path, member, settings)
        text = " ".join(docs.get("texts") or []) if docs.get("found") else ""
        words = set(key_terms(text)) | set(_name_words(name))
        found = sum(any(same_stem(t, w) for w in words) for t in wanted)
        if found >= PURPOSE_TERMS and found >= PURPOSE_SHARE * len(wanted):
            spoken[e.letter] = (found, text)
    if len(spoken) != 1:
        return list(evidence)
    ((letter, (found, text)),) = spoken.items()
    out = []
    for e in evidence:
        if e.letter == letter:
            note = (f"documented purpose: the documentation of {e.claim.option_text.strip()!r} holds {found} of the question's "
                    f"{len(wanted)} purpose terms ({', '.join(wanted)}), and no other option that passed does: {text[:200]!r}")  # fmt: skip
            e = dataclasses.replace(e, state="true", option_true=True, note=safe_text(note, EVIDENCE_CHARS))
        out.append(e)
    return out
