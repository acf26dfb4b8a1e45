"""Suite golds, against the mutants ``benchmarks/mutation.py`` found alive in the suite qrels path
(:mod:`retrieval_pipeline.core.pairs.build` and the gold reading of :mod:`retrieval_pipeline.core.datasets.suite.reader`).

What the older tests left open: every field of the pairs (not only ids and statuses), the method names,
the batch inferer seam, the default grades, and the shapes of ``answers`` the gold reader skips.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Case, Document, QAPair
from retrieval_pipeline.core.datasets.suite.reader import gold_fqns_of, load_suite
from retrieval_pipeline.core.pairs.build import _api_pair, build_pairs
from retrieval_pipeline.core.pairs.fix_targets import TargetInference
from retrieval_pipeline.core.pairs.gold import CorpusLookup

DOCS = [
    Document("json.dumps", "Serialize obj.", kind="function", module="json"),
    Document("json.JSONDecoder", "Decoder.", kind="class", module="json", aliases=["json.decoder.JSONDecoder"]),
]
LOOKUP = CorpusLookup(DOCS)


def _case(case_id: str, benchmark_type: str, **kw) -> Case:
    return Case(case_id, "suite_a", benchmark_type, "suite_a/benchmark.yaml", 3, f"question {case_id}", **kw)


class FakeInferer:
    """Names a target per case id; ``infer`` only (no batch)."""

    name = "fake"

    def __init__(self, targets: dict[str, str | None]) -> None:
        self.targets = targets

    def infer(self, case: Case, lookup: CorpusLookup) -> TargetInference:
        target = self.targets[case.case_id]
        return TargetInference(case.case_id, target, "description" if target else "none", {"seen": case.case_id}, [f"note {case.case_id}"])


class BatchInferer(FakeInferer):
    """Answers every case in one call; asking it per case is a failure."""

    name = "batch"

    def __init__(self, targets: dict[str, str | None]) -> None:
        super().__init__(targets)
        self.batches: list[list[str]] = []

    def infer_all(self, cases: list[Case], lookup: CorpusLookup) -> list[TargetInference]:
        self.batches.append([c.case_id for c in cases])
        return [FakeInferer.infer(self, c, lookup) for c in cases]

    def infer(self, case: Case, lookup: CorpusLookup) -> TargetInference:
        raise AssertionError("a batch inferer must be asked once for all cases")


def test_api_pair_lists_methods_golds_and_warnings_exactly():
    cases = [
        _case("api:two", "api_understanding", gold_fqns=["json.dumps", "json.decoder.JSONDecoder", "json.dumps"]),
        _case("api:none", "api_understanding", gold_fqns=["json.nothing"]),
    ]
    resolved, unresolved = build_pairs(cases, LOOKUP, FakeInferer({}))
    assert (resolved.query_id, resolved.suite, resolved.benchmark_type, resolved.source_file, resolved.query) == (
        "api:two",
        "suite_a",
        "api_understanding",
        "suite_a/benchmark.yaml",
        "question api:two",
    )
    assert (resolved.gold_doc_ids, resolved.status, resolved.method, resolved.warnings) == (
        ["json.dumps", "json.JSONDecoder"],
        "resolved",
        "alias+exact",
        [],
    )
    assert [r["method"] for r in resolved.evidence["resolutions"]] == ["exact", "alias", "exact"]
    assert (unresolved.gold_doc_ids, unresolved.status, unresolved.method) == ([], "unresolved", "none")
    assert unresolved.warnings == [
        "gold 'json.nothing' of case 'api:none' (suite_a/benchmark.yaml) is not in the corpus: no id, alias or suffix match"
    ]


def test_api_pair_resolves_against_the_lookup_without_batch_resolutions():
    pair = _api_pair(_case("api:one", "api_understanding", gold_fqns=["json.dumps"]), LOOKUP, {})
    assert (pair.gold_doc_ids, pair.status, pair.method) == (["json.dumps"], "resolved", "exact")


def test_fix_pairs_carry_the_inference_whole():
    cases = [_case("fix:found", "fix_error"), _case("fix:lost", "fix_error")]
    found, lost = build_pairs(cases, LOOKUP, FakeInferer({"fix:found": "json.dumps", "fix:lost": None}))
    assert found == QAPair(
        "fix:found",
        "suite_a",
        "fix_error",
        "suite_a/benchmark.yaml",
        "question fix:found",
        ["json.dumps"],
        "resolved",
        "fake:description",
        {"seen": "fix:found"},
        ["note fix:found"],
    )
    assert (lost.gold_doc_ids, lost.status, lost.method, lost.warnings) == ([], "unresolved", "fake:none", ["note fix:lost"])


def test_a_batch_inferer_is_asked_once_for_every_fix_case():
    inferer = BatchInferer({"fix:1": "json.dumps", "fix:2": "json.JSONDecoder"})
    cases = [_case("fix:1", "fix_error"), _case("api", "api_understanding", gold_fqns=["json.dumps"]), _case("fix:2", "fix_error")]
    pairs = build_pairs(cases, LOOKUP, inferer)
    assert inferer.batches == [["fix:1", "fix:2"]]
    assert [p.gold_doc_ids for p in pairs] == [["json.dumps"], ["json.dumps"], ["json.JSONDecoder"]]
    assert [p.method for p in pairs] == ["batch:description", "exact", "batch:description"]


def test_multiple_choice_is_routed_to_the_verifier_as_a_whole_pair():
    (pair,) = build_pairs([_case("mc", "multiple_choice")], LOOKUP, FakeInferer({}))
    assert pair == QAPair(
        "mc",
        "suite_a",
        "multiple_choice",
        "suite_a/benchmark.yaml",
        "question mc",
        [],
        "not_retrieval",
        "none",
        {"routed_to": "question verifier"},
    )


def test_grades_default_to_one_per_gold():
    assert QAPair("q", "s", "t", "f", "?", ["a", "b"], "resolved", "m").grades() == [1, 1]
    assert QAPair("q", "s", "t", "f", "?", ["a", "b"], "resolved", "m", gold_grades=[3, 2]).grades() == [3, 2]
    assert QAPair("q", "s", "t", "f", "?", [], "unresolved", "m").grades() == []


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (None, []),
        ({"fully_qualified_class_name": "a.b"}, []),  # not a list of answers
        (["a.b", {"fully_qualified_class_name": "c.d"}], ["c.d"]),  # a bare string is not an answer
        ([{"fully_qualified_class_name": [5, " x.y ", None, "x.y", ""]}], ["x.y"]),
        ([{"fully_qualified_class_name": 7}, {"answer": "no fqn"}], []),
    ],
)
def test_gold_fqns_skip_what_is_not_a_name(answers, expected):
    assert gold_fqns_of(answers) == expected


def test_api_case_without_gold_is_rejected_with_the_exact_reason(tmp_path: Path):
    folder = tmp_path / "suite_a"
    folder.mkdir()
    path = folder / "benchmark.yaml"
    rows = """
        benchmarks:
          - id: api:empty
            benchmark_type: api_understanding
            question: Which class?
            answers: [{answer: none}]
    """
    path.write_text(textwrap.dedent(rows), encoding="utf-8")
    (reject,) = load_suite(path).rejects
    assert reject.reason == f"file {path}, case 'api:empty' (index 0): no gold FQN in 'answers[].fully_qualified_class_name'"
