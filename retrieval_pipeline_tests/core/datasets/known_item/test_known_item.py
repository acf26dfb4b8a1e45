"""The ``known_item`` dataset kind: registry block, corpus with gold sentences removed, cases and pairs.

The corpus is two small stdlib modules introspected by the real child process into a temp cache.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.datasets import adapter_for, adapter_of_kind
from retrieval_pipeline.core.datasets import inputs as dataset_inputs
from retrieval_pipeline.core.datasets.api_index import introspect_modules, package_modules
from retrieval_pipeline.core.datasets.known_item.adapter import KNOWN_ITEM_TYPE, KnownItemAdapter, KnownItemSource, known_item_pair
from retrieval_pipeline.core.datasets.known_item.queries import nested_subsets
from retrieval_pipeline.core.datasets.sentences import collapse
from retrieval_pipeline.core.pairs.build import build_pairs
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, DatasetConfig, load_registry

N_QUERIES = 6


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("known_item_cache")


def _config(cache_dir: Path, **block: object) -> DatasetConfig:
    settings = {
        "include": ["json", "textwrap"],
        "min_documents": 10,
        "n_queries": N_QUERIES,
        "seed": 3,
        "cache_dir": str(cache_dir),
        **block,
    }
    return DatasetConfig(name="ki_small", kind="known_item", retrievers=["bm25"], known_item=settings)


def test_the_kind_is_registered_with_its_block() -> None:
    adapter = adapter_of_kind("known_item")
    assert isinstance(adapter, KnownItemAdapter) and set(adapter.blocks) == {"known_item"}
    bare = DatasetConfig(name="d", kind="known_item", retrievers=["bm25"])  # the block is optional: every key has a default
    assert adapter.metadata(bare) == {"known_item/n_queries": 2000, "known_item/seed": 13, "known_item/min_words": 6}
    defaults = KnownItemSource()
    assert (defaults.n_queries, defaults.min_words, defaults.min_documents, defaults.include) == (2000, 6, 100_000, [])


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"n_queries": 0}, "known_item.n_queries"),
        ({"min_wrods": 3}, "known_item.min_wrods"),
        ({"min_documents": -1}, "known_item.min_documents"),
    ],
)
def test_bad_settings_name_the_key(tmp_path: Path, block: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        _config(tmp_path, **block)


def test_corpus_cases_and_pairs(cache_dir: Path) -> None:
    config = _config(cache_dir)
    assert config.input_paths() == [] and config.missing_inputs() == []
    corpus = dataset_inputs.build_corpus(config)
    loaded = dataset_inputs.load_cases(config)
    assert len(loaded.cases) == loaded.total == N_QUERIES and loaded.rejects == []
    assert loaded.report["known_item/sampled"] == N_QUERIES and loaded.report["known_item/candidates"] > N_QUERIES

    texts = {d.doc_id: d.text for d in corpus.documents}
    assert corpus.report["documents"] == len(texts) and corpus.report["known_item/sampled"] == N_QUERIES
    for case in loaded.cases:
        gold = case.extra["gold_doc_id"]
        assert case.benchmark_type == KNOWN_ITEM_TYPE and case.suite == "ki_small" and case.case_id == f"ki:{gold}"
        assert case.query not in collapse(texts[gold]), "the corpus asset holds the gold's text without its sentence"
        assert gold.split(".")[0] in {"json", "textwrap"} and len(case.query.split()) >= 6

    pairs = build_pairs(
        loaded.cases,
        CorpusLookup.from_documents(corpus.documents),
        AstTargetInferer(),
        adapter_for(config).pair_builder(config, corpus.documents),
    )
    assert [(p.query_id, p.gold_doc_ids, p.status) for p in pairs] == [
        (c.case_id, [c.extra["gold_doc_id"]], "resolved") for c in loaded.cases
    ]


def test_queries_come_from_the_golds_docstrings_and_from_no_other_document(cache_dir: Path) -> None:
    """Checked against the objects themselves (``inspect.getdoc``), not against the corpus' own texts."""
    original = {
        d.doc_id: collapse(d.text).casefold()
        for d in introspect_modules([*package_modules("json"), *package_modules("textwrap")]).documents
    }
    for case in dataset_inputs.load_cases(_config(cache_dir)).cases:
        gold = case.extra["gold_doc_id"]
        assert case.query in collapse(inspect.getdoc(_object(gold)) or "")
        assert [d for d, text in original.items() if case.query.casefold() in text] == [gold]


def _object(doc_id: str) -> object:
    """The object an id names: the longest importable module prefix, then attributes."""
    parts = doc_id.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise LookupError(doc_id)


def test_another_seed_draws_other_queries(cache_dir: Path) -> None:
    first = [c.case_id for c in dataset_inputs.load_cases(_config(cache_dir)).cases]
    assert first == [c.case_id for c in dataset_inputs.load_cases(_config(cache_dir)).cases]
    assert first != [c.case_id for c in dataset_inputs.load_cases(_config(cache_dir, seed=4)).cases]


def test_too_many_queries_names_the_dataset(cache_dir: Path) -> None:
    with pytest.raises(InputError, match=r"dataset 'ki_small': only \d+ documents are usable known items, n_queries=5,000"):
        dataset_inputs.load_cases(_config(cache_dir, n_queries=5000))


def test_a_gold_missing_from_the_corpus_is_unresolved() -> None:
    case = Case("ki:x.y", "s", KNOWN_ITEM_TYPE, "introspection:x.y", 0, "Do the thing to the other thing.", extra={"gold_doc_id": "x.y"})
    pair = known_item_pair(case, {"x.z"})
    assert (pair.gold_doc_ids, pair.status) == ([], "unresolved") and "'x.y' is not in the corpus" in pair.warnings[0]
    assert known_item_pair(case, {"x.y"}).gold_doc_ids == ["x.y"]


def test_the_project_registry_holds_the_scale_dataset() -> None:
    config = load_registry(DEFAULT_REGISTRY_PATH).get("installed_packages")
    assert config.kind == "known_item" and config.retrievers == ["bm25", "dense_minilm", "hybrid_rrf_k60"]
    assert config.filter.judge == "none" and config.known_item.n_queries == 2000 and config.known_item.min_documents == 100_000
    assert config.missing_inputs() == []


def test_max_documents_keeps_the_benchmarks_subset_with_the_golds_of_its_queries(cache_dir: Path) -> None:
    whole = _config(cache_dir)
    part = _config(cache_dir, max_documents=60, gold_share=0.05)  # 3 of the queries; their golds stay in the 60
    all_docs = dataset_inputs.build_corpus(whole).documents
    docs, cases = dataset_inputs.build_corpus(part).documents, dataset_inputs.load_cases(part).cases
    assert len(docs) == 60 and len(cases) == 3
    ids = [d.doc_id for d in docs]
    assert {c.extra["gold_doc_id"] for c in cases} <= set(ids)
    assert ids == [d.doc_id for d in all_docs if d.doc_id in set(ids)]  # corpus order kept
    # exactly the documents benchmarks/scale.py evaluates at this size (its nested, seeded subsets)
    golds = [(c.case_id, c.extra["gold_doc_id"]) for c in dataset_inputs.load_cases(whole).cases]
    subset = nested_subsets([d.doc_id for d in all_docs], golds, [30, 60], seed=3, gold_share=0.05)[0]
    assert [all_docs[i].doc_id for i in subset[60].positions] == ids
    assert set(ids) >= {all_docs[i].doc_id for i in subset[30].positions}  # nested
    assert dataset_inputs.build_corpus(_config(cache_dir, max_documents=10_000_000)).documents == all_docs


def test_an_id_with_whitespace_is_a_reject_and_so_is_its_query(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Introspection found ``DgApiList[dict[str, Any]]``: a TREC file cannot hold that id, so it is rejected, with its query."""
    from retrieval_pipeline.core.common.types import Document
    from retrieval_pipeline.core.datasets.known_item import adapter as known_item
    from retrieval_pipeline.core.datasets.known_item.corpus import InstalledCorpus
    from retrieval_pipeline.core.datasets.known_item.queries import KnownItemQuery, KnownItemSet

    bad = "pkg.mod.DgApiList[dict[str, Any]]"
    docs = [Document(i, f"text of {i}", i, module="pkg.mod") for i in ("pkg.mod.a", bad, "pkg.mod.b")]
    queries = [KnownItemQuery("ki:pkg.mod.a", "what a does", "pkg.mod.a", 1), KnownItemQuery(f"ki:{bad}", "what the list does", bad, 1)]
    report = {"by_package": {}, "by_kind": {}, "wall_s_by_package": {}, "packages": 1, "cache_file": "x.parquet"}
    built = (InstalledCorpus(docs, [], report), KnownItemSet(queries, docs, {"sampled": 2}))
    monkeypatch.setattr(known_item, "_build", lambda config: built)
    config = _config(tmp_path)
    corpus, cases = known_item.KnownItemAdapter().build_corpus(config), known_item.KnownItemAdapter().load_cases(config)
    assert [d.doc_id for d in corpus.documents] == ["pkg.mod.a", "pkg.mod.b"]
    assert [(r.case_id, "whitespace" in r.reason) for r in corpus.rejects] == [(bad, True)]
    assert [c.case_id for c in cases.cases] == ["ki:pkg.mod.a"] and [r.case_id for r in cases.rejects] == [f"ki:{bad}"]
    assert cases.total == len(cases.cases) + len(cases.rejects) == 2
    assert bad in cases.rejects[0].reason and "TREC" in cases.rejects[0].reason


def test_the_corpus_and_cases_steps_share_one_build_per_process(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval_pipeline.core.datasets.known_item import adapter as known_item

    calls: list[object] = []
    real = known_item.build_installed_corpus
    monkeypatch.setattr(known_item, "build_installed_corpus", lambda *a, **k: calls.append(a) or real(*a, **k))
    monkeypatch.setattr(known_item, "_LAST_BUILD", {})
    config = _config(cache_dir, seed=5)
    first = dataset_inputs.build_corpus(config).documents
    cases = dataset_inputs.load_cases(config).cases
    assert len(calls) == 1 and len(cases) == N_QUERIES and first
    dataset_inputs.load_cases(_config(cache_dir, seed=6))  # other settings: built again
    assert len(calls) == 2
