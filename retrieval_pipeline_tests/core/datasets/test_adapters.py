"""Dataset kinds behind one protocol: every kind is an adapter, and a new kind is one module.

The toy ``jsonl`` kind below is defined and registered here, in the test, and goes through the
registry, ``dataset_inputs`` and pair building without any other file knowing about it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from pydantic import ValidationError

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.frames import to_frame
from retrieval_pipeline.core.common.types import Case, Document, QAPair, Rejected
from retrieval_pipeline.core.datasets import (
    CASE_JSON_FIELDS,
    Block,
    CasesBuild,
    CorpusBuild,
    DatasetAdapter,
    PairBuilder,
    SettingsBlock,
    adapter_for,
    adapter_of_kind,
    adapters,
    gold_pair,
    register_adapter,
    unregister_adapter,
)
from retrieval_pipeline.core.datasets import inputs as dataset_inputs
from retrieval_pipeline.core.datasets.context_qa.metrics import context_qa_metrics
from retrieval_pipeline.core.datasets.nq.adapter import nq_pair
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
from retrieval_pipeline.core.pairs.build import build_pairs
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, DatasetConfig, load_registry

BUILT_IN_KINDS = {"suite", "nq", "context_qa", "beir", "known_item"}


# --------------------------------------------------------------------------------------------------
# The toy kind: one JSONL file of documents and queries (a query lists its relevant document ids)
# --------------------------------------------------------------------------------------------------


class JsonlSource(SettingsBlock):
    path: Path


class JsonlAdapter(DatasetAdapter):
    kind = "jsonl"
    blocks = {"jsonl": Block(JsonlSource, path_keys=("path",))}

    def load_cases(self, config: DatasetConfig) -> CasesBuild:
        path = config.jsonl.path
        queries = [(i, r) for i, r in enumerate(_rows(path)) if r["type"] == "query"]
        cases = [
            Case(r["id"], "toy", "jsonl", str(path), i, r["text"], extra={"relevant": r["relevant"]}) for i, r in queries if r.get("text")
        ]
        rejects = [Rejected(str(path), r["id"], i, "empty text") for i, r in queries if not r.get("text")]
        return CasesBuild(cases, rejects, len(queries))

    def build_corpus(self, config: DatasetConfig) -> CorpusBuild:
        documents = [Document(r["id"], r["text"]) for r in _rows(config.jsonl.path) if r["type"] == "doc"]
        return CorpusBuild(documents, [], {"documents": len(documents)}, str(config.jsonl.path))

    def pair_builder(self, config: DatasetConfig, documents: Sequence[Document]) -> PairBuilder:
        known = {d.doc_id for d in documents}

        def pair(case: Case) -> QAPair:
            gold = [d for d in case.extra["relevant"] if d in known]
            return gold_pair(case, gold, "jsonl:relevant", {})

        return pair


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def jsonl_kind() -> Iterator[type[JsonlAdapter]]:
    register_adapter(JsonlAdapter)
    yield JsonlAdapter
    unregister_adapter("jsonl")


def toy_registry(tmp_path: Path, entry: str) -> Path:
    rows = [
        {"type": "doc", "id": "d1", "text": "json dumps serialises"},
        {"type": "doc", "id": "d2", "text": "csv reader"},
        {"type": "query", "id": "q1", "text": "how to serialise json", "relevant": ["d1"]},
        {"type": "query", "id": "q2", "text": "read a csv", "relevant": ["d2", "gone"]},
        {"type": "query", "id": "q3", "text": "", "relevant": []},
    ]
    (tmp_path / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = tmp_path / "datasets.yaml"
    path.write_text(f"datasets:\n  toy:\n    retrievers: [bm25]\n{entry}", encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------
# Every kind is an adapter
# --------------------------------------------------------------------------------------------------


def test_every_registered_kind_has_its_adapter():
    registered = adapters()
    assert BUILT_IN_KINDS <= set(registered)
    for kind, adapter in registered.items():
        assert isinstance(adapter, DatasetAdapter) and adapter.kind == kind and adapter.blocks
    blocks = [b for a in registered.values() for b in a.blocks]
    assert len(blocks) == len(set(blocks)), "a block belongs to one kind"
    assert not set(blocks) & set(DatasetConfig.model_fields), "a block is not also a generic setting"


def test_every_project_dataset_kind_has_an_adapter():
    doc = yaml.safe_load(DEFAULT_REGISTRY_PATH.read_text(encoding="utf-8"))
    kinds = {(raw or {}).get("kind", "suite") for raw in doc["datasets"].values()}
    assert kinds == BUILT_IN_KINDS
    assert all(adapter_of_kind(k).kind == k for k in kinds)


def test_kind_blocks_are_attributes_and_paths_come_from_the_adapter(tmp_path):
    config = DatasetConfig(name="x", kind="context_qa", context_qa={"qa": str(tmp_path / "qa.json"), "documents": [str(tmp_path / "a.md")]})
    assert config.context_qa.similarity.settings().threshold == 0.5 and config.context_qa.chunking.size == 400
    assert config.input_paths() == [tmp_path / "qa.json", tmp_path / "a.md"]
    suite = DatasetConfig(name="s", suites=["a.yaml"], corpus={"introspect_modules": ["json"]})
    assert suite.kind == "suite" and suite.corpus.modules() == ["json"] and suite.input_paths() == [Path("a.yaml")]


def test_block_errors_name_the_block_and_field():
    with pytest.raises(ValidationError, match=r"nq\.sample_size"):
        DatasetConfig(name="x", kind="nq", nq={"csv": "a.csv", "sample_size": 0})


def test_each_kind_says_how_its_cases_are_paired():
    documents = [Document("d1", "text")]
    suite = DatasetConfig(name="s", suites=["a.yaml"], corpus={"introspect_modules": ["json"]})
    assert adapter_for(suite).pair_builder(suite, documents) is None  # suite cases: gold resolution and target inference
    nq = DatasetConfig(name="n", kind="nq", nq={"csv": "a.csv"})
    assert adapter_for(nq).pair_builder(nq, documents) is nq_pair
    case = Case("q1", "toy", "jsonl", "toy.jsonl", 0, "question")
    with pytest.raises(ValueError, match="'jsonl' case: its dataset kind's pair builder is needed"):
        build_pairs([case], CorpusLookup.from_documents(documents), AstTargetInferer())


def test_context_qa_adds_query_columns_and_similarity_metadata():
    config = DatasetConfig(name="c", kind="context_qa", context_qa={"qa": "qa.json", "pydoc_topics": ["*"]})
    adapter = adapter_for(config)
    cases = [Case("q1", "qa", "context_qa", "qa.json", 0, "what is a loop", extra={"expected_context": "a for loop repeats"})]
    chunks = [Document("c1", "a for loop repeats a block"), Document("c2", "the import statement")]
    columns = adapter.extra_query_columns(config, to_frame(cases, Case, CASE_JSON_FIELDS), to_frame(chunks, Document), per_query_metrics)
    run, qrels = {"q1": [("c2", 2.0), ("c1", 1.0)]}, {"q1": {"c1": 1}}
    frame = columns(run, qrels)
    settings = config.context_qa.similarity.settings()
    full = context_qa_metrics(run, qrels, {"q1": "a for loop repeats"}, {c.doc_id: c for c in chunks}, settings, ranking=per_query_metrics)
    assert "context_coverage@5" in frame.columns and "ndcg@10" not in frame.columns
    pd.testing.assert_frame_equal(frame, full[list(frame.columns)])  # the context columns, as context_qa_metrics gives them
    assert adapter.metadata(config) == {"similarity_settings": {"threshold": 0.5, "autojunk": False, "normalise": True}}
    nq = DatasetConfig(name="n", kind="nq", nq={"csv": "a.csv"})
    assert adapter_for(nq).extra_query_columns(nq, None, None, per_query_metrics) is None and adapter_for(nq).metadata(nq) == {}


def test_context_qa_pairs_report_the_relevance_ceiling():
    config = DatasetConfig(name="c", kind="context_qa", context_qa={"qa": "qa.json", "pydoc_topics": ["*"]})
    pairs = [
        QAPair("q1", "qa", "context_qa", "f", "q", ["c1", "c2"], "resolved", "m", evidence={"answer_outside_gold": ["c3"]}),
        QAPair("q2", "qa", "context_qa", "f", "q", [], "unresolved", "m"),
    ]
    assert adapter_for(config).pairs_report(pairs) == {
        "context_pairs": 2,
        "contexts_matched": 1,
        "relevance_ceiling": 0.5,
        "relevant_chunks_per_pair": 1.0,
        "answer_outside_gold": 1,
    }


# --------------------------------------------------------------------------------------------------
# A new kind is one module: the toy kind through the registry, dataset_inputs and pairs
# --------------------------------------------------------------------------------------------------


def test_a_new_kind_works_end_to_end_without_touching_other_files(tmp_path, jsonl_kind):
    path = toy_registry(tmp_path, "    kind: jsonl\n    jsonl: {path: toy.jsonl}\n")
    config = load_registry(path, root=tmp_path).get("toy")
    assert isinstance(adapter_for(config), jsonl_kind)
    assert config.jsonl.path == (tmp_path / "toy.jsonl").resolve()  # resolved against the root: the adapter's path key
    assert config.input_paths() == [(tmp_path / "toy.jsonl").resolve()] and config.missing_inputs() == []

    loaded = dataset_inputs.load_cases(config)
    assert [c.case_id for c in loaded.cases] == ["q1", "q2"] and [r.case_id for r in loaded.rejects] == ["q3"] and loaded.total == 3
    corpus = dataset_inputs.build_corpus(config)
    assert [d.doc_id for d in corpus.documents] == ["d1", "d2"] and corpus.source == str(config.jsonl.path)

    adapter = adapter_for(config)
    pairs = build_pairs(
        loaded.cases, CorpusLookup.from_documents(corpus.documents), AstTargetInferer(), adapter.pair_builder(config, corpus.documents)
    )
    assert [(p.query_id, p.gold_doc_ids, p.status) for p in pairs] == [("q1", ["d1"], "resolved"), ("q2", ["d2"], "resolved")]
    assert (
        adapter.extra_query_columns(config, None, None, per_query_metrics) is None
        and adapter.metadata(config) == {}
        and adapter.pairs_report(pairs) == {}
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("    kind: jsonl\n", "kind 'jsonl' needs ['jsonl']; missing ['jsonl']"),
        ("    kind: jsonl\n    jsonl: {path: toy.jsonl}\n    nq: {csv: a.csv}\n", "not allowed: ['nq']"),
        ("    kind: nq\n    nq: {csv: a.csv}\n    jsonl: {path: toy.jsonl}\n", "not allowed: ['jsonl']"),
        ("    kind: jsonl\n    jsonl: {path: toy.jsonl, extra: 1}\n", "jsonl.extra"),
        ("    kind: jsonl\n    jsonl: {}\n", "jsonl.path: Field required"),
        ("    kind: jsonl\n    jsnol: {path: toy.jsonl}\n", "unknown settings ['jsnol']"),
        ("    kind: jsonll\n", "unknown dataset kind 'jsonll'; known: beir, context_qa, jsonl, known_item, nq, suite"),
    ],
)
def test_the_registry_validates_a_new_kinds_blocks(tmp_path, jsonl_kind, entry, message):
    path = toy_registry(tmp_path, entry)
    with pytest.raises(InputError) as err:
        load_registry(path, root=tmp_path).get("toy")
    assert message in str(err.value) and str(path) in str(err.value)


def test_registering_is_checked_and_reversible(jsonl_kind):
    class Clash(DatasetAdapter):
        kind = "clash"
        blocks = {"jsonl": Block(JsonlSource)}

        def load_cases(self, config: DatasetConfig) -> CasesBuild:
            raise NotImplementedError

        def build_corpus(self, config: DatasetConfig) -> CorpusBuild:
            raise NotImplementedError

    with pytest.raises(ValueError, match="blocks already owned by other kinds"):
        register_adapter(Clash)
    assert "clash" not in adapters()
    unregister_adapter("jsonl")
    with pytest.raises(ValueError, match="unknown dataset kind 'jsonl'"):
        adapter_of_kind("jsonl")
