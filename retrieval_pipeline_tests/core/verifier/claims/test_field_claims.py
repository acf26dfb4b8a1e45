"""Claims about a pair of fields (which must be provided, deprecation) and about abstract classes.

Extraction is checked on question and option wording only. The atoms are checked on small models defined
here, whose rules are plain to read (``Either`` takes exactly one of ``text``/``parts``), in this process (as
``test_atom_proofs`` does for its helpers), and the abstract-class claims end to end in the sandbox on Python's
own classes, whose documentation says what they are: ``logging.Handler.emit`` "must be implemented by
Handler subclasses", ``collections.abc.Mapping`` is an ABC, ``numbers.Number`` has ``ABCMeta`` as its
metaclass, ``json.JSONDecoder`` is a plain class.
"""

from __future__ import annotations

import abc
import warnings
from dataclasses import dataclass

import pydantic
import pytest

from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest_batch
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.field_claims import presence_sets, question_pair
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.verdicts.verdict import option_evidence

PAIR_QUESTION = "When building an `Either`, which statement is true regarding the `text` and `parts` fields?"


def claim(question: str, option: str):
    return decompose("c", question, {"A": option})[0]


def given(claim_) -> list[tuple[list[str], bool]]:
    (atom,) = claim_.details["atoms"]
    return [(s["given"], s["accepted"]) for s in atom["sets"]]


# --------------------------------------------------------------------------------------------------
# Extraction


def test_the_question_names_the_class_and_the_pair():
    assert question_pair(_frame(PAIR_QUESTION)) == ("Either", "text", "parts")
    assert question_pair(_frame("Which is true of `text` and `parts` fields?")) is None  # no class
    assert question_pair(_frame("In `Either` or `Other`, what of the `text` and `parts` fields?")) is None  # whose fields?
    assert question_pair(_frame("In `Either`, what of `text` and `parts`?")) is None  # not said to be fields


@pytest.mark.parametrize(
    ("option", "sets"),
    [
        ("Exactly one of them must be provided (XOR constraint).", [([], False), (["text"], True), (["parts"], True),
                                                                     (["text", "parts"], False)]),
        ("Either may be given, but not both.", None),  # "may": a permission, not the rule
        ("Either one is required, but not both.", [([], False), (["text"], True), (["parts"], True), (["text", "parts"], False)]),
        ("At least one of them must be provided.", [([], False), (["text"], True), (["parts"], True), (["text", "parts"], True)]),
        ("Both must be provided to ensure coverage.", [(["text"], False), (["parts"], False), (["text", "parts"], True)]),
        ("Both are optional.", [([], True), (["text"], True), (["parts"], True)]),
        ("Neither is required.", [([], True)]),
        ("Neither is required if `session` is set.", [(["session"], True)]),
        ("Both must be provided unless `raw` is set.", None),  # a condition the rules do not model
        ("Both must not be provided.", None),  # negated
        ("Neither is required when streaming.", None),  # a condition that is not a field
        ("They are stored together.", None),
    ],
)  # fmt: skip
def test_presence_statements_become_constructions(option, sets):
    found = presence_sets(option, "text", "parts")
    assert (None if found is None else [(s["given"], s["accepted"]) for s in found]) == sets


def test_pair_claims_carry_the_class_sets_and_controls():
    exactly = claim(PAIR_QUESTION, "Exactly one of them must be provided.")
    assert exactly.kind == "param_required" and exactly.decides == "truth"
    assert exactly.details["atoms"][0]["owner"] == "Either" and exactly.details["atoms"][0]["controls"] == [["text"], ["parts"]]
    assert exactly.details["free_names"] == ["Either"]
    deprecated = claim(PAIR_QUESTION, "`parts` is deprecated; only `text` is supported.")
    assert deprecated.kind == "attribute" and deprecated.decides == "necessary"  # the second clause is not checked
    assert deprecated.details["atoms"] == [{"check": "deprecated", "owner": "Either", "name": "parts"}]
    assert claim(PAIR_QUESTION, "`parts` is deprecated.").decides == "truth"
    assert claim(PAIR_QUESTION, "`other` is deprecated.").kind == "unknown"  # not one of the pair
    assert claim("Which statement about the plugin is true?", "Both must be provided.").kind == "unknown"  # no pair


def test_an_abstract_class_question_checks_that_the_named_class_is_abstract():
    question = "When defining a custom handler, which abstract base class must you inherit from?"
    named = claim(question, "`logging.Handler`")
    assert named.kind == "compound" and named.decides == "necessary"
    assert named.details["atoms"] == [{"check": "exists", "path": "logging.Handler"}, {"check": "abstract", "path": "logging.Handler"}]
    assert claim(question, "Handler (or a subclass of it)").details["disjunctive"] is True
    assert claim(question, "A custom class of your own.").kind != "compound"  # not a class name
    assert not any(a.get("check") == "abstract" for a in claim(question, "handler_base").details.get("atoms") or [])
    negated = claim("Which of these is NOT an abstract base class?", "Handler")
    assert not any(a.get("check") == "abstract" for a in negated.details.get("atoms") or [])
    plain = claim("Which class writes records to a stream?", "StreamHandler")
    assert not any(a.get("check") == "abstract" for a in plain.details.get("atoms") or [])


def _frame(question: str):
    from retrieval_pipeline.core.verifier.claims.claims import analyse_question  # noqa: PLC0415

    return analyse_question(question)


# --------------------------------------------------------------------------------------------------
# The atoms, in this process, on models whose rules are written right here


class Part(pydantic.BaseModel):
    body: str


class Either(pydantic.BaseModel):
    """Exactly one of ``text`` and ``parts``; ``name`` is required; ``session`` changes nothing."""

    name: str
    text: str | None = None
    parts: list[Part] | None = None
    session: dict[str, int] | None = None

    @pydantic.model_validator(mode="after")
    def _one_of(self) -> Either:
        if (self.text is None) == (self.parts is None):
            raise ValueError("give text or parts")
        return self


class Digits(pydantic.BaseModel):
    """``code`` must be digits: the sample value "x" is rejected whatever the rule on the pair."""

    code: str | None = pydantic.Field(default=None, pattern=r"^\d+$")
    other: str | None = None


class Marked(pydantic.BaseModel):
    old: int | None = pydantic.Field(default=None, deprecated="use new")
    new: int | None = None


class Warns(pydantic.BaseModel):
    legacy: int | None = None

    def model_post_init(self, context: object) -> None:
        if self.legacy is not None:
            warnings.warn("legacy is going away", DeprecationWarning, stacklevel=2)


@dataclass
class Pair:
    left: int
    right: str = "r"


def names(*classes: type) -> dict[str, tuple[str, str]]:
    return {c.__name__: ("path", f"{__name__}.{c.__name__}") for c in classes}


def presence(owner: str, *sets: tuple[list[str], bool], controls=(["text"], ["parts"])) -> dict:
    return {"check": "presence", "owner": owner, "sets": [{"given": g, "accepted": a} for g, a in sets], "controls": list(controls)}


def test_presence_decides_by_building_the_model(helpers):
    check, known = helpers["_check"], names(Either, Digits, Pair)
    xor = presence("Either", ([], False), (["text"], True), (["parts"], True), (["text", "parts"], False))
    assert check(xor, known)[0] == "true"
    state, reason = check(presence("Either", (["text"], False), (["parts"], False), (["text", "parts"], True)), known)
    assert state == "false" and "Either(text) is accepted" in reason  # "both must be provided"
    state, reason = check(presence("Either", (["session"], True)), known)  # "neither is required if session is set"
    assert state == "false" and "is rejected" in reason  # session's value was accepted beside text, so the rule rejects it
    assert check(presence("Either", (["text"], True), (["parts"], True)), known)[0] == "true"  # "at least one", partly


def test_a_rejection_that_may_be_the_sample_values_fault_stays_undecided(helpers):
    check, known = helpers["_check"], names(Digits)
    state, reason = check(presence("Digits", (["code"], True), controls=(["code"], ["other"])), known)
    assert state == "undecided" and "never accepted" in reason
    assert check(presence("Digits", (["other"], True), controls=()), known)[0] == "true"


def test_presence_reads_dataclasses_and_leaves_other_things_open(helpers):
    check, known = helpers["_check"], names(Pair)
    left_required = presence("Pair", (["right"], False), (["left"], True), (["left", "right"], True), controls=())
    assert check(left_required, known)[0] == "true"  # a required field the atom names is left out unless given
    state, reason = check(presence("Pair", (["right"], True), (["left"], True), controls=()), known)
    assert state == "false" and "Pair(right) is rejected" in reason  # left is missing; right was accepted beside left
    assert check(presence("json", ([], True), controls=()), {"json": ("path", "json")})[0] == "undecided"  # not a model
    assert check(presence("Pair", (["nowhere"], True), controls=()), known)[0] == "undecided"  # no such field


def test_deprecated_fields(helpers):
    check, known = helpers["_check"], names(Marked, Warns, Either)
    assert check({"check": "deprecated", "owner": "Marked", "name": "old"}, known)[0] == "true"  # pydantic's mark
    assert check({"check": "deprecated", "owner": "Warns", "name": "legacy"}, known)[0] == "true"  # warns when set
    state, reason = check({"check": "deprecated", "owner": "Marked", "name": "new"}, known)
    assert state == "undecided" and "mentions deprecation" in reason  # its class's source speaks of deprecation
    state, reason = check({"check": "deprecated", "owner": "Either", "name": "parts"}, known)
    assert state == "false" and "not marked deprecated" in reason


class Declared(abc.ABC):  # noqa: B024 - an ABC with no abstract method, on purpose
    def run(self) -> int:
        return 1


class LeftOpen:
    def run(self) -> int:
        raise NotImplementedError


class Concrete:
    """Adds two numbers."""

    def run(self) -> int:
        return 2


class BaseWorker:
    def run(self) -> int:
        return 3


class Documented:
    """Subclass this to define a step."""

    def run(self) -> int:
        return 4


def test_abstract_classes(helpers):
    check, known = helpers["_check"], names(Declared, LeftOpen, Concrete, BaseWorker, Documented)
    abstract = lambda path: check({"check": "abstract", "path": path}, known)  # noqa: E731
    assert abstract("Declared")[0] == "true" and abstract("LeftOpen")[0] == "true"
    state, reason = abstract("Concrete")
    assert state == "false" and "concrete" in reason
    assert abstract("BaseWorker")[0] == "undecided"  # named as a base
    assert abstract("Documented")[0] == "undecided"  # its docstring asks for subclasses


# --------------------------------------------------------------------------------------------------
# End to end in the sandbox, on Python's own classes

ABSTRACT_QUESTION = "When writing your own component, which abstract base class must you inherit from?"
SANDBOX_CASES = [
    ("`logging.Handler`", "consistent"),  # Handler.emit raises NotImplementedError
    ("collections.abc.Mapping", "consistent"),  # abstract methods
    ("numbers.Number", "consistent"),  # ABCMeta is its metaclass
    ("json.JSONDecoder", "false"),  # a plain class
    ("json.JSONEncoder", "undecided"),  # its docstring speaks of subclasses
    ("logging.NoSuchHandler", "false"),  # not there at all
]


@pytest.fixture(scope="module")
def decided():
    from retrieval_pipeline_tests.core.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    claims = [decompose("c", ABSTRACT_QUESTION, {f"L{i}": option})[0] for i, (option, _) in enumerate(SANDBOX_CASES)]
    proofs = [OfflineProver().prove(c) for c in claims]
    executions = run_pytest_batch([(p.test_source, p.filename) for p in proofs], SandboxSettings(timeout_s=60))
    return [option_evidence(p, e) for p, e in zip(proofs, executions)]


@pytest.mark.parametrize("number", range(len(SANDBOX_CASES)), ids=[f"{o}->{s}" for o, s in SANDBOX_CASES])
def test_the_abstract_class_claim_in_the_sandbox(decided, number):
    evidence = decided[number]
    assert evidence.state == SANDBOX_CASES[number][1], evidence.note
