"""The retriever registry, factory and contract checks, on tiny corpora (no model)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import QueryError, RetrieverError
from retrieval_pipeline.core.retrieval.factory import CheckedRetriever, load_retriever_specs
from retrieval_pipeline.core.retrieval.runner import build_retriever, run_retriever
from retrieval_pipeline.core.retrieval.spec import PARAMS_FILE
from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder

DOCS = [
    Document("json.dumps", "json.dumps serialize obj to a JSON formatted string", title="dumps"),
    Document("json.loads", "json.loads parse a JSON document into a Python object", title="loads"),
    Document("csv.DictReader", "csv.DictReader read rows of a CSV file as dictionaries", title="DictReader"),
    Document("os.path.join", "os.path.join join path components", title="join"),
]
QUERIES = {"q1": "serialize to JSON string", "q2": "read CSV rows as dictionaries", "q3": "os.path.join"}


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "retrievers.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def keyword(spec: object) -> KeywordEncoder:
    return KeywordEncoder(["json", "csv", "path", "rows", "string", "parse"])


REGISTRY = """
retrievers:
  bm25: {kind: bm25}
  bm25_code: {kind: bm25, tokenizer: code, fields: {text: 1, doc_id: 2}}
  fused: {kind: hybrid, method: rrf, k: 60, retrievers: [bm25, bm25_code]}
  weighted: {kind: hybrid, method: minmax, retrievers: [bm25, bm25_code], weights: [0.7, 0.3]}
  plugin: {kind: python, factory: "examples.retriever_plugin.tfidf:TfidfRetriever", params: {char_ngrams: 3}}
"""


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("x: {kind: bm42}", "unknown kind 'bm42'; known kinds: bm25"),
        ("x: {kind: bm25, k_1: 1.2}", "k_1: Extra inputs are not permitted"),
        ("x: {kind: bm25, b: 7}", "b: Input should be less than or equal to 1"),
        ("x: {kind: bm25, tokenizer: fancy}", "tokenizer: Input should be 'default' or 'code'"),
        ("x: {kind: hybrid, retrievers: [bm25, nope]}", "its component(s) ['nope'] are not valid retrievers"),
        ("x: {kind: hybrid, method: rrf, retrievers: [bm25, bm25], weights: [1, 1]}", "retrievers lists a name twice"),
        ("x: {kind: python, factory: no_colon_here}", "must look like package.module:factory"),
        ("'../x': {kind: bm25}", "must match"),
    ],
)
def test_a_bad_entry_is_reported_by_name_and_the_others_still_load(tmp_path: Path, entry: str, message: str) -> None:
    registry = load_retriever_specs(write(tmp_path, f"retrievers:\n  bm25: {{kind: bm25}}\n  {entry}\n"))
    assert "bm25" in registry.specs
    bad = [n for n in registry.errors]
    assert len(bad) == 1 and message in registry.errors[bad[0]]
    with pytest.raises(RetrieverError, match=f"retriever '{bad[0]}' is invalid"):
        registry.get(bad[0])
    assert "input_value" not in registry.errors[bad[0]]  # short: never renders the whole input


def test_cycles_are_refused_with_the_path(tmp_path: Path) -> None:
    registry = load_retriever_specs(
        write(
            tmp_path,
            """
        retrievers:
          a: {kind: hybrid, retrievers: [b, c]}
          b: {kind: hybrid, retrievers: [a, c]}
          c: {kind: bm25}
    """,
        )
    )
    with pytest.raises(RetrieverError, match="a -> b -> a"):
        registry.closure(["a"])


def test_build_and_run_every_local_kind_components_first(tmp_path: Path) -> None:
    registry = load_retriever_specs(write(tmp_path, REGISTRY))
    assert registry.closure(["fused", "plugin"]) == ["bm25", "bm25_code", "fused", "plugin"]
    root = tmp_path / "indexes"
    for name in registry.closure(["fused", "weighted", "plugin"]):
        params = build_retriever(registry, "toy", name, DOCS, root, tmp_path / "cache", keyword)
        assert params["retriever"] == name and params["corpus_sha256"] and params["versions"]["python"]
        assert json.loads((root / name / PARAMS_FILE).read_text())["spec"] == registry.get(name).settings()
    for name in ("bm25", "bm25_code", "fused", "weighted", "plugin"):
        run = run_retriever(registry, "toy", name, DOCS, QUERIES, root, tmp_path / "cache", keyword, depth=3, latency_sample=2)
        assert run.timed.retriever == name and set(run.timed.run) == set(QUERIES) and len(run.timed.latency_ms) == 2
        assert run.timed.run["q2"][0][0] == "csv.DictReader", name
    code = run_retriever(registry, "toy", "bm25_code", DOCS, {"q": "os.path.join"}, root, tmp_path / "cache", keyword, 3, 0)
    assert code.timed.run["q"][0][0] == "os.path.join"


def test_an_index_is_checked_against_its_spec_and_corpus(tmp_path: Path) -> None:
    registry = load_retriever_specs(write(tmp_path, REGISTRY))
    root = tmp_path / "indexes"
    with pytest.raises(RetrieverError, match=r"materialise `retrievers/bm25_index` for this dataset first"):
        run_retriever(registry, "toy", "bm25", DOCS, QUERIES, root, tmp_path, keyword, 3, 0)
    build_retriever(registry, "toy", "bm25", DOCS, root, tmp_path, keyword)
    with pytest.raises(RetrieverError, match="built for another corpus"):
        run_retriever(registry, "toy", "bm25", DOCS[:2], QUERIES, root, tmp_path, keyword, 3, 0)
    reworded = load_retriever_specs(write(tmp_path, "retrievers:\n  bm25: {kind: bm25, description: reworded}\n"))
    assert run_retriever(reworded, "toy", "bm25", DOCS, QUERIES, root, tmp_path, keyword, 3, 0).timed.run  # a description is no setting
    changed = load_retriever_specs(write(tmp_path, "retrievers:\n  bm25: {kind: bm25, k1: 0.9}\n"))
    with pytest.raises(RetrieverError, match="built with other settings"):
        run_retriever(changed, "toy", "bm25", DOCS, QUERIES, root, tmp_path, keyword, 3, 0)


def test_a_failed_build_keeps_the_previous_index(tmp_path: Path) -> None:
    registry = load_retriever_specs(write(tmp_path, REGISTRY))
    root = tmp_path / "indexes"
    build_retriever(registry, "toy", "bm25", DOCS, root, tmp_path, keyword)
    before = sorted(p.name for p in (root / "bm25").iterdir())
    empty = [Document("a", "the a of")]  # only stopwords: BM25 has nothing to index
    with pytest.raises(RetrieverError, match=r"retriever 'bm25' \(bm25\) failed to build for dataset 'toy'.*no tokens"):
        build_retriever(registry, "toy", "bm25", empty, root, tmp_path, keyword)
    assert sorted(p.name for p in (root / "bm25").iterdir()) == before
    assert [p.name for p in root.iterdir()] == ["bm25"]  # no staging folder left behind


class Scripted:
    """A retriever that answers whatever it is told to, to break the contract on purpose."""

    name = "scripted"

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def search(self, queries: list[str], k: int) -> object:
        if isinstance(self.answer, Exception):
            raise self.answer
        return [self.answer for _ in queries]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([("a", 0.1), ("b", 0.9)], "not sorted by score descending"),
        ([("a", 0.9), ("a", 0.5)], "duplicate hits ['a']"),
        ([("zzz", 0.9)], "doc ids not in the corpus: ['zzz']"),
        ([("a", 0.9), ("b", 0.8), ("c", 0.7)], "returned 3 hits for k=2"),
        ([("a", float("nan"))], "not finite"),
        ([("a", "high")], "is not a number"),
        ("a", "expected a list of (doc_id, score)"),
        (ValueError("boom"), "raised on dataset 'toy': ValueError: boom"),
    ],
)
def test_contract_violations_name_the_retriever_and_the_dataset(answer: object, message: str) -> None:
    checked = CheckedRetriever(Scripted(answer), "mine", "toy", frozenset("abc"))
    with pytest.raises(RetrieverError, match="retriever 'mine'") as err:
        checked.search(["q"], 2)
    assert message in str(err.value) and "toy" in str(err.value)


def test_a_query_error_is_kept_with_the_query_and_counts_as_not_found() -> None:
    from retrieval_pipeline.core.retrieval.run_loop import batched_run, frame_to_runs, runs_to_frame

    class Flaky:
        name = "flaky"

        def search(self, queries: list[str], k: int) -> list[object]:
            return [QueryError("timed out after 0.2 s") if "slow" in q else [("a", 1.0)] for q in queries]

    checked = CheckedRetriever(Flaky(), "flaky", "toy", frozenset("ab"))
    timed = batched_run(checked, {"q1": "fast", "q2": "slow one"}, k=5, latency_sample=2)
    assert timed.run == {"q1": [("a", 1.0)], "q2": []} and timed.errors == {"q2": "timed out after 0.2 s"}
    back = frame_to_runs(runs_to_frame([timed]))["flaky"]
    assert back.errors == timed.errors and back.run == timed.run


def test_a_hybrid_does_not_hide_a_failed_input() -> None:
    from retrieval_pipeline.core.retrieval.engines.fusion import HybridRetriever

    class Flaky:
        name = "service"

        def search(self, queries: list[str], k: int) -> list[object]:
            return [QueryError("503 after 3 attempts") if q == "bad" else [("a", 2.0), ("b", 1.0)] for q in queries]

    class Steady:
        name = "bm25"

        def search(self, queries: list[str], k: int) -> list[object]:
            return [[("b", 5.0), ("c", 1.0)] for _ in queries]

    good, bad = HybridRetriever("h", [Flaky(), Steady()], "rrf").search(["ok", "bad"], 3)
    assert [d for d, _ in good] == ["b", "a", "c"]
    assert isinstance(bad, QueryError) and bad.message == "input service failed: 503 after 3 attempts"
