"""Pair extraction in core: the kind's pair builder or suite gold resolution, counts, warnings (no Dagster)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.pairs.extract import NO_ENDPOINT_WARNING, extract_pairs, needs_llm
from retrieval_pipeline.core.pairs.import_resolver import LibraryEnvironmentError
from retrieval_pipeline.core.pairs.settings import TargetSettings
from retrieval_pipeline.core.registry import DatasetConfig
from retrieval_pipeline.core.services.llm.client import LLMCall

DOCS = [
    Document("json.dumps", "Serialize obj to a JSON formatted str.", kind="function", module="json"),
    Document("json.loads", "Deserialize s to a Python object.", kind="function", module="json"),
    Document("csv.DictWriter", "Write dictionaries as rows of a CSV file.", kind="class", module="csv"),
    Document("csv.writer", "Return a writer object.", kind="function", module="csv"),
]


def suite_config(inferer: str = "auto", **kw: Any) -> DatasetConfig:
    return DatasetConfig(name="s", suites=["a.yaml"], corpus={"introspect_modules": ["json", "csv"]}, targets={"inferer": inferer}, **kw)


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


def md_rows(table: str) -> list[list[str]]:
    """The body rows of a Markdown table, as stripped cells."""
    lines = table.strip().splitlines()[2:]  # header and separator
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]


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
    assert "api_gold_by_method" not in summary
    assert result.details["api_gold_by_method"] == {"exact": 2, "alias": 0, "suffix": 0, "import": 0, "unresolved": 1}
    shares = {k.removeprefix("api_gold_share_"): v for k, v in summary.items() if k.startswith("api_gold_share_")}
    assert shares == {"exact": 2 / 3, "alias": 0.0, "suffix": 0.0, "import": 0.0, "unresolved": 1 / 3}
    # the fix_error case named its subject in the description only (it has no code file)
    assert (summary["fix_error_targets_from_code"], summary["fix_error_targets_from_description"]) == (0, 1)
    assert summary["fix_error_code_description_compared"] == 0 and math.isnan(summary["fix_error_code_description_agreement_rate"])
    assert result.details["fix_error_code_description_disagreements"] == []
    assert md_rows(result.details["fix_error_targets"]) == [["fix:writer", "csv.DictWriter", "description", "csv.DictWriter", "n/a", ""]]
    assert "gold_import_python" not in summary  # the dataset names no library environment
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


def test_fix_error_targets_from_code_are_counted_and_disagreements_listed(tmp_path: Path) -> None:
    (tmp_path / "agree.py").write_text("import csv\nw = csv.DictWriter(open('f'), ['a'])\n")
    (tmp_path / "differ.py").write_text("import json\ns = json.dumps({})\n")
    cases = [
        case("fix:agree", "fix_error", "Use a `csv.DictWriter`.", files={"fixed": str(tmp_path / "agree.py")}),
        case("fix:differ", "fix_error", "The `csv.DictWriter` breaks.", files={"fixed": str(tmp_path / "differ.py")}),
        case("fix:desc", "fix_error", "Parse it with `json.loads`."),
    ]
    result = extract_pairs(cases, DOCS, suite_config("ast"))
    summary = result.summary
    assert (summary["fix_error_targets_from_code"], summary["fix_error_targets_from_description"], summary["fix_error_targets_none"]) == (
        2,
        1,
        0,
    )
    assert (summary["fix_error_code_description_compared"], summary["fix_error_code_description_agreement_rate"]) == (2, 0.5)
    assert result.details["fix_error_code_description_disagreements"] == [
        {"case": "fix:differ", "code": "json.dumps", "source": "code:fixed", "description": "csv.DictWriter"}
    ]
    assert md_rows(result.details["fix_error_targets"]) == [
        ["fix:agree", "csv.DictWriter", "code:fixed", "csv.DictWriter", "agree", ""],
        ["fix:differ", "json.dumps", "code:fixed", "csv.DictWriter", "disagree", ""],
        ["fix:desc", "json.loads", "description", "json.loads", "n/a", ""],
    ]


class RecordingImporter:
    """Stands in for the library's environment: every gold is ``csv.writer``."""

    def __init__(self, **kw: Any) -> None:
        self.python = kw["python"]
        self.kw = kw
        self.calls: list[list[str]] = []

    def resolve(self, golds, lookup):  # noqa: ANN001, ANN201 - the GoldImporter protocol
        from retrieval_pipeline.core.pairs.gold import GoldResolution

        self.calls.append(list(golds))
        return {g: GoldResolution(g, "csv.writer", "import", note=f"resolved by import: {g} is csv.writer") for g in golds}


def test_a_library_environment_resolves_the_rest_by_import_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[RecordingImporter] = []
    monkeypatch.setattr(
        "retrieval_pipeline.core.pairs.extract.ImportResolver", lambda **kw: made.append(RecordingImporter(**kw)) or made[-1]
    )
    config = suite_config("ast", verifier={"python": "/env/bin/python", "import_name": "json"})
    result = extract_pairs(CASES, DOCS, config)
    (importer,) = made
    assert importer.kw == {"python": Path("/env/bin/python"), "dataset": "s", "import_name": "json"}
    assert importer.calls == [["json.frobnicate"]]  # only the gold the corpus lacks, one call
    assert result.summary["api_gold_share_import"] == 1 / 3 and result.summary["api_gold_share_unresolved"] == 0.0
    assert result.summary["gold_import_python"] == "/env/bin/python"


def test_a_missing_library_environment_is_an_error_naming_it(tmp_path: Path) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    with pytest.raises(LibraryEnvironmentError, match=str(python)) as caught:
        extract_pairs(CASES, DOCS, suite_config("ast", verifier={"python": str(python)}))
    assert "dataset s" in str(caught.value)


def test_golds_are_imported_in_the_sandbox_with_the_stdlib_as_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end, this venv's python as the library: ``csv.reader`` is ``_csv.reader``, which the corpus holds."""
    from retrieval_pipeline.core.services.sandbox.settings import SandboxError

    docs = [*DOCS, Document("_csv.reader", "Return a reader object.", kind="function", module="_csv")]
    cases = [case("api:reader", "api_understanding", "How do I read CSV rows?", gold_fqns=["csv.reader"])]
    config = suite_config("ast", verifier={"python": sys.executable, "import_name": "csv"})
    try:
        result = extract_pairs(cases, docs, config)
    except LibraryEnvironmentError as exc:
        if isinstance(exc.__cause__, SandboxError):
            pytest.skip(f"the sandbox cannot run here: {exc}")
        raise
    (resolution,) = json.loads(result.frame.loc[0, "evidence"])["resolutions"]
    assert (resolution["doc_id"], resolution["method"]) == ("_csv.reader", "import")
    assert resolution["note"] == "resolved by import: csv.reader is _csv.reader"


@pytest.mark.integration
def test_real_adk_golds_all_resolve_with_the_library_environment(shared_data: Path) -> None:
    from retrieval_pipeline.core.datasets.inputs import build_corpus, load_cases
    from retrieval_pipeline.core.registry import load_registry

    config = load_registry().datasets["adk_v1_24_1"]
    if config.verifier.python is None or not config.verifier.python.exists():
        pytest.skip(f"the google-adk environment {config.verifier.python} is absent: create it with `make adk-env`")
    config = config.model_copy(update={"targets": TargetSettings(inferer="ast")})
    result = extract_pairs(load_cases(config).cases, build_corpus(config).documents, config)
    by_method = result.details["api_gold_by_method"]
    assert by_method["unresolved"] == 0 and by_method["import"] > 0  # 100% of dev golds
    assert result.summary["api_gold_resolution_rate"] == 1.0
    imported = [r for p in result.pairs for r in p.evidence.get("resolutions", []) if r["method"] == "import"]
    assert {r["gold"] for r in imported} <= {"google.adk.Agent", "google.adk.agents.Agent", "google.adk.agents.llm_agent.Agent"}
    assert all(r["doc_id"] == "google.adk.agents.llm_agent.LlmAgent" and r["note"].startswith("resolved by import:") for r in imported)
    assert result.summary["fix_error_cases"] == 23
    assert result.summary["fix_error_targets_from_code"] + result.summary["fix_error_targets_from_description"] <= 23
