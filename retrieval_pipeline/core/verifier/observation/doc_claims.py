"""Questions about what a class or a member is for, read against the library's own documentation.

"What does `RunConfig.max_llm_calls` control?", "What is `Runner` primarily used for?", "What is the purpose of
`GlobalInstructionPlugin`?": the options are prose ("Limit total LLM calls.", "Nothing.", "Agent name."), which no
other claim reads. When every option of such a question is prose, the one class or member the question names is
resolved through the library index, and its documentation is read ONCE in the sandbox
(:mod:`..sandbox_side.read_docs`: the class docstring; for a member, the string after the field in the class body,
a pydantic ``Field(description=...)``, a property's or method's docstring). Each option is then compared on the
host by its key terms (:func:`coverage`; a shared stem of five letters counts, ``configure``/``configuration``):

* ``true`` when the documentation singles it out: it holds at least :data:`DESCRIBES` of the option's key terms,
  and at least :data:`DESCRIBING_TERMS` of them, while no other option reaches even :data:`DESCRIBED`. What a
  setting or a class is *for* is what its library says it is for: no run shows it, and the documentation is the
  source the question is graded against. A wrong option the documentation happens to echo is caught by the
  uniqueness: two options the documentation speaks to leave both merely consistent;
* ``consistent`` when the documentation holds at least :data:`DESCRIBED` of its key terms: the documentation says
  so, which is no proof of behaviour, so the question can only be Valid by elimination;
* ``false`` when it holds none of them AND another option is what the documentation describes (:data:`DESCRIBES`
  of its terms, or :data:`DESCRIBED` and at least :data:`DESCRIBING_TERMS` of them: a single shared word such as
  ``agent`` describes nothing);
* ``undecided`` otherwise, and for every option when the name does not resolve, has no documentation, or the
  read fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from retrieval_pipeline.core.services.sandbox.bubblewrap import run_in_sandbox
from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS, Claim
from retrieval_pipeline.core.verifier.sandbox_side import source
from retrieval_pipeline.core.verifier.verdicts.verdict import EVIDENCE_CHARS, OptionEvidence, OptionState

#: Share of an option's key terms the documentation must hold for the option to be consistent with it.
DESCRIBED = 1 / 3
#: ... and to be what the documentation describes (which rules out an option that shares no term with it):
#: this share, or :data:`DESCRIBED` with at least :data:`DESCRIBING_TERMS` terms (one word in common, "agent",
#: is no description).
DESCRIBES = 2 / 3
DESCRIBING_TERMS = 2
RUNNER_FILE = "read_docs.py"
REQUEST_FILE = "docs_request.json"
OUTPUT_FILE = "member.docs.json"
#: "What does `X.y` control?" and the like: a question that asks what something is for ...
_PURPOSE = re.compile(r"^what\b.*\b(?:control|used\s+for|use\s+case|purpose|enable|operate|responsible\s+for)\b.*\?\s*$", re.I)
#: ... about ONE backticked class (or ``Class.member``, ``Class.member=value``).
_TARGET = re.compile(r"^(?P<cls>[A-Z]\w*)(?:\.(?P<member>[a-z_]\w*))?(?:=.*)?$")
_STOP = frozenset(
    "the and for with that this from into its are was were has have had been being can will would should may "
    "any all each one use used using set sets setting when which what how does its their them they only".split()
)


def purpose_target(question: str) -> tuple[str, str | None] | None:
    """``(class, member or None)`` the question asks the purpose of, or None."""
    text = " ".join(question.split())
    spans = re.findall(r"`([^`]+)`", text)
    match = _TARGET.match(spans[0].strip()) if len(spans) == 1 and _PURPOSE.match(text) else None
    return (match.group("cls"), match.group("member")) if match else None


def applies(question: str, claims: Sequence[Claim]) -> bool:
    """A purpose question whose options are all prose that no other claim reads (None of the above aside)."""
    regular = [c for c in claims if c.kind not in DERIVED_KINDS]
    return purpose_target(question) is not None and bool(regular) and all(c.kind == "unknown" for c in regular)


def key_terms(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9]+", re.sub(r"[`'\"]", "", text.lower()).replace("_", " "))
    return [w for w in words if len(w) >= 3 and w not in _STOP]


def same_stem(term: str, word: str) -> bool:
    if term == word:
        return True
    n = min(len(term), len(word), 5)
    return n >= 4 and term[:n] == word[:n]


def matched(option: str, docs: str) -> tuple[int, int]:
    """``(key terms of the option the documentation holds, key terms of the option)``."""
    terms, words = key_terms(option), set(key_terms(docs))
    return sum(any(same_stem(t, w) for w in words) for t in terms), len(terms)


def coverage(option: str, docs: str) -> float | None:
    """Share of the option's key terms the documentation holds (None: the option has no key term)."""
    found, total = matched(option, docs)
    return found / total if total else None


def read_docs(path: str, member: str | None, settings: SandboxSettings) -> dict[str, Any]:
    """The documentation of ``path`` (or its ``member``), read in the sandbox: ``{"found", "texts", "error"}``."""
    files = {RUNNER_FILE: source(RUNNER_FILE), REQUEST_FILE: json.dumps({"path": path, "member": member})}
    execution = run_in_sandbox(files, [str(settings.python), RUNNER_FILE], settings, collect_suffix=".docs.json")
    try:
        out = json.loads(execution.artifacts.get(OUTPUT_FILE, "null"))
    except ValueError:
        out = None
    if not isinstance(out, dict):
        return {"found": False, "texts": [], "error": f"the read wrote nothing (outcome {execution.outcome!r})"}
    return out


def decide(claims: Sequence[Claim], docs: str) -> list[tuple[OptionState, str]]:
    """Each option against the documentation (see the module docstring)."""
    counts = [matched(c.option_text, docs) for c in claims]
    shares = [found / total if total else None for found, total in counts]
    described = [
        i for i, (share, (found, _)) in enumerate(zip(shares, counts))
        if share is not None and (share >= DESCRIBES or (share >= DESCRIBED and found >= DESCRIBING_TERMS))
    ]  # fmt: skip
    echoed = [i for i, share in enumerate(shares) if share is not None and share >= DESCRIBED]
    out: list[tuple[OptionState, str]] = []
    for i, share in enumerate(shares):
        found, total = counts[i]
        if share is None:
            out.append(("undecided", "undecided: the option has no key term to compare"))
        elif share >= DESCRIBES and found >= DESCRIBING_TERMS and echoed == [i]:
            out.append(("true", f"the documentation singles it out: it holds {found} of its {total} key terms, and no other "
                                f"option a third of its own: {docs[:200]!r}"))  # fmt: skip
        elif share >= DESCRIBED:
            out.append(("consistent", f"the documentation holds {share:.0%} of its key terms: {docs[:200]!r}"))
        elif share == 0 and [j for j in described if j != i]:
            others = ", ".join(claims[j].letter for j in described if j != i)
            out.append(("false", f"the documentation holds none of its key terms, and describes {others}: {docs[:200]!r}"))
        else:
            out.append(("undecided", f"undecided: the documentation holds {share:.0%} of its key terms"))
    return out


def doc_evidence(question: str, claims: Sequence[Claim], settings: SandboxSettings, index: Any) -> list[OptionEvidence] | None:
    """Evidence for every option of a purpose question (None of the above stays derived), or None when it does not apply."""
    target = purpose_target(question)
    if target is None or index is None or not applies(question, claims):
        return None
    cls, member = target
    resolved = index.resolve(cls)
    regular = [c for c in claims if c.kind not in DERIVED_KINDS]
    if resolved is None or resolved[0] != "path":
        why = f"undecided: {cls} does not resolve in the library index"
        decided: list[tuple[OptionState, str]] = [("undecided", why)] * len(regular)
    else:
        docs = read_docs(resolved[1], member, settings)
        text = " ".join(docs.get("texts") or [])
        if not docs.get("found") or not text.strip():
            why = f"undecided: no documentation of {resolved[1]}{'.' + member if member else ''} ({docs.get('error') or 'empty'})"
            decided = [("undecided", why)] * len(regular)
        else:
            decided = decide(regular, text)
    by_letter = {c.letter: d for c, d in zip(regular, decided)}
    evidence = []
    for claim in claims:
        if claim.kind in DERIVED_KINDS:
            evidence.append(
                OptionEvidence(claim.letter, claim, "derived", None, "undecided", "derived from the other options", prover="derived")
            )
            continue
        state, note = by_letter[claim.letter]
        ok = {"true": True, "false": False}.get(state)
        evidence.append(OptionEvidence(claim.letter, claim, "proof", ok, state, safe_text(note, EVIDENCE_CHARS), prover="offline"))
    return evidence
