"""Turn claims into pytest proofs that run in the sandbox.

A proof is one pytest file, ``test_option_<L>.py``, that PASSES when the option is TRUE. The verdict
does not read pytest's exit code alone: the test writes ``option.evidence.json`` with
``option_true`` = ``true`` just before passing, ``false`` just before failing with an assertion, or
``null`` when it could not decide (the subject of the question is missing, the setup failed). So
"false" is always a deliberate, recorded assertion, never a crash: a collection error, a timeout, a
resource limit or an unexpected exception leaves the option undecided.

A proof's code is the text of real files (:mod:`..sandbox_side`: the prelude, the atom checks, the proofs of
each kind), and its test calls one of their functions with the claim's data as one literal
(:mod:`.proof_source`): every text of a claim (option text, case id, names, expressions) enters as pure ASCII,
so a proof always compiles.

:class:`OfflineProver` is deterministic and offline. Names that are not importable as written (bare
``LlmAgent``, ``types.Part``, ``runner.run_async``) are resolved through a
:class:`~retrieval_pipeline.core.verifier.proofs.library_index.LibraryIndex`, built once per suite by
:func:`~retrieval_pipeline.core.verifier.proofs.library_index.probe_environment` inside the sandbox (the host never
imports the library under test). A name the index does not hold is proven absent only when the probe saw
the whole library; otherwise the option is undecided. :class:`Prover` is the seam for a prover whose proofs
an LLM writes.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from retrieval_pipeline.core.verifier.claims.claims import ATOM_KINDS, DERIVED_KINDS, Claim
from retrieval_pipeline.core.verifier.proofs.atom_proofs import ATOM_SOURCE, VALUE_ATOM_SOURCE, atoms_body
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex
from retrieval_pipeline.core.verifier.proofs.proof_source import EVIDENCE_FILE, KINDS_SOURCE, compose, proof_test, safe_letter

ProofStatus = Literal["proof", "unverifiable_offline"]
#: A test of a kind proven by its own body: the function of ``sandbox_side/proof_kinds.py`` and its arguments.
KindTest = tuple[str, dict[str, Any]]


@dataclass
class Proof:
    """A test for one claim, or the reason there is none.

    Attributes:
        claim: The claim proven.
        test_source: The pytest file, or None when there is no proof.
        status: ``proof`` or ``unverifiable_offline``.
        filename: The file's name in the sandbox.
        reason: Why there is no proof.
        prover: Who wrote it: ``offline``, or ``llm:<model>`` (recorded for every option).
    """

    claim: Claim
    test_source: str | None
    status: ProofStatus
    filename: str | None = None
    reason: str = ""
    prover: str = "offline"


class Prover(Protocol):
    """Writes a proof for a claim. Must not see the ground truth: it gets the claim only."""

    name: str

    def prove(self, claim: Claim) -> Proof: ...


class OfflineProver:
    """Deterministic proofs for every decidable claim kind; ``unknown`` stays unverifiable."""

    name = "offline"

    def __init__(self, index: LibraryIndex | None = None) -> None:
        self.index = index

    def prove(self, claim: Claim) -> Proof:
        if not claim.decidable:
            reason = "derived from the other options" if claim.kind in DERIVED_KINDS else "no offline proof"
            return Proof(claim, None, "unverifiable_offline", None, reason)
        atoms = self._atoms(claim)
        if atoms is not None:
            parts = [ATOM_SOURCE, VALUE_ATOM_SOURCE, self._atoms_body(claim, atoms)] if atoms else None
        else:
            test = {
                "import": self._import_test,
                "exists": self._exists_test,
                "signature_param": self._signature_test,
                "constructor_kwarg": self._signature_test,
                "expression": self._expression_test,
                "snippet": self._snippet_test,
            }[claim.kind](claim)
            parts = None if test is None else [KINDS_SOURCE, proof_test(safe_letter(claim.letter), *test)]
        if parts is None:
            return Proof(claim, None, "unverifiable_offline", None, "the claim's names cannot be resolved offline")
        source = compose(f"Proof for case {claim.case_id!r}, option {claim.letter!r}: {claim.hypothesis}", *parts)
        return Proof(claim, source, "proof", f"test_option_{safe_letter(claim.letter)}.py")

    # ---- atoms

    def _atoms(self, claim: Claim) -> list[dict[str, Any]] | None:
        """The atoms a claim's proof runs; None for the kinds proven by their own bodies.

        A name question about a role (``which plugin``) adds a ``role`` atom when the library defines the
        role's base class (``BasePlugin``): a named class that does not derive from it is not the answer.
        """
        if claim.kind in ATOM_KINDS:
            return [dict(a) for a in claim.details.get("atoms") or []]
        roles = self._role_paths(claim) if claim.kind == "exists" else []
        if not roles:
            return None
        path = claim.details["path"]
        return [{"check": "exists", "path": path}, {"check": "role", "path": path, "bases": roles}]

    def _role_paths(self, claim: Claim) -> list[str]:
        """The role bases (``BasePlugin``) the library index holds, fully qualified."""
        if self.index is None or not self.index.import_name:
            return []
        found: list[str] = []
        for base in claim.details.get("role_bases") or []:
            resolved = self.index.resolve(base) if base in self.index.names else None
            if resolved is not None and resolved[1] not in found:
                found.append(resolved[1])
        return found

    def _atoms_body(self, claim: Claim, atoms: list[dict[str, Any]]) -> str:
        names: dict[str, Any] = dict(self._names(claim, list(claim.details.get("free_names") or [])))
        for name, spec in list(names.items()):
            other = self._instance_class(name) if spec[0] == "path" and self.index and name in self.index.module_aliases else None
            if other and other != spec[1]:  # ``app``: the module the library imports as ``app``, or an ``App``
                names[name] = ("either", [spec, ("path", other)])
        return atoms_body(safe_letter(claim.letter), names, atoms)

    def _instance_class(self, name: str) -> str | None:
        """The class a lower-case name is an instance of (``runner`` -> ``Runner``), by the index's own rule."""
        return self.index.instance_class(name) if self.index is not None else None

    # ---- names

    def _names(self, claim: Claim, free: list[str]) -> dict[str, tuple[str, str]]:
        """Bindings for the free names: from the question, then the library index, else importable."""
        bindings: Mapping[str, Mapping[str, str]] = claim.details.get("bindings") or {}
        names: dict[str, tuple[str, str]] = {}
        passed = passed_only(str(claim.details.get("expr") or "")) if claim.kind == "expression" else set()
        for name in free:
            if name in bindings:
                spec = bindings[name]
                if "decorated_with" in spec:
                    names[name] = ("decorated_with", spec["decorated_with"])
                    continue
                path = spec["path"]
                head = path.split(".")[0]
                resolved = self.index.resolve(head) if (self.index and head not in _STDLIB_HINTS) else None
                names[name] = ("path", resolved[1] + path[len(head) :] if resolved else path)
                continue
            if self.index is not None and self.index.import_name and name not in _STDLIB_HINTS:
                resolved = self.index.resolve(name)
                weak = self._weak_name(claim, name, resolved) if resolved is not None else None
                if weak is not None:
                    names[name] = ("unprobed", (name, weak))  # undecided: the name is not evidence here
                    continue
                if resolved is not None and claim.kind == "expression" and self.index.resolved_as_instance(name):
                    # `text` in `OpenAPIToolset(spec_str=text)` is a value the user holds, not the class `Text`:
                    # evaluated with the class in its place, the call fails for that alone
                    why = f"`{name}` stands for a value (an instance of {resolved[1]}?), which this proof cannot build"
                    names[name] = ("unprobed", (name, why))
                    continue
                if resolved is not None:
                    names[name] = resolved
                    continue
                absent = self.index.absent(name)  # undecided when the probe may have missed it, never false
                if absent is None:
                    continue
                kind, reason = absent
                if kind == "unprobed":
                    names[name] = ("unprobed", (name, reason))
                elif name in passed:
                    # `llm_request.set_output_schema(Forecast)`: a value the option passes may be the user's own (a
                    # model, a function) that the library need not define; its absence says nothing about the call
                    why = f"`{name}` is only passed as a value, which may be the user's own: {reason}"
                    names[name] = ("unprobed", (name, why))
                elif claim.details.get("library_symbol") or name[:1].isupper():
                    names[name] = ("missing", reason)
        return names

    def _weak_name(self, claim: Claim, name: str, resolved: tuple[str, str]) -> str | None:
        """Why a lower-case name the index resolved is no evidence about the question's object; None when it is.

        A lower-case name counts when the question names it (``runner`` for a question about ``Runner``), when the
        question's snippet or its file imports it, or when it is the library's alias of a module and nothing else
        (``types``). A snippet's own variable is the snippet's, not the library's; and a word that is both a module
        somewhere in the library and an instance of a class (``agent``: ``google.adk.cli.built_in_agents.agent``
        or an ``Agent``) is not evidence unless the question names it.
        """
        if not name[:1].islower() or self.index is None:
            return None
        snippet = claim.details.get("snippet_names") or {}
        if name in (snippet.get("imported") or []):
            return None
        if name in (snippet.get("defined") or []):
            return f"`{name}` is the snippet's own name, which this proof does not run"
        if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", claim.question, re.I):
            return None
        if name in self.index.module_aliases and self._instance_class(name) is None:
            return None
        return (
            f"`{name}` is neither named in the question nor the snippet's: reading it as {resolved[1]} "
            "(a word that happens to name something in the library) is no evidence"
        )

    # ---- the kinds proven by their own bodies (``sandbox_side/proof_kinds.py``)

    def _import_test(self, claim: Claim) -> KindTest:
        return "_prove_import", {"statement": claim.details["statement"]}

    def _exists_test(self, claim: Claim) -> KindTest | None:
        path = claim.details["path"]
        head = path.split(".")[0]
        if claim.details.get("library_symbol") and (self.index is None or not self.index.library):
            return None  # a bare name with no library to look it up in
        names = self._names(claim, [head])
        head_from_question = (
            "." in path
            and not claim.details.get("library_symbol")
            and (claim.subject is not None and claim.option_text.strip().rstrip(".").strip("`()") != path)
        )
        return "_prove_exists", {"path": path, "names": names, "head_from_question": head_from_question}

    def _signature_test(self, claim: Claim) -> KindTest:
        subject = claim.subject or ""
        names = self._names(claim, [subject.split(".")[0]])
        if claim.details.get("exact"):
            expected = {"expected": claim.details["params"], "expect_async": claim.details["is_async"]}
            return "_prove_signature", {"subject": subject, "names": names, **expected}
        return "_prove_accepts", {
            "subject": subject,
            "names": names,
            "param": claim.details["param"],
            "expect_accepted": claim.details["expect_accepted"],
            "value_source": claim.details.get("value"),  # the option's literal text (``delete=False``): evaluated in the proof
            "named_only": claim.decides == "necessary",
        }

    def _snippet_test(self, claim: Claim) -> KindTest:
        """Run the question's snippet and check the outcome the option names (:mod:`..claims.snippet_claims`)."""
        details = {k: v for k, v in claim.details.items() if k != "snippet"}
        return "_prove_snippet", {"snippet": claim.details["snippet"], "details": details}

    def _expression_test(self, claim: Claim) -> KindTest:
        d = claim.details
        free = list(d.get("free_names") or [])
        data = {"names": self._names(claim, free), "free": free, "setup": d.get("setup", ""), "expr": d["expr"], "mode": d["mode"]}
        if d["mode"] == "raises":
            data["exception"] = d["exception"]
        elif d["mode"] != "evaluates":
            data["expected"] = d["expected"]
        return "_prove_expression", data


def passed_only(expr: str) -> set[str]:
    """Names an expression uses only as values passed to a call (its arguments), never as what is called or looked
    up on: ``Forecast`` in ``llm_request.set_output_schema(Forecast)``."""
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError):
        return set()
    arguments: set[int] = set()  # the Name nodes that are themselves an argument
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        for value in [*call.args, *(k.value for k in call.keywords)]:
            value = value.value if isinstance(value, ast.Starred) else value
            if isinstance(value, ast.Name):
                arguments.add(id(value))
    passed = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) in arguments}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in arguments}
    return passed - used


#: Heads that are Python's own modules even when a library re-exports something of the same name.
_STDLIB_HINTS = frozenset(
    "os sys re json math time datetime collections functools itertools shutil subprocess pathlib typing "
    "inspect asyncio logging enum dataclasses abc io uuid base64 hashlib random statistics textwrap "
    "urllib csv sqlite3 tempfile heapq bisect argparse threading multiprocessing concurrent copy string".split()
)


def parse_evidence(artifacts: Mapping[str, str]) -> dict[str, Any] | None:
    """The test's own record (``option.evidence.json``), or None when it wrote none."""
    raw = artifacts.get(EVIDENCE_FILE)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
