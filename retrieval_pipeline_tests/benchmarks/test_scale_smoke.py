"""``benchmarks/scale.py``: its pure parts (nested subsets, growth, the 1 % change) and a smoke run on a tiny fake corpus.

The smoke run goes through the script's own ``main`` with the project's retriever registry (bm25,
dense_minilm, hybrid_rrf_k60), the keyword fake encoder in place of the model and the steps run in this
process instead of child processes; it checks the table's figures exist at both sizes and that the 1 %
change re-embeds exactly the changed documents.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder

VOCABULARY = [f"w{i}" for i in range(40)]


@pytest.fixture(scope="module")
def scale(load_benchmark) -> ModuleType:
    return load_benchmark("scale.py")


def fake_corpus(scale: ModuleType, n_docs: int = 600, n_queries: int = 40) -> Any:
    """Documents of random keywords; each query is four words of its gold document."""
    rng = np.random.default_rng(0)
    documents = [Document(f"d{i}", " ".join(rng.choice(VOCABULARY, size=12))) for i in range(n_docs)]
    golds = rng.choice(n_docs, size=n_queries, replace=False)
    queries = [(f"ki:d{g}", " ".join(documents[g].text.split()[:4]), f"d{g}") for g in golds]
    return scale.Corpus(documents, queries, f"{n_docs} fake documents")


def test_subsets_are_nested_seeded_and_hold_their_golds(scale: ModuleType) -> None:
    doc_ids = [f"d{i}" for i in range(1000)]
    golds = [(f"q{i}", f"d{i * 7}") for i in range(100)]
    subsets, order = scale.nested_subsets(doc_ids, golds, [100, 300, 1000], seed=3, gold_share=0.05)
    again, _ = scale.nested_subsets(doc_ids, golds, [100, 300, 1000], seed=3, gold_share=0.05)
    assert subsets == again
    assert sorted(order) == sorted(q for q, _ in golds)
    gold_of = dict(golds)
    for size, subset in subsets.items():
        assert len(subset.positions) == len(set(subset.positions)) == size
        assert subset.positions == sorted(subset.positions)  # corpus order kept
        assert len(subset.query_ids) == min(100, round(size * 0.05))  # 5, 15, 50
        held = {doc_ids[i] for i in subset.positions}
        assert all(gold_of[q] in held for q in subset.query_ids)
    assert set(subsets[100].positions) < set(subsets[300].positions) < set(subsets[1000].positions)
    assert set(subsets[100].query_ids) < set(subsets[300].query_ids)
    assert subsets[300].query_ids == order[:15]
    other, _ = scale.nested_subsets(doc_ids, golds, [100], seed=4, gold_share=0.05)
    assert other[100] != subsets[100]


def test_subsets_refuse_bad_sizes_and_unknown_golds(scale: ModuleType) -> None:
    with pytest.raises(ValueError, match="outside 1..10"):
        scale.nested_subsets([f"d{i}" for i in range(10)], [], [11], seed=0, gold_share=0.1)
    with pytest.raises(ValueError, match="not in the corpus"):
        scale.nested_subsets(["d0"], [("q", "nope")], [1], seed=0, gold_share=0.1)


def test_growth_is_the_ratio_of_consecutive_sizes(scale: ModuleType) -> None:
    assert scale.growth({10: 2.0, 30: 5.0, 100: 20.0}) == {"30/10": 2.5, "100/30": 4.0}
    assert scale.growth({10: "flat", 30: 0, 100: 3}) == {"30/10": None, "100/30": None}


def test_changed_documents_marks_the_share_and_keeps_the_rest(scale: ModuleType) -> None:
    documents = [Document(f"d{i}", f"text {i}") for i in range(250)]
    changed, ids = scale.changed_documents(documents, 0.01, seed=1, marker="[x]")
    assert len(ids) == 3  # ceil(2.5)
    assert [d.doc_id for d in changed] == [d.doc_id for d in documents]
    assert {d.doc_id for d in changed if d.text.endswith("\n[x]")} == set(ids)
    assert sum(a.text != b.text for a, b in zip(changed, documents)) == 3


def test_percentiles_match_numpy(scale: ModuleType) -> None:
    latency = {str(i): float(v) for i, v in enumerate([5, 1, 3, 9, 7])}
    assert scale.percentiles(latency) == (5.0, pytest.approx(8.6))


def test_plan_stops_dense_where_the_embedding_budget_ends(scale: ModuleType) -> None:
    subsets = {s: scale.Subset(s, list(range(s)), []) for s in (100, 300, 1000)}
    plan = scale.plan_dense([100, 300, 1000], subsets, lambda sub: sub.size, rate=10.0, budget_s=40.0)
    assert plan.dense_sizes == [100, 300] and plan.recall_size == 300
    assert "stop at 300 documents" in plan.note and "1,000" in plan.note
    assert scale.plan_dense([100, 1000], subsets, lambda sub: sub.size, rate=None, budget_s=1.0).note == ""


def test_smoke_run_on_a_fake_corpus(scale: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    encoder = KeywordEncoder(VOCABULARY)
    encoders = {"torch": encoder, "onnx_int8": encoder}

    def step(root: Path, name: str) -> dict[str, Any]:
        return scale.run_step(root, name, lambda spec: encoder, lambda spec: encoders)

    argv = [
        "--sizes",
        "200",
        "400",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
        str(tmp_path / "scale.json"),
        "--latency-queries",
        "20",
    ]
    argv += ["--gold-share", "0.05", "--throughput-docs", "50", "--rounds", "1", "--keep", str(tmp_path / "work")]
    report = scale.main(argv, corpus=fake_corpus(scale), in_process=step)

    results = report["results"]
    assert sorted(results) == [200, 400]
    for size, figures in results.items():
        assert figures["documents"] == size
        assert figures["queries"] == size // 20
        assert figures["latency_queries"] == 20
        assert figures["dense_index"] == "IndexFlatIP"
        assert figures["change_docs"] == size // 100
        assert figures["change_reembedded"] == figures["change_docs"]  # only the changed texts
        for key in ("bm25_build_s", "bm25_p95_ms", "dense_p95_ms", "hybrid_p95_ms", "peak_rss_mb"):
            assert figures[key] > 0
        assert 0 <= figures["bm25_hit10"] <= 1 and 0 <= figures["hybrid_mrr"] <= 1
    assert results[200]["dense_vectors"] == "embedded now" and results[200]["dense_embedded_now"] == 200
    assert results[400]["dense_from_cache"] == 200  # nested: the smaller subset's vectors are reused
    assert results[400]["recall"]["n_docs"] == 400 and 0 <= results[400]["recall"]["recall_at_k"] <= 1
    assert "recall" not in results[200]
    assert set(report["throughput"]) == {"torch", "onnx_int8"}
    out = capsys.readouterr().out
    for label in ("BM25 P95 latency (ms)", "dense P95 latency, query encoding incl. (ms)", "1% change: texts re-embedded", "x 400/200"):
        assert label in out
    assert "1% change at 400: re-embedded 4 of 4 changed: OK" in out
    assert (tmp_path / "scale.json").is_file()

    argv = argv[:-2] + ["--keep", str(tmp_path / "work2"), "--dense-max-docs", "300"]
    again = scale.main(argv, corpus=fake_corpus(scale), in_process=step)
    assert again["results"][200]["dense_vectors"] == "read back"  # a second invocation reuses the cache
    assert again["results"][200]["change_reembedded"] == 2  # a fresh marker: the changed texts are new again
    assert sorted(again["results"]) == [200, 300, 400]  # the dense cap is one more nested subset
    assert "dense_p95_ms" not in again["results"][400] and again["results"][400]["bm25_p95_ms"] > 0
    assert again["results"][300]["recall"]["n_docs"] == 300  # the largest dense size
    assert "dense figures stop at 300 documents" in capsys.readouterr().out
