""" "As a list to the `p` parameter": how things are passed to a class, proven by the parameter's name and declared type."""

from __future__ import annotations

import dataclasses
import typing

from retrieval_pipeline.core.verifier.claims.compound_claims import names_the_things
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.sandbox_side import atoms
from retrieval_pipeline.core.verifier.verify import verify_question

QUESTION = "How should sub-agents be passed to `SequentialAgent`?"
OPTIONS = {
    "A": "As a list to the `agents` parameter.",
    "B": "As a list to the `name` parameter.",
    "C": "As a list to the `sub_agents` parameter.",
    "D": "None of the above",
}


def test_names_the_things_matches_the_parameter_name_not_a_part_of_it():
    assert names_the_things("sub_agents", QUESTION)
    assert not names_the_things("agents", QUESTION)  # "agents" is only the tail of "sub-agents"
    assert names_the_things("tools", "You want an `LlmAgent` with a set of tools. How do you pass them?")
    assert names_the_things("tools", "How is a tool given to `LlmAgent`?")  # singular
    assert not names_the_things("plugins", QUESTION)
    assert names_the_things("address", "How should the address be passed to `Client`?")  # only one final s is a plural


def test_a_list_to_the_parameter_named_for_the_things_decides_the_truth():
    claims = {c.letter: c for c in decompose("c", QUESTION, OPTIONS)}
    assert claims["C"].kind == "compound" and claims["C"].decides == "truth"
    assert [a["check"] for a in claims["C"].details["atoms"]] == ["member", "takes_list"]
    assert claims["A"].decides == "necessary" and claims["B"].decides == "necessary"
    # not a question about passing things: no such claim
    other = decompose("c", "Which parameter of `SequentialAgent` holds its children?", {"A": OPTIONS["C"]})
    assert other[0].hypothesis != claims["C"].hypothesis


def test_admits_list_reads_declared_types():
    assert atoms._admits_list(list[int]) is True
    assert atoms._admits_list(typing.Optional[list[str]]) is True  # noqa: UP045 (the typing form is what is tested)
    assert atoms._admits_list(typing.Sequence[int] | None) is True  # noqa: UP006
    assert atoms._admits_list(list) is True
    assert atoms._admits_list(dict[str, int] | None) is False
    assert atoms._admits_list(str) is False
    assert atoms._admits_list(tuple[int, ...]) is False and atoms._admits_list(typing.Iterable[int]) is True  # noqa: UP006
    assert atoms._admits_list(typing.Any) is None and atoms._admits_list(object) is None
    assert atoms._admits_list(typing.Union[typing.Any, dict]) is None  # noqa: UP007


def test_declared_type_of_a_dataclass_field():
    @dataclasses.dataclass
    class Holder:
        items: list[int]
        label: str = ""

    assert atoms._declared_type(Holder, "items") == list[int]
    assert atoms._admits_list(atoms._declared_type(Holder, "label")) is False


def test_the_list_parameter_is_proven_true_and_the_others_false_in_the_sandbox(acme_offline):
    settings, prover = acme_offline
    verdict = verify_question("c", QUESTION, OPTIONS, "C", prover, settings)
    states = {e.letter: e.state for e in verdict.evidence}
    # agents: no such parameter; name: declared str, which takes no list; sub_agents: declared list | None
    assert states == {"A": "false", "B": "false", "C": "true", "D": "false"}, [e.note for e in verdict.evidence]
    assert verdict.verdict == "Valid"
    assert verify_question("c", QUESTION, OPTIONS, "D", prover, settings).verdict == "Incorrect"


def test_a_list_parameter_not_named_for_the_things_is_only_consistent(acme_offline):
    settings, prover = acme_offline
    question = "How should the children be passed to `SequentialAgent`?"
    verdict = verify_question("c", question, {"A": OPTIONS["C"], "B": OPTIONS["A"], "C": "None of the above"}, "A", prover, settings)
    assert {e.letter: e.state for e in verdict.evidence} == {"A": "consistent", "B": "false", "C": "undecided"}
