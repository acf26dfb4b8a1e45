"""Which value is valid for a field of a class: options read from made-up questions, and the ``valid_value`` atom run
in this process on made-up pydantic models (the proof-side helpers: prelude, atoms.py, value_atoms.py)."""

from __future__ import annotations

import pydantic
import pytest

from retrieval_pipeline.core.verifier.claims.value_claims import enumerated_options, sample_kind, snippet_callee
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.atom_proofs import ATOM_SOURCE, VALUE_ATOM_SOURCE
from retrieval_pipeline.core.verifier.proofs.proof_source import PRELUDE_SOURCE
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.sandbox_side import value_atoms

LISTED = "Which of the following is a VALID queue name?\nA. `jobs-1` B. `1jobs` C. `jobs_1` D. `'system'`"


def test_letter_options_stand_for_the_values_the_question_lists():
    stem, options = enumerated_options(LISTED, {"A": "A", "B": "B", "C": "C", "D": "D", "E": "None of the above"})
    assert stem == "Which of the following is a VALID queue name?"
    assert options == {"A": "`jobs-1`", "B": "`1jobs`", "C": "`jobs_1`", "D": "`'system'`", "E": "None of the above"}


@pytest.mark.parametrize(
    ("question", "options"),
    [
        (LISTED, {"A": "`jobs-1`", "B": "`1jobs`"}),  # the options are values, not letters
        ("Which is valid? B. `x` A. `y`", {"A": "A", "B": "B"}),  # listed out of order
        ("Which is valid? A. `x` B. `y`", {"A": "A", "C": "C"}),  # C is not listed
        ("Which is valid?", {"A": "A", "B": "B"}),  # nothing listed
    ],
)
def test_other_options_are_not_read_as_listed_letters(question, options):
    assert enumerated_options(question, options) is None


def test_each_listed_value_becomes_a_valid_value_claim_on_the_class_the_question_names():
    claims = decompose("c", LISTED, {"A": "A", "B": "B", "C": "C", "D": "D", "E": "None of the above"})
    atoms = [c.details["atoms"][0] for c in claims[:4]]
    assert [(a["owner"], a["field"], a["value"], a["valid"]) for a in atoms] == [
        ("Queue", "name", "jobs-1", True), ("Queue", "name", "1jobs", True), ("Queue", "name", "jobs_1", True),
        ("Queue", "name", "system", True),  # a quoted string is its value
    ]  # fmt: skip
    assert all(c.kind == "compound" and c.decides == "truth" for c in claims[:4]) and claims[4].kind == "none_of_the_above"
    negated = decompose("c", "Which of these is NOT a valid queue name?", {"A": "`jobs`"})[0]
    assert negated.details["atoms"][0]["valid"] is False
    assert decompose("c", "Which of these queue names is invalid?", {"A": "`jobs`"})[0].kind != "compound"  # no "<class> <field>"


def test_a_valid_keyword_argument_question_is_not_a_value_question():
    claim = decompose("c", "Which is a valid keyword argument of `Queue`?", {"A": "`timeout`"})[0]
    assert not any(a.get("check") == "valid_value" for a in claim.details.get("atoms") or [])


class Queue(pydantic.BaseModel):
    name: str
    size: int

    @pydantic.field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier():
            raise ValueError(f"queue name {value!r} must be an identifier")
        return value

    @pydantic.model_validator(mode="after")
    def _not_reserved(self) -> Queue:
        if self.name == "system":
            raise ValueError("the queue name system is reserved")
        return self


class Plain:
    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture(scope="module")
def check():
    namespace: dict[str, object] = {"__name__": "value_atoms_under_test"}
    exec(compile(PRELUDE_SOURCE + "\n" + ATOM_SOURCE + "\n" + VALUE_ATOM_SOURCE, "<atoms>", "exec"), namespace)
    return namespace["_check"]


NAMES = {"Queue": ("path", f"{__name__}.Queue"), "Plain": ("path", f"{__name__}.Plain")}


@pytest.mark.parametrize(
    ("owner", "value", "valid", "state"),
    [
        ("Queue", "jobs_1", True, "true"),  # accepted, with a sample size
        ("Queue", "jobs-1", True, "false"),  # rejected at name
        ("Queue", "jobs-1", False, "true"),  # "which is NOT valid": rejected at name
        ("Queue", "jobs_1", False, "false"),
        ("Queue", "system", True, "undecided"),  # rejected by the whole model, not at name
        ("Plain", "x", True, "undecided"),  # no fields to read
        ("Missing", "x", True, "undecided"),  # the noun names no class of the library: no disproof
    ],
)
def test_the_valid_value_atom(check, owner, value, valid, state):
    names = {**NAMES, "Missing": ("missing", "Missing is not defined anywhere in lib")}
    atom = {"check": "valid_value", "owner": owner, "field": "name", "value": value, "valid": valid}
    assert check(atom, names)[0] == state


def test_the_value_atom_file_registers_its_check_and_travels_with_every_atom_proof():
    assert value_atoms._ATOM_CHECKS["valid_value"] is value_atoms._atom_valid_value
    claim = decompose("c", LISTED, {"A": "A", "B": "B"})[0]
    assert VALUE_ATOM_SOURCE in str(OfflineProver().prove(claim).test_source)


# ---- "what type does the `x` argument expect?"


class Form(pydantic.BaseModel):
    title: str
    schema_class: type[pydantic.BaseModel] | None = None
    tags: list[str] = []


@pytest.mark.parametrize(
    ("option", "kind"),
    [
        ("A Pydantic model class.", "pydantic_class"),
        ("An instance of a Pydantic model.", "pydantic_instance"),
        ("A JSON schema dictionary.", "json_schema"),
        ("A plain dict.", "dict"),
        ("A list of field names.", "list"),
        ("A string or a list.", None),  # an alternative: no claim
        ("A class.", None),  # which class is not said
        ("Anything at all.", None),
    ],
)
def test_the_kind_of_value_an_option_names(option, kind):
    assert sample_kind(option) == kind


def test_the_callee_of_a_parameter_is_read_from_the_snippet():
    spread = "def f():\n    kwargs = {'schema_class': Thing}\n    return Form(title='t', **kwargs)\n"
    assert snippet_callee(spread, "schema_class") == "Form"
    assert snippet_callee("Form(title='t', schema_class=Thing)\n", "schema_class") == "Form"
    assert snippet_callee("Form(schema_class=A)\nSheet(schema_class=B)\n", "schema_class") is None  # two callees
    assert snippet_callee("build(schema_class=A)\n", "schema_class") is None  # not a class


def test_a_type_question_becomes_sample_claims_on_the_class_the_snippet_calls():
    question = "What kind of value does the `schema_class` argument expect?"
    options = {
        "A": "A Pydantic model class.",
        "B": "A Pydantic model instance.",
        "C": "A JSON schema dictionary.",
        "D": "None of the above",
    }
    snippet = "def code_under_test():\n    return Form(title='t', schema_class=Thing)\n"
    claims = decompose("c", question, options, snippet=snippet)
    atoms = [c.details["atoms"][0] for c in claims[:3]]
    assert [(a["owner"], a["field"], a["sample"]) for a in atoms] == [
        ("Form", "schema_class", "pydantic_class"), ("Form", "schema_class", "pydantic_instance"), ("Form", "schema_class", "json_schema"),
    ]  # fmt: skip
    named = decompose("c", "What type does the `tags` parameter of `Form` accept?", {"A": "A list of strings."})[0]
    assert named.details["atoms"][0]["owner"] == "Form" and named.details["atoms"][0]["sample"] == "list"


@pytest.mark.parametrize(
    ("field", "sample", "state"),
    [
        ("schema_class", "pydantic_class", "true"),
        ("schema_class", "pydantic_instance", "false"),
        ("schema_class", "json_schema", "false"),
        ("tags", "list", "true"),
        ("tags", "int", "false"),
    ],
)
def test_the_value_atom_with_a_sample_of_a_kind(check, field, sample, state):
    names = {"Form": ("path", f"{__name__}.Form")}
    assert check({"check": "valid_value", "owner": "Form", "field": field, "sample": sample, "valid": True}, names)[0] == state
