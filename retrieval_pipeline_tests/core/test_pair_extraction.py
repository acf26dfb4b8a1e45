"""Pair extraction in core: the kind's pair builder or suite gold resolution, counts, warnings (no Dagster)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from retrieval_pipeline.core.asset_metadata import Markdown
from retrieval_pipeline.core.llm.client import LLMCall
from retrieval_pipeline.core.pair_extraction import NO_ENDPOINT_WARNING, extract_pairs, needs_llm
from retrieval_pipeline.core.registry import DatasetConfig, TargetSettings
from retrieval_pipeline.core.types import Case, Document

DOCS = [
    Document("json.dumps", "Serialize obj to a JSON formatted str.", kind="function", module="json"),
    Document("json.loads", "Deserialize s to a Python object.", kind="function", module="json"),
    Document("csv.DictWriter", "Write dictionaries as rows of a CSV file.", kind="class", module="csv"),
    Document("csv.writer", "Return a writer object.", kind="function", module="csv"),
]


def suite_config(inferer: str = "auto") -> DatasetConfig:
    return DatasetConfig(name="s", suites=["a.yaml"], corpus={"introspect_modules": ["json", "csv"]}, targets={"inferer": inferer})


def case(case_id: str, benchmark_type: str, query: str, **kw: Any) -> Case:
    return Case(case_id, "suite", benchmark_type, "suite.yaml", 0, query, **kw)


#: By construction: 2 api cases resolve (exact FQN), 1 does not; 1 fix_error case names its subject in the
#: description; 1 multiple-choice case is routed to the verifier.
CASES = [
    case("api:dumps", "api_understanding", "How do I serialise to a string?", gold_fqns=["json.dumps"]),
    case("api:loads", "api_understanding", "How do I parse a string?", gold_fqns=["json.loads"]),
    case("api:frob", "api_understanding", "How do I frobnicate?", gold_fqns=["json.frobnicate"]),
    case("fix:writer", "fix_error", "Write the rows with a `csv.DictWriter` and a header."),
    case("mc:1", "multiple_choice", "Which import?", options={"A": "from json import dumps", "B": "x"}, correct_answer="A"),
]


def test_suite_cases_are_resolved_counted_and_their_warnings_returned():
    result = extract_pairs(CASES, DOCS, suite_config())
    frame = result.frame.set_index("query_id")
    assert list(result.frame["query_id"]) == [c.case_id for c in CASES]  # one pair per case, in input order
    assert frame["status"].to_dict() == {
        "api:dumps": "resolved",
        "api:loads": "resolved",
        "api:frob": "unresolved",
        "fix:writer": "resolved",
        "mc:1": "not_retrieval",
    }
    assert list(frame.loc["fix:writer", "gold_doc_ids"]) == ["csv.DictWriter"]
    summary = result.summary
    assert (summary["total"], summary["resolved"], summary["unresolved"], summary["not_retrieval"]) == (5, 3, 1, 1)
    assert (summary["api_gold_strings"], summary["api_gold_resolved"]) == (3, 2)
    assert summary["api_gold_resolution_rate"] == 2 / 3
    assert (summary["fix_error_cases"], summary["fix_error_targets_found"]) == (1, 1)
    assert summary["target_inferer"] == "ast" and result.inferer == "ast"
    assert "api_gold_by_method" not in summary and result.details["api_gold_by_method"] == {"exact": 2, "unresolved": 1}
    assert any("'json.frobnicate'" in w and "api:frob" in w for w in result.warnings)
    assert result.warnings == [w for p in result.pairs for w in p.warnings]  # no fallback warning: the inferer was auto
    unresolved = result.details["unresolved_cases"]
    assert isinstance(unresolved, Markdown) and "api:frob" in unresolved and "api:dumps" not in unresolved
    assert json.loads(frame.loc["mc:1", "evidence"]) == {"routed_to": "question verifier"}  # JSON fields as text


def test_inferer_llm_without_a_client_warns_first_and_uses_the_ast():
    result = extract_pairs(CASES, DOCS, suite_config("llm"))
    assert result.warnings[0] == NO_ENDPOINT_WARNING and result.inferer == "ast"


def test_needs_llm_only_for_fix_error_cases_and_a_non_ast_inferer():
    assert needs_llm(CASES, TargetSettings(inferer="auto")) and needs_llm(CASES, TargetSettings(inferer="llm"))
    assert not needs_llm(CASES, TargetSettings(inferer="ast"))
    assert not needs_llm([c for c in CASES if c.benchmark_type != "fix_error"], TargetSettings(inferer="llm"))


class FakeClient:
    """An LLM that always names ``answer`` as the primary subject."""

    def __init__(self, answer: str) -> None:
        self.settings = SimpleNamespace(model="fake")
        self.answer = answer
        self.calls = 0

    def map_json(self, requests: list[Any]) -> list[LLMCall]:
        self.calls += len(requests)
        return [LLMCall("k", {"primary_class": self.answer, "rationale": "r"}, None, False, 1, 5, 1, "fake") for _ in requests]


def test_an_llm_disagreeing_with_the_ast_is_listed_in_the_details():
    client = FakeClient("csv.writer")
    result = extract_pairs(CASES, DOCS, suite_config(), client)  # type: ignore[arg-type]
    assert client.calls == 1  # the one fix_error case
    assert result.inferer == "llm:fake" and result.summary["target_inferer"] == "llm:fake"
    assert (result.summary["ast_llm_compared"], result.summary["ast_llm_disagreements"]) == (1, 1)
    assert result.details["ast_llm_disagreements_list"] == [
        {"case": "fix:writer", "ast": "csv.DictWriter", "llm": "csv.writer", "kept": ["csv.writer"]}
    ]
    keys = list(result.metadata({"llm_calls": 1}))
    assert (
        keys.index("target_inferer") < keys.index("llm_calls") < keys.index("ast_llm_disagreements_list") < keys.index("api_gold_by_method")
    )


def test_an_agreeing_llm_lists_no_disagreement():
    result = extract_pairs(CASES, DOCS, suite_config(), FakeClient("csv.DictWriter"))  # type: ignore[arg-type]
    assert result.summary["ast_llm_agreement_rate"] == 1.0 and "ast_llm_disagreements_list" not in result.details


def test_a_client_is_not_asked_when_the_inferer_is_ast():
    client = FakeClient("csv.writer")
    result = extract_pairs(CASES, DOCS, suite_config("ast"), client)  # type: ignore[arg-type]
    assert client.calls == 0 and result.inferer == "ast"


def test_another_kind_pairs_through_its_adapter_and_adds_its_counts():
    config = DatasetConfig(name="c", kind="context_qa", context_qa={"qa": "qa.json", "pydoc_topics": ["*"]})
    chunks = [Document("c1", "a for loop repeats a block of statements"), Document("c2", "the import statement loads a module")]
    cases = [
        case("q1", "context_qa", "what does a for loop do", extra={"expected_context": "a for loop repeats a block of statements"}),
        case("q2", "context_qa", "what is a decorator", extra={"expected_context": "decorators wrap functions in other functions"}),
    ]
    result = extract_pairs(cases, chunks, config)
    summary = result.summary
    assert (summary["total"], summary["resolved"], summary["unresolved"]) == (2, 1, 1)
    assert (summary["context_pairs"], summary["contexts_matched"], summary["relevance_ceiling"]) == (2, 1, 0.5)
    assert list(result.frame.set_index("query_id").loc["q1", "gold_doc_ids"]) == ["c1"]
