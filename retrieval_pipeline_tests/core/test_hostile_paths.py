"""A path a suite names must resolve inside its root; outside files are never read or sent to an LLM."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.common.paths import PathRefused, resolve_inside
from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.datasets.suite.loading import load_suites
from retrieval_pipeline.core.datasets.suite.reader import SuiteLoad, load_suite
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.pairs.llm_targets import LLMTargetInferer
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline_tests.fakes.openai_server import FakeOpenAIServer

SECRET = "TOP-SECRET-7f3a9c-never-leaves-the-disk"
SECRET_CODE = f"from pkg.agents import LoopAgent\nroot_agent = LoopAgent()  # {SECRET}\n"
LEGIT_CODE = "from pkg.agents import SequentialAgent\nroot_agent = SequentialAgent()\n"
DOCS = [
    Document("pkg.agents.SequentialAgent", "runs agents in order", kind="class", module="pkg.agents"),
    Document("pkg.agents.LoopAgent", "runs an agent repeatedly", kind="class", module="pkg.agents"),
]
GOOD_ROW = {
    "id": "api:ok",
    "benchmark_type": "api_understanding",
    "question": "Which?",
    "answers": [{"fully_qualified_class_name": "pkg.agents.LoopAgent"}],
}


@pytest.fixture()
def tree(tmp_path: Path) -> dict[str, Path]:
    """``outside/secret.py`` (the file to protect), ``suite/`` (the suite folder) and ``repo/`` (a configured root)."""
    outside, suite, repo = tmp_path / "outside", tmp_path / "suite", tmp_path / "repo"
    for folder in (outside, suite / "cases", repo / "cases", repo / "defs"):
        folder.mkdir(parents=True)
    (outside / "secret.py").write_text(SECRET_CODE)
    (suite / "cases" / "fixed.py").write_text(LEGIT_CODE)
    (repo / "cases" / "fixed.py").write_text(LEGIT_CODE)
    (suite / "link.py").symlink_to(outside / "secret.py")  # a symlink inside the suite folder, pointing out
    (suite / "linked_dir").symlink_to(outside, target_is_directory=True)  # a folder symlink, pointing out
    (suite / "inner_link.py").symlink_to(suite / "cases" / "fixed.py")  # a symlink that stays inside
    return {"outside": outside, "suite": suite, "repo": repo, "secret": outside / "secret.py"}


def write_suite(folder: Path, fixed_file: str) -> Path:
    """A suite with one good api row and one fix_error row naming ``fixed_file`` (JSON is YAML)."""
    row = {"id": "fix:hostile", "benchmark_type": "fix_error", "description": "Build the agent.", "fixed_file": fixed_file}
    path = folder / "benchmark.yaml"
    path.write_text(json.dumps({"benchmarks": [GOOD_ROW, row]}))
    return path


def assert_counts(load: SuiteLoad) -> None:
    assert load.total == 2 and len(load.cases) + len(load.rejects) == load.total


def assert_no_secret(*things: Any) -> None:
    """No trace of the outside file's content in anything (cases, rejects, inferences, prompts)."""
    for thing in things:
        text = json.dumps(thing, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o))
        assert SECRET not in text


REFUSED = {  # name -> (fixed_file given the tree, the words the reason must hold)
    "dotdot_etc_passwd": (lambda t: "../../../../etc/passwd", "resolves to"),
    "dotdot_to_secret": (lambda t: "../outside/secret.py", "resolves to"),
    "absolute_etc_passwd": (lambda t: "/etc/passwd", "is an absolute path"),
    "absolute_secret": (lambda t: str(t["secret"]), "is an absolute path"),
    "symlink_file_out": (lambda t: "link.py", "goes through a symlink"),
    "symlink_dir_out": (lambda t: "linked_dir/secret.py", "goes through a symlink"),
    "dotdot_back_in_then_out": (lambda t: "cases/../../outside/secret.py", "resolves to"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_path_leaving_the_suite_folder_rejects_the_case_naming_file_and_case(tree: dict[str, Path], name: str) -> None:
    given, how = REFUSED[name]
    fixed_file = given(tree)
    path = write_suite(tree["suite"], fixed_file)
    load = load_suite(path)
    assert_counts(load)
    assert [c.case_id for c in load.cases] == ["api:ok"] and len(load.rejects) == 1
    reject = load.rejects[0]
    assert reject.case_id == "fix:hostile" and reject.source_file == str(path)
    for words in (str(path), "'fix:hostile'", "fixed_file", repr(fixed_file), how, "outside the allowed root", "not read"):
        assert words in reject.reason, (words, reject.reason)
    assert_no_secret(load.cases, load.rejects)


@pytest.mark.parametrize("fixed_file", ["cases/fixed.py", "./cases/../cases/fixed.py", "inner_link.py"])
def test_a_path_inside_the_suite_folder_is_accepted(tree: dict[str, Path], fixed_file: str) -> None:
    load = load_suite(write_suite(tree["suite"], fixed_file))
    assert_counts(load)
    assert load.rejects == [] and load.cases[1].files == {"fixed": str(tree["suite"] / "cases" / "fixed.py")}


def test_a_missing_file_inside_the_root_is_a_warning_not_a_reject(tree: dict[str, Path]) -> None:
    load = load_suite(write_suite(tree["suite"], "cases/nope.py"))
    assert_counts(load)
    assert load.rejects == [] and load.cases[1].extra["missing_files"][0]["path"] == str(tree["suite"] / "cases" / "nope.py")


def test_paths_resolve_against_the_configured_root_and_stay_inside_it(tree: dict[str, Path]) -> None:
    """A dataset's ``suite_files_root`` (ADK: the repository root) is where paths resolve, and their bound."""
    defs = tree["repo"] / "defs"
    good = write_suite(defs, "cases/fixed.py")
    load = load_suites([good], files_root=tree["repo"])
    assert load.rejects == [] and load.cases[1].files == {"fixed": str(tree["repo"] / "cases" / "fixed.py")}
    (defs / "benchmark.yaml").unlink()
    bad = write_suite(defs, "../outside/secret.py")
    load = load_suites([bad], files_root=tree["repo"])
    assert len(load.cases) + len(load.rejects) == load.total == 2
    assert "outside the allowed root" in load.rejects[0].reason and str(tree["repo"]) in load.rejects[0].reason
    assert_no_secret(load.cases, load.rejects)


def fake_llm_infer(case: Case, answer: str = "LoopAgent") -> tuple[Any, Any, list[list[dict[str, Any]]]]:
    """Run the LLM inferer (AST reconciled) on ``case`` against a fake endpoint; return both results and the prompts."""
    prompts: list[list[dict[str, Any]]] = []

    def reply(messages: list[dict[str, Any]]) -> str:
        prompts.append(messages)
        return json.dumps({"primary_class": answer, "rationale": "r"})

    lookup = CorpusLookup.from_documents(DOCS)
    with FakeOpenAIServer(reply) as server, LLMClient(LLMSettings(base_url=server.base_url, model=server.model)) as client:
        llm_result = LLMTargetInferer(client, AstTargetInferer()).infer(case, lookup)
    return AstTargetInferer().infer(case, lookup), llm_result, prompts


def test_the_prompt_carries_a_legit_solution_file(tree: dict[str, Path]) -> None:
    """The control: a file inside the root is read and sent, so the fake does see file content."""
    case = load_suite(write_suite(tree["suite"], "cases/fixed.py")).cases[1]
    ast_result, llm_result, prompts = fake_llm_infer(case, "SequentialAgent")
    assert "root_agent = SequentialAgent()" in json.dumps(prompts)
    assert ast_result.target == llm_result.target == "pkg.agents.SequentialAgent"


def test_a_symlink_swapped_in_after_loading_is_not_read_nor_sent(tree: dict[str, Path]) -> None:
    """Cases pass through storage between loading and target inference: the reader refuses symlinks itself."""
    legit = tree["suite"] / "cases" / "fixed.py"
    case = load_suite(write_suite(tree["suite"], "cases/fixed.py")).cases[1]
    legit.unlink()
    legit.symlink_to(tree["secret"])  # the attacker's swap, after the check
    ast_result, llm_result, prompts = fake_llm_infer(case)
    assert prompts and all(SECRET not in json.dumps(p) for p in prompts)
    assert any("symlink" in w and "fix:hostile" in w and str(legit) in w for w in ast_result.warnings)
    assert ast_result.method != "ast" and ast_result.evidence.get("source") != "file"  # nothing was read
    assert_no_secret(case, ast_result, llm_result)


def test_a_fifo_or_device_named_by_a_case_is_refused_without_blocking(tree: dict[str, Path]) -> None:
    fifo = tree["suite"] / "cases" / "pipe.py"
    os.mkfifo(fifo)
    case = Case("fix:fifo", "s", "fix_error", "f.yaml", 0, "Create a `LoopAgent`.", files={"fixed": str(fifo), "test": "/dev/zero"})
    started = time.monotonic()
    ast_result, _, prompts = fake_llm_infer(case)
    assert time.monotonic() - started < 10
    assert sum("not a regular file" in w for w in ast_result.warnings) == 2
    assert "Solution code" not in json.dumps(prompts)


def test_resolve_inside_refuses_empty_and_nul_paths(tmp_path: Path) -> None:
    for bad in ("", "  ", "a\0b"):
        with pytest.raises(PathRefused, match="not a usable path"):
            resolve_inside(tmp_path, bad, "fixed_file")
    assert resolve_inside(tmp_path, "a/b.py", "fixed_file") == tmp_path.resolve() / "a" / "b.py"


@pytest.mark.integration
def test_real_adk_fix_errors_resolve_against_the_repository_root(shared_data: Path) -> None:
    """The ADK YAML's paths are relative to the source repository root (``adk/``), the root a registry names."""
    adk = shared_data / "adk"
    load = load_suites([adk / "benchmark_definitions" / "fix_errors" / "benchmark.yaml"], files_root=adk)
    assert load.rejects == [] and load.total == len(load.cases) > 0
    assert all(set(c.files) == {"fixed", "test", "unfixed"} and not c.extra.get("missing_files") for c in load.cases)
    assert all(Path(p).is_relative_to(adk.resolve()) for c in load.cases for p in c.files.values())
