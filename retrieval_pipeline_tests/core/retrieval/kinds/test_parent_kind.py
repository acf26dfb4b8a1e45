"""``kind: parent``: hits lifted to their enclosing document (a method's hit counts for its class), and the kind through the factory."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import QueryError
from retrieval_pipeline.core.retrieval.engines.parents import ParentRetriever, enclosing_documents
from retrieval_pipeline.core.retrieval.kinds.bm25 import BM25Spec
from retrieval_pipeline.core.retrieval.kinds.parent import ParentSpec
from retrieval_pipeline_tests.core.retrieval import kit
from retrieval_pipeline_tests.core.retrieval.kit import StubBase, parse_as, registry_of


def api(fqn: str, kind: str, text: str = "") -> Document:
    name = fqn.rsplit(".", 1)[-1]
    return Document(fqn, f"{name}\n{fqn}\n{text}", title=name, kind=kind)


DOCS = [
    api("pkg.agents", "module", "Agents."),
    api("pkg.agents.loop_agent", "module", "The loop agent."),
    api("pkg.agents.loop_agent.LoopAgent", "class", "A shell agent that runs its sub-agents in a loop."),
    api("pkg.agents.loop_agent.LoopAgent.run_async", "method", "Entry method to run an agent via text-based conversation."),
    api("pkg.agents.loop_agent.LoopAgent.Config", "class", "Settings of a loop agent."),
    api("pkg.agents.loop_agent.LoopAgent.Config.validate", "method", "Checks the iteration limit."),
    api("pkg.runners.Runner", "class", "Runs an agent in a session."),
    api("pkg.runners.Runner.run_async", "method", "Main entry method to run the agent in this runner."),
    api("pkg.runners.make_runner", "function", "Builds a runner."),
]


def test_a_member_maps_to_its_nearest_enclosing_class_and_others_stay_themselves() -> None:
    parents = enclosing_documents(DOCS, "class")
    assert parents == {
        "pkg.agents.loop_agent.LoopAgent.run_async": "pkg.agents.loop_agent.LoopAgent",
        "pkg.agents.loop_agent.LoopAgent.Config.validate": "pkg.agents.loop_agent.LoopAgent.Config",  # the nearest
        "pkg.runners.Runner.run_async": "pkg.runners.Runner",
    }  # a class (even one inside a class), a module and a module-level function stay themselves
    modules = enclosing_documents(DOCS, "module")
    assert modules["pkg.agents.loop_agent.LoopAgent.run_async"] == "pkg.agents.loop_agent"
    assert "pkg.runners.make_runner" not in modules  # pkg.runners is no document of the corpus
    passages = [Document("home#5", "a chunk", kind="passage"), Document("home#6", "another")]
    assert enclosing_documents(passages, "class") == {}


def test_a_parent_takes_its_best_members_place_and_score_once() -> None:
    base = StubBase(
        {
            "q": [
                ("pkg.runners.Runner.run_async", 0.9),
                ("pkg.agents.loop_agent.LoopAgent", 0.8),
                ("pkg.runners.Runner", 0.7),  # already placed by its method
                ("pkg.agents.loop_agent.LoopAgent.run_async", 0.6),  # already placed itself
                ("pkg.runners.make_runner", 0.5),
            ]
        }
    )
    retriever = ParentRetriever("lifted", base, enclosing_documents(DOCS, "class"), depth=50)
    (hits,) = retriever.search(["q"], 10)
    assert hits == [("pkg.runners.Runner", 0.9), ("pkg.agents.loop_agent.LoopAgent", 0.8), ("pkg.runners.make_runner", 0.5)]
    assert base.asked == [50]  # reads deeper than k: members of one parent take one place
    (top,) = retriever.search(["q"], 2)
    assert [doc for doc, _ in top] == ["pkg.runners.Runner", "pkg.agents.loop_agent.LoopAgent"]


def test_query_errors_pass_through_and_empty_asks_answer_nothing() -> None:
    error = QueryError("timed out")
    retriever = ParentRetriever("lifted", StubBase({"bad": error}), {}, depth=5)
    assert retriever.search(["bad", "unknown"], 3) == [error, []]
    assert retriever.search([], 3) == [] and retriever.search(["bad"], 0) == [[]]
    with pytest.raises(ValueError, match="depth"):
        ParentRetriever("lifted", StubBase({}), {}, depth=0)


def test_spec_defaults_and_bad_settings() -> None:
    spec = parse_as(ParentSpec, "classes", {"kind": "parent", "base": "bm25"})
    assert spec.components() == ["bm25"] and spec.parent_kind == "class" and spec.depth == 100
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        ParentSpec(base="bm25", depth=0)
    with pytest.raises(ValidationError, match="Extra inputs"):
        ParentSpec(base="bm25", to_kind="class")


def test_built_through_the_factory_a_methods_words_find_its_class(tmp_path: Path) -> None:
    bm25 = parse_as(BM25Spec, "bm25", {"kind": "bm25"})
    spec = parse_as(ParentSpec, "bm25_classes", {"kind": "parent", "base": "bm25"})
    registry = registry_of(bm25, spec, root=tmp_path)
    params = kit.build_all(registry, "bm25_classes", tmp_path, docs=DOCS)
    assert params["documents_with_parent"] == 3 and params["parents"] == 3
    query = "Which class has the main entry method to run the agent in this runner?"
    (plain,) = kit.load_from(registry, "bm25", tmp_path, docs=DOCS).search([query], 3)
    (lifted,) = kit.load_from(registry, "bm25_classes", tmp_path, docs=DOCS).search([query], 3)
    assert not isinstance(plain, QueryError) and not isinstance(lifted, QueryError)
    assert plain[0][0] == "pkg.runners.Runner.run_async"  # the method's text matches best
    assert lifted[0] == ("pkg.runners.Runner", plain[0][1])  # and counts for its class, at its score
    assert len({doc for doc, _ in lifted}) == len(lifted)
