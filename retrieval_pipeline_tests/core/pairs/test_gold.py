"""Tests for resolving gold FQN strings against a corpus."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.pairs.gold import (
    RESOLUTION_METHODS,
    CorpusLookup,
    GoldResolution,
    resolution_counts,
    resolution_shares,
    resolve_case_golds,
    resolve_gold,
    resolve_golds,
)


def doc(doc_id: str, kind: str = "class", aliases: list[str] | None = None) -> Document:
    """A minimal document."""
    return Document(doc_id=doc_id, text=doc_id, title=doc_id.rsplit(".", 1)[-1], kind=kind, aliases=aliases or [])


@pytest.fixture()
def lookup() -> CorpusLookup:
    return CorpusLookup.from_documents(
        [
            doc("google.adk.agents.base_agent.BaseAgent", aliases=["google.adk.agents.BaseAgent"]),
            doc("google.adk.agents.llm_agent.LlmAgent", aliases=["google.adk.agents.llm_agent.Agent"]),
            doc("google.adk.runners.Runner"),
            doc("google.adk.cli.deep.nested.Runner"),
            doc("google.adk.tools.a.Tool"),
            doc("google.adk.tools.b.Tool"),
            doc("google.adk.runners", kind="module"),
        ]
    )


def test_exact(lookup: CorpusLookup) -> None:
    result = resolve_gold("google.adk.runners.Runner", lookup)
    assert (result.doc_id, result.method, result.candidates) == ("google.adk.runners.Runner", "exact", [])


def test_alias(lookup: CorpusLookup) -> None:
    result = resolve_gold("google.adk.agents.BaseAgent", lookup)
    assert (result.doc_id, result.method) == ("google.adk.agents.base_agent.BaseAgent", "alias")


def test_alias_with_a_different_final_name(lookup: CorpusLookup) -> None:
    result = resolve_gold("google.adk.agents.llm_agent.Agent", lookup)
    assert (result.doc_id, result.method) == ("google.adk.agents.llm_agent.LlmAgent", "alias")


def test_suffix_prefers_closest_and_lists_others(lookup: CorpusLookup) -> None:
    result = resolve_gold("google.adk.Runner", lookup)
    assert (result.doc_id, result.method) == ("google.adk.runners.Runner", "suffix")
    assert result.candidates == ["google.adk.cli.deep.nested.Runner"]
    assert "suffix" in result.note


def test_suffix_requires_the_gold_package_prefix(lookup: CorpusLookup) -> None:
    result = resolve_gold("other.pkg.Runner", lookup)
    assert (result.doc_id, result.method, result.candidates) == (None, "unresolved", [])


def test_suffix_ambiguity_is_unresolved_with_candidates(lookup: CorpusLookup) -> None:
    result = resolve_gold("google.adk.tools.Tool", lookup)
    assert (result.doc_id, result.method) == (None, "unresolved")
    assert result.candidates == ["google.adk.tools.a.Tool", "google.adk.tools.b.Tool"]
    assert "ambiguous" in result.note


def test_alias_claimed_twice_is_unresolved() -> None:
    lookup = CorpusLookup.from_documents([doc("a.x.C", aliases=["a.C"]), doc("a.y.C", aliases=["a.C"])])
    result = resolve_gold("a.C", lookup)
    assert (result.doc_id, result.method, result.candidates) == (None, "unresolved", ["a.x.C", "a.y.C"])


def test_longest_shared_prefix_beats_fewer_components() -> None:
    lookup = CorpusLookup.from_documents([doc("a.b.y.C"), doc("a.b.C.x.C"), doc("a.z.C")])
    result = resolve_gold("a.b.C", lookup)  # a.z.C is outside the gold's package: never a candidate
    assert (result.doc_id, result.method, result.candidates) == ("a.b.C.x.C", "suffix", ["a.b.y.C"])


def test_unresolved(lookup: CorpusLookup) -> None:
    result = resolve_gold("google.adk.Nothing", lookup)
    assert (result.doc_id, result.method) == (None, "unresolved")


def test_by_name_and_lookup_basics(lookup: CorpusLookup) -> None:
    assert lookup.by_name("Runner") == ["google.adk.runners.Runner", "google.adk.cli.deep.nested.Runner"]
    assert lookup.by_name("Agent") == ["google.adk.agents.llm_agent.LlmAgent"]  # via its alias
    assert lookup.by_name("Missing") == []
    assert "google.adk.runners" in lookup and len(lookup) == 7
    assert lookup.kind("google.adk.runners") == "module" and lookup.kind("nope") is None
    assert lookup.aliases("google.adk.agents.base_agent.BaseAgent") == ["google.adk.agents.BaseAgent"]
    assert lookup.aliases("nope") == []


def test_resolve_case_golds_keeps_order(lookup: CorpusLookup) -> None:
    case = Case("c", "s", "api_understanding", "f.yaml", 0, "q?", gold_fqns=["google.adk.Runner", "x.Y"])
    results = resolve_case_golds(case, lookup)
    assert [r.gold for r in results] == ["google.adk.Runner", "x.Y"]
    assert resolution_counts(results) == {"exact": 0, "alias": 0, "suffix": 1, "import": 0, "unresolved": 1}


class FakeImporter:
    """Answers from a table, recording every call (what the library's environment would say)."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def resolve(self, golds, lookup):  # noqa: ANN001, ANN201 - the GoldImporter protocol
        self.calls.append(list(golds))
        return {g: GoldResolution(g, self.answers[g], "import", note=f"resolved by import: {g} is X") for g in golds if g in self.answers}


def test_resolve_golds_asks_the_importer_once_about_the_unresolved_only(lookup: CorpusLookup) -> None:
    importer = FakeImporter({"google.adk.Agent": "google.adk.agents.llm_agent.LlmAgent"})
    golds = ["google.adk.runners.Runner", " google.adk.Agent", "google.adk.Agent", "google.adk.tools.Tool", "google.adk.Runner"]
    resolved = resolve_golds(golds, lookup, importer)
    assert importer.calls == [["google.adk.Agent", "google.adk.tools.Tool"]]  # deduplicated, stripped, one call
    assert {g: r.method for g, r in resolved.items()} == {
        "google.adk.runners.Runner": "exact",
        "google.adk.Agent": "import",
        "google.adk.tools.Tool": "unresolved",  # not answered: keeps the index's resolution and its candidates
        "google.adk.Runner": "suffix",
    }
    assert resolved["google.adk.tools.Tool"].candidates == ["google.adk.tools.a.Tool", "google.adk.tools.b.Tool"]


def test_resolve_golds_without_importer_or_anything_pending_makes_no_call(lookup: CorpusLookup) -> None:
    importer = FakeImporter({})
    assert resolve_golds(["google.adk.runners.Runner"], lookup, importer)["google.adk.runners.Runner"].method == "exact"
    assert importer.calls == []
    assert resolve_golds(["google.adk.Agent"], lookup)["google.adk.Agent"].method == "unresolved"


def test_resolve_case_golds_uses_the_dataset_resolutions_first(lookup: CorpusLookup) -> None:
    case = Case("c", "s", "api_understanding", "f.yaml", 0, "q?", gold_fqns=["google.adk.Agent ", "google.adk.Runner"])
    resolved = resolve_golds(case.gold_fqns, lookup, FakeImporter({"google.adk.Agent": "google.adk.agents.llm_agent.LlmAgent"}))
    results = resolve_case_golds(case, lookup, resolved)
    assert [(r.gold, r.doc_id, r.method) for r in results] == [
        ("google.adk.Agent", "google.adk.agents.llm_agent.LlmAgent", "import"),
        ("google.adk.Runner", "google.adk.runners.Runner", "suffix"),
    ]


def test_resolution_shares_match_pandas_value_counts() -> None:
    methods = ["exact"] * 5 + ["alias"] + ["import"] * 3 + ["unresolved"]
    counts = resolution_counts(GoldResolution("g", None, m) for m in methods)  # type: ignore[arg-type]
    expected = pd.Series(methods).value_counts(normalize=True).reindex(list(RESOLUTION_METHODS), fill_value=0.0)
    assert resolution_shares(counts) == pytest.approx(expected.to_dict())
    assert sum(resolution_shares(counts).values()) == pytest.approx(1.0)
    assert all(math.isnan(v) for v in resolution_shares(dict.fromkeys(RESOLUTION_METHODS, 0)).values())


@pytest.mark.integration
def test_real_api_understanding_golds_resolve_mostly(shared_data: Path) -> None:
    from retrieval_pipeline.core.datasets.api_index import load_ranked_targets
    from retrieval_pipeline.core.datasets.suite.reader import load_suite

    corpus = load_ranked_targets(shared_data / "adk" / "ranked_targets" / "v1.24.1" / "ranked_targets.yaml")
    lookup = CorpusLookup.from_documents(corpus.documents)
    suite = load_suite(shared_data / "adk" / "benchmark_definitions" / "api_understanding" / "benchmark.yaml")
    per_case = [resolve_case_golds(case, lookup) for case in suite.cases]
    counts = resolution_counts(r for results in per_case for r in results)
    total = sum(counts.values())
    assert total == sum(len(c.gold_fqns) for c in suite.cases)
    assert counts["exact"] < total  # README: exact matching alone is not enough...
    assert counts["alias"] > 0 and counts["suffix"] > 0  # ...aliases and suffixes recover more
    assert all(any(r.doc_id for r in results) for results in per_case)  # every case keeps >= 1 gold
    assert all(r.doc_id in lookup for results in per_case for r in results if r.doc_id)
