"""``kind: code_lexical``: identifiers in queries, the name and FQN features, the prior, and the kind through the factory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import QueryError
from retrieval_pipeline.core.retrieval.engines.identifiers import (
    CodeLexicalRetriever,
    FeatureWeights,
    NameIndex,
    name_words,
    prior_values,
    query_identifiers,
)
from retrieval_pipeline.core.retrieval.kinds.bm25 import BM25Spec
from retrieval_pipeline.core.retrieval.kinds.code_lexical import PRIOR_FILE, CodeLexicalSpec
from retrieval_pipeline.core.retrieval.kinds.hybrid import HybridSpec
from retrieval_pipeline_tests.core.retrieval import kit
from retrieval_pipeline_tests.core.retrieval.kit import StubBase, parse_as, registry_of


def api(fqn: str, text: str = "", aliases: Sequence[str] = ()) -> Document:
    """An API document as the ADK corpus has them: the FQN as id, the name as title."""
    name = fqn.rsplit(".", 1)[-1]
    return Document(fqn, f"{name}\n{fqn}\n{text}", title=name, kind="class", aliases=list(aliases))


DOCS = [
    api("pkg.agents.loop_agent.LoopAgent", "An agent that runs its sub agents in a loop."),
    api("pkg.agents.loop_agent.LoopAgentConfig", "The config of a loop agent."),
    api("pkg.agents.loop_agent.LoopAgent.run_async", "Runs the loop."),
    api("pkg.agents.llm_agent.LlmAgent", "An agent backed by a model.", aliases=["pkg.agents.LlmAgent"]),
    api("pkg.agents.llm_agent.LlmAgent.run_async", "Runs the model agent."),
    api("pkg.agents.base_agent.BaseAgent", "The base of every agent; runs nothing itself."),
    api("pkg.runners.Runner", "Runs an agent in a loop of events."),
]


def ranked(retriever: CodeLexicalRetriever, query: str, k: int = 10) -> list[str]:
    (answer,) = retriever.search([query], k)
    assert not isinstance(answer, QueryError)
    return [doc for doc, _ in answer]


# ----------------------------------------------------------------------------- identifiers in queries


def test_identifiers_are_backticked_dotted_snake_or_camel_and_plain_words_are_prose() -> None:
    idents = query_identifiers("Which `run` of `LlmAgent.run_async()` uses max_iterations, os.path.join and LoopAgent here?")
    assert [i.text for i in idents] == ["run", "LlmAgent.run_async", "max_iterations", "os.path.join", "LoopAgent"]
    assert idents[1].components == ("llmagent", "run_async")
    assert idents[1].words == {"llm", "agent", "run", "async"}
    assert query_identifiers("Which class runs agents in order?") == []


def test_an_identifier_named_twice_counts_once() -> None:
    assert [i.text for i in query_identifiers("`LoopAgent` or LoopAgent or `loopagent`?")] == ["LoopAgent"]


def test_name_words_split_dots_snake_and_camel() -> None:
    assert name_words("HTTPServer.serve_forever") == {"http", "server", "serve", "forever"}


# ----------------------------------------------------------------------------- features and ranking


def test_exact_name_beats_part_match() -> None:
    retriever = CodeLexicalRetriever("cl", StubBase({}), DOCS)
    top = ranked(retriever, "What limits a `LoopAgent`?")
    assert top[0] == "pkg.agents.loop_agent.LoopAgent"
    assert top.index("pkg.agents.loop_agent.LoopAgentConfig") > 0  # shares both words, not the name


def test_dotted_path_suffix_match_picks_the_member_of_the_named_class() -> None:
    retriever = CodeLexicalRetriever("cl", StubBase({}), DOCS)
    assert ranked(retriever, "What does `LlmAgent.run_async` yield?")[0] == "pkg.agents.llm_agent.LlmAgent.run_async"
    assert ranked(retriever, "What does `LoopAgent.run_async` yield?")[0] == "pkg.agents.loop_agent.LoopAgent.run_async"


def test_suffix_components_match_in_order_through_aliases_and_skipped_modules() -> None:
    index = NameIndex(DOCS)
    (ident,) = query_identifiers("`pkg.agents.LlmAgent`")
    suffix = index.features(ident)["suffix"]
    assert np.flatnonzero(suffix).tolist() == [3]
    (reordered,) = query_identifiers("`LlmAgent.agents`")
    assert not index.features(reordered)["suffix"].any()


def test_component_feature_marks_members_of_the_named_class() -> None:
    (ident,) = query_identifiers("`LoopAgent`")
    component = NameIndex(DOCS).features(ident)["component"]
    assert np.flatnonzero(component).tolist() == [2]


def test_a_query_without_identifiers_keeps_the_base_order() -> None:
    base = StubBase({"how do agents loop": [("pkg.runners.Runner", 3.0), ("pkg.agents.loop_agent.LoopAgent", 2.0)]})
    retriever = CodeLexicalRetriever("cl", base, DOCS)
    assert ranked(retriever, "how do agents loop") == ["pkg.runners.Runner", "pkg.agents.loop_agent.LoopAgent"]


def test_text_score_breaks_ties_between_equal_names() -> None:
    base = StubBase({"`run_async` of the model": [("pkg.agents.llm_agent.LlmAgent.run_async", 5.0), ("pkg.runners.Runner", 1.0)]})
    retriever = CodeLexicalRetriever("cl", base, DOCS)
    assert ranked(retriever, "`run_async` of the model")[:2] == [
        "pkg.agents.llm_agent.LlmAgent.run_async",
        "pkg.agents.loop_agent.LoopAgent.run_async",
    ]


def test_query_errors_of_the_base_pass_through() -> None:
    error = QueryError("boom")
    retriever = CodeLexicalRetriever("cl", StubBase({"q": error}), DOCS)
    assert retriever.search(["q"], 5) == [error]
    assert retriever.search(["q"], 0) == [[]]
    assert retriever.search([], 5) == []


# ----------------------------------------------------------------------------- the prior


def test_prior_is_log_scaled_to_the_largest_and_missing_ids_get_zero() -> None:
    values = prior_values(["a", "b", "c"], {"a": 0.0, "b": 9.0, "c": 99.0})
    assert values[0] == 0.0 and values[2] == 1.0 and 0.0 < values[1] < 1.0
    assert prior_values(["a"], {}).tolist() == [0.0]


def test_prior_is_off_by_default_and_breaks_ties_when_on() -> None:
    query = "`run_async`"
    assert FeatureWeights().prior == 0.0
    prior = np.zeros(len(DOCS))
    prior[4] = 1.0  # LlmAgent.run_async is the more used one
    without = CodeLexicalRetriever("cl", StubBase({}), DOCS, prior=prior)
    assert ranked(without, query)[0] == "pkg.agents.loop_agent.LoopAgent.run_async"  # corpus order
    with_prior = CodeLexicalRetriever("cl", StubBase({}), DOCS, FeatureWeights(prior=0.1), prior=prior)
    assert ranked(with_prior, query)[0] == "pkg.agents.llm_agent.LlmAgent.run_async"


# ----------------------------------------------------------------------------- the kind


def bm25_code() -> BM25Spec:
    return parse_as(BM25Spec, "bm25_code", {"kind": "bm25", "tokenizer": "code", "fields": {"text": 1, "title": 2, "doc_id": 1}})


def test_spec_defaults_settings_and_components() -> None:
    spec = parse_as(CodeLexicalSpec, "cl", {"kind": "code_lexical", "base": "bm25_code"})
    assert spec.components() == ["bm25_code"]
    assert spec.prior is None and spec.feature_weights() == FeatureWeights()
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        CodeLexicalSpec(base="bm25_code", weights={"exact": -1})
    with pytest.raises(ValidationError, match="Extra inputs"):
        CodeLexicalSpec(base="bm25_code", weights={"exactly": 1})


def test_built_through_the_factory_over_bm25_code(tmp_path: Path) -> None:
    spec = parse_as(CodeLexicalSpec, "cl", {"kind": "code_lexical", "base": "bm25_code"})
    registry = registry_of(bm25_code(), spec, root=tmp_path)
    params = kit.build_all(registry, "cl", tmp_path, docs=DOCS)
    assert params["prior_docs"] == 0 and not (tmp_path / "indexes" / "cl" / PRIOR_FILE).exists()
    retriever = kit.load_from(registry, "cl", tmp_path, docs=DOCS)
    (hits,) = retriever.search(["Which parameter limits the iterations of a `LoopAgent`?"], 3)
    assert not isinstance(hits, QueryError)
    assert hits[0][0] == "pkg.agents.loop_agent.LoopAgent"


def test_prior_file_is_read_at_build_and_stored(tmp_path: Path) -> None:
    prior_file = tmp_path / "ranked.yaml"
    prior_file.write_text(
        "- {id: pkg.agents.llm_agent.LlmAgent.run_async, usage_score: 40}\n- {id: elsewhere, usage_score: 99}\n- {id: x}\n",
        encoding="utf-8",
    )
    prior = {"path": str(prior_file), "weight": 0.1}
    raw = {"kind": "code_lexical", "base": "bm25_code", "weights": {"text": 0}, "prior": prior}
    spec = parse_as(CodeLexicalSpec, "cl_prior", raw)
    registry = registry_of(bm25_code(), spec, root=tmp_path)
    assert kit.build_all(registry, "cl_prior", tmp_path, docs=DOCS)["prior_docs"] == 1
    retriever = kit.load_from(registry, "cl_prior", tmp_path, docs=DOCS)
    (hits,) = retriever.search(["`run_async`"], 2)
    assert not isinstance(hits, QueryError)
    assert hits[0][0] == "pkg.agents.llm_agent.LlmAgent.run_async"


def test_a_three_component_hybrid_fuses_code_lexical(tmp_path: Path) -> None:
    bm25 = parse_as(BM25Spec, "bm25", {"kind": "bm25"})
    spec = parse_as(CodeLexicalSpec, "cl", {"kind": "code_lexical", "base": "bm25_code"})
    raw = {"kind": "hybrid", "method": "minmax", "retrievers": ["cl", "bm25_code", "bm25"], "weights": [0.5, 0.3, 0.2]}
    hybrid = parse_as(HybridSpec, "h3", raw)
    registry = registry_of(bm25, bm25_code(), spec, hybrid, root=tmp_path)
    kit.build_all(registry, "h3", tmp_path, docs=DOCS)
    (hits,) = kit.load_from(registry, "h3", tmp_path, docs=DOCS).search(["What does `LlmAgent.run_async` yield?"], 3)
    assert not isinstance(hits, QueryError)
    assert hits[0][0] == "pkg.agents.llm_agent.LlmAgent.run_async"
