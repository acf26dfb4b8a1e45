"""Tests for inferring the primary subject class of fix_error cases."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.pairs.fix_targets import (
    AstTargetInferer,
    TargetInferer,
    TargetRecord,
    description_names,
)
from retrieval_pipeline.core.pairs.gold import CorpusLookup

LLM = "google.adk.agents.llm_agent.LlmAgent"
SEQ = "google.adk.agents.sequential_agent.SequentialAgent"
BASE = "google.adk.agents.base_agent.BaseAgent"
TOOL = "google.adk.tools.function_tool.FunctionTool"
APP = "google.adk.apps.app.App"


def doc(doc_id: str, kind: str = "class", aliases: list[str] | None = None) -> Document:
    """A minimal document."""
    return Document(doc_id=doc_id, text=doc_id, title=doc_id.rsplit(".", 1)[-1], kind=kind, aliases=aliases or [])


@pytest.fixture()
def lookup() -> CorpusLookup:
    return CorpusLookup.from_documents(
        [
            doc(LLM, aliases=["google.adk.agents.LlmAgent"]),
            doc(SEQ, aliases=["google.adk.agents.SequentialAgent"]),
            doc(BASE, aliases=["google.adk.agents.BaseAgent"]),
            doc(TOOL),
            doc(APP),
            doc("google.adk.agents.llm_agent.LlmAgent.output_schema", kind="method"),
            doc("google.adk.other.deep.SequentialAgent"),
            doc("collections.OrderedDict"),
        ]
    )


def fix_case(tmp_path: Path, description: str = "Fix it.", **sources: str) -> Case:
    """A fix_error case whose ``files`` hold the given role -> source text."""
    files = {}
    for role, source in sources.items():
        path = tmp_path / f"{role}.py"
        path.write_text(textwrap.dedent(source))
        files[role] = str(path)
    return Case("fix:1", "fix_errors", "fix_error", "suite.yaml", 0, description, files=files)


def infer(case: Case, lookup: CorpusLookup):  # noqa: ANN201 - the TargetInference
    return AstTargetInferer().infer(case, lookup)


def test_ast_inferer_satisfies_the_protocol() -> None:
    assert isinstance(AstTargetInferer(), TargetInferer) and AstTargetInferer.name == "ast"


def test_from_import_root_object_beats_more_frequent_helpers(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path,
        fixed="""
        from google.adk.agents import LlmAgent, SequentialAgent

        def create_agent():
            writer = LlmAgent(name="writer")
            reader = LlmAgent(name="reader")
            root_agent = SequentialAgent(name="root", sub_agents=[writer, reader])
            return root_agent
        """,
    )
    result = infer(case, lookup)
    assert (result.target, result.method) == (SEQ, "ast")
    assert result.evidence["role"] == "fixed" and result.evidence["file"] == case.files["fixed"]
    candidates = {c["doc_id"]: c for c in result.evidence["candidates"]}
    assert candidates[LLM]["count"] == 2 and not candidates[LLM]["root"]
    assert candidates[SEQ]["root"] and SEQ in result.evidence["reason"]
    assert result.warnings == []


def test_outermost_object_wins_over_helper_calls(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path,
        fixed="""
        from google.adk.agents import LlmAgent
        from google.adk.tools.function_tool import FunctionTool as FT
        from google.adk.apps.app import App

        search = FT(func=len)
        lookup = FT(func=abs)
        root_agent = LlmAgent(name="a", tools=[search, lookup, FT(func=min)])
        app = App(name="app", root_agent=root_agent)
        """,
    )
    result = infer(case, lookup)
    assert result.target == APP
    assert {c["doc_id"]: c["count"] for c in result.evidence["candidates"]} == {TOOL: 3, LLM: 1, APP: 1}


def test_import_module_alias(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path,
        fixed="""
        import collections as c
        import google.adk.agents as agents

        cache = c.OrderedDict()
        root_agent = agents.SequentialAgent(name="x", sub_agents=[])
        """,
    )
    result = infer(case, lookup)
    symbols = {c["doc_id"]: c["symbols"] for c in result.evidence["candidates"]}
    assert symbols["collections.OrderedDict"] == ["collections.OrderedDict"]
    assert symbols[SEQ] == ["google.adk.agents.SequentialAgent"]


def test_plain_dotted_import(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(tmp_path, fixed="import collections\nroot = collections.OrderedDict()\n")
    assert infer(case, lookup).target == "collections.OrderedDict"


def test_local_subclass_credits_its_base(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path,
        fixed="""
        from google.adk.agents import BaseAgent, LlmAgent

        class Conditional(BaseAgent):
            async def _run_async_impl(self, ctx):
                yield None

        root_agent = Conditional(name="c", sub_agents=[LlmAgent(name="a"), LlmAgent(name="b")])
        """,
    )
    result = infer(case, lookup)
    assert result.target == BASE
    (base,) = [c for c in result.evidence["candidates"] if c["doc_id"] == BASE]
    assert base["root"] and base["symbols"] == ["google.adk.agents.BaseAgent (via Conditional)"]


def test_unimported_class_is_resolved_by_name(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(tmp_path, unfixed='root_agent = LlmAgent(name="a")\nprint(len("x"))\n')
    result = infer(case, lookup)
    assert (result.target, result.evidence["role"]) == (LLM, "unfixed")
    assert result.evidence["candidates"][0]["resolved_by"] == "name"


def test_foreign_package_does_not_match_by_name(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path,
        fixed="""
        from other_pkg.models import LlmAgent as Foreign
        from google.adk.runtime import SequentialAgent

        root_agent = Foreign(name="x")
        helper = SequentialAgent(name="s")
        """,
    )
    result = infer(case, lookup)
    assert result.target == SEQ  # drifted import path, same package: found by name
    assert result.evidence["unresolved"] == ["other_pkg.models.LlmAgent"]


def test_file_without_corpus_calls_falls_back_with_warning(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(tmp_path, "Create a `LlmAgent`.", fixed="import os\nx = os.getcwd()\n")
    result = infer(case, lookup)
    assert (result.target, result.method) == (LLM, "description")
    assert "no corpus object" in result.warnings[0] and case.files["fixed"] in result.warnings[0]


def test_syntax_error_warns_with_line_and_falls_back_to_next_file(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path,
        fixed="from google.adk.agents import LlmAgent\n\nroot_agent = LlmAgent(\n",
        test="from google.adk.agents import SequentialAgent\nrunner = SequentialAgent(name='s')\n",
    )
    result = infer(case, lookup)
    assert (result.target, result.evidence["role"]) == (SEQ, "test")
    (warning,) = result.warnings
    assert case.files["fixed"] in warning and "line 3" in warning and "fix:1" in warning


def test_syntax_error_everywhere_falls_back_to_description(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(tmp_path, "Create a `SequentialAgent`.", fixed="def broken(:\n")
    result = infer(case, lookup)
    assert (result.target, result.method) == (SEQ, "description")
    assert len(result.warnings) == 1 and "syntax error" in result.warnings[0]
    record = TargetRecord.from_evidence(result.evidence)
    assert record is not None and (record.source, record.target, record.description_target, record.agrees) == (
        "description",
        SEQ,
        SEQ,
        None,
    )
    (problem,) = record.file_problems
    assert (problem["role"], problem["file"], problem["line"]) == ("fixed", case.files["fixed"], 1)
    assert problem["problem"].startswith("syntax error at line 1")


def record_of(case: Case, lookup: CorpusLookup) -> TargetRecord:
    record = TargetRecord.from_evidence(infer(case, lookup).evidence)
    assert record is not None
    return record


def test_record_of_a_code_target_agreeing_with_the_description(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path, "Build a `SequentialAgent` pipeline.", fixed="from google.adk.agents import SequentialAgent\nroot = SequentialAgent()\n"
    )
    record = record_of(case, lookup)
    assert (record.case_id, record.target, record.source, record.description_target, record.agrees) == (
        "fix:1",
        SEQ,
        "code:fixed",
        SEQ,
        True,
    )
    assert record.from_code and record.file_problems == [] and record.missing_files == []


def test_record_of_a_code_target_disagreeing_keeps_both_answers(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(
        tmp_path,
        "The `SequentialAgent` fails.",
        fixed="def broken(:\n",
        test="import os\nx = os.getcwd()\n",
        unfixed="from google.adk.apps.app import App\napp = App()\n",
    )
    record = record_of(case, lookup)
    assert (record.target, record.source, record.description_target, record.agrees) == (APP, "code:unfixed", SEQ, False)
    assert [(p["role"], p["line"]) for p in record.file_problems] == [("fixed", 1), ("test", None)]
    assert record.file_problems[1]["problem"] == "no corpus object is called"


def test_record_without_a_description_target_is_not_compared(tmp_path: Path, lookup: CorpusLookup) -> None:
    case = fix_case(tmp_path, "Fix the ValueError.", fixed="from google.adk.apps.app import App\napp = App()\n")
    record = record_of(case, lookup)
    assert (record.source, record.description_target, record.agrees) == ("code:fixed", None, None)


def test_description_backticks_first_and_class_preferred(lookup: CorpusLookup) -> None:
    description = "Create a LlmAgent that uses `output_schema` in a `SequentialAgent`."
    case = Case("fix:2", "s", "fix_error", "f.yaml", 0, description)
    result = infer(case, lookup)
    assert (result.target, result.method) == (SEQ, "description")  # backticked class beats plain CamelCase
    assert [n["name"] for n in result.evidence["names"]] == ["output_schema", "SequentialAgent", "LlmAgent"]
    assert result.evidence["alternatives"] == ["google.adk.other.deep.SequentialAgent"]  # shortest id won


def test_description_camel_case_fallback(lookup: CorpusLookup) -> None:
    case = Case("fix:3", "s", "fix_error", "f.yaml", 0, "Create a minimal LlmAgent named 'single_agent'.")
    assert infer(case, lookup).target == LLM


def test_no_target_says_why_and_missing_files_warn(lookup: CorpusLookup) -> None:
    missing = [{"role": "fixed", "path": "/nowhere/fixed.py"}, {"role": "test", "path": "/nowhere/test_agent.py"}]
    case = Case("fix:4", "s", "fix_error", "f.yaml", 0, "Fix the ValueError.", extra={"missing_files": missing})
    result = infer(case, lookup)
    assert (result.target, result.method) == (None, "none") and result.evidence["reason"]
    assert len(result.warnings) == 2
    assert all("fix:4" in w for w in result.warnings) and "/nowhere/fixed.py" in result.warnings[0]
    record = TargetRecord.from_evidence(result.evidence)
    assert record is not None and (record.source, record.target, record.agrees) == ("none", None, None)
    assert record.missing_files == missing


def test_description_names() -> None:
    text = "Use `google.adk.Foo` and `'none'` with `run()` then BarBaz, `Foo Bar`, OpenAI, ValueError and Simple."
    assert description_names(text) == ["google.adk.Foo", "none", "run", "BarBaz", "OpenAI", "ValueError"]


@pytest.mark.integration
def test_real_fix_errors_without_their_files_root_fall_back_to_descriptions(shared_data: Path) -> None:
    from retrieval_pipeline.core.datasets.api_index import load_ranked_targets
    from retrieval_pipeline.core.datasets.suite.reader import load_suite

    corpus = load_ranked_targets(shared_data / "adk" / "ranked_targets" / "v1.24.1" / "ranked_targets.yaml")
    lookup = CorpusLookup.from_documents(corpus.documents)
    suite = load_suite(shared_data / "adk" / "benchmark_definitions" / "fix_errors" / "benchmark.yaml")  # paths resolve wrongly
    results = [AstTargetInferer().infer(case, lookup) for case in suite.cases]
    targeted = [r for r in results if r.target]
    assert len(targeted) >= 0.8 * len(results)
    assert all(r.method == "description" and lookup.kind(r.target) == "class" for r in targeted)
    assert all(r.warnings and all(r.case_id in w for w in r.warnings) for r in results)  # each missing file names its case
    assert all(r.method == "none" and r.evidence["reason"] for r in results if not r.target)


@pytest.mark.integration
def test_real_fix_errors_read_their_code_files(shared_data: Path) -> None:
    from retrieval_pipeline.core.datasets.api_index import load_ranked_targets
    from retrieval_pipeline.core.datasets.suite.reader import load_suite

    adk = shared_data / "adk"
    lookup = CorpusLookup.from_documents(load_ranked_targets(adk / "ranked_targets" / "v1.24.1" / "ranked_targets.yaml").documents)
    suite = load_suite(adk / "benchmark_definitions" / "fix_errors" / "benchmark.yaml", files_root=adk)  # as the README says
    assert len(suite.cases) == 23 and all(set(c.files) == {"fixed", "test", "unfixed"} for c in suite.cases)  # 69 files
    records = [TargetRecord.from_evidence(AstTargetInferer().infer(case, lookup).evidence) for case in suite.cases]
    assert all(r is not None and r.source == "code:fixed" and r.file_problems == [] for r in records)  # every fixed.py parses
    assert all(r is not None and r.target is not None and lookup.kind(r.target) == "class" for r in records)
    by_case = {r.case_id.split(":")[-1]: r.target for r in records if r is not None}
    # read by hand in the fixed files: the returned root object
    assert by_case["04_sequential_agent"] == SEQ and by_case["12_app_with_plugin"] == APP
    assert by_case["08_custom_agent"] == BASE and by_case["01_minimal_llm_agent"] == LLM
