"""Index choice by size: flat up to ``flat_max_docs``, HNSW above, and measured recall.

The recall figures come from synthetic vectors shaped like sentence embeddings: a Gaussian mixture
in a 64-dimensional subspace of R^384 plus a little isotropic noise, L2-normalised (real embeddings have
a low intrinsic dimension; isotropic 384-d noise would make every index look bad). ``pytest -s`` prints
the measured recall, build times, latencies and speed-up.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.engines.faiss_index import IndexSettings, RecallReport, approximate_recall, recall_at_k
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs
from retrieval_pipeline.core.retrieval.kinds.dense import DenseSpec
from retrieval_pipeline_tests.core.retrieval.kit import build, fake_model_folder, load, parse_as

DIM = 384
N_DOCS = 10_000
N_QUERIES = 200


def clustered(n: int, seed: int, dim: int = DIM, rank: int = 64, clusters: int = 50, noise: float = 0.05) -> np.ndarray:
    """``n`` unit vectors: cluster centre + Gaussian in a fixed rank-``rank`` subspace + isotropic noise.

    The subspace and the centres depend on nothing but the module constant seed 0, so documents and
    queries (other ``seed``) come from one distribution.
    """
    basis_rng = np.random.default_rng(0)
    basis = basis_rng.standard_normal((rank, dim)).astype(np.float32) / np.sqrt(rank)
    centres = 2.0 * basis_rng.standard_normal((clusters, rank)).astype(np.float32)
    rng = np.random.default_rng(seed)
    latent = centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, rank)).astype(np.float32)
    vectors = latent @ basis + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, np.ndarray]:
    return clustered(N_DOCS, seed=1), clustered(N_QUERIES, seed=2)


@pytest.fixture(scope="module")
def default_report(corpus: tuple[np.ndarray, np.ndarray]) -> RecallReport:
    docs, queries = corpus
    report = approximate_recall(docs, queries, k=10)
    print(f"\n[ann] {N_DOCS} x {DIM} clustered, {N_QUERIES} queries, defaults: {report.as_dict()}")
    return report


# -- measured recall ----------------------------------------------------------------------------


def test_default_hnsw_reaches_recall_095_on_clustered_vectors(default_report: RecallReport) -> None:
    report = default_report
    assert report.approximate == "hnsw" and report.settings == IndexSettings().model_dump()
    assert (report.k, report.n_docs, report.n_queries) == (10, N_DOCS, N_QUERIES)
    assert report.recall_at_k >= 0.95
    assert 0 < report.flat_p50_ms <= report.flat_p95_ms and 0 < report.approximate_p50_ms <= report.approximate_p95_ms
    assert report.speedup == pytest.approx(report.flat_p50_ms / report.approximate_p50_ms)
    assert report.flat_build_seconds > 0 and report.approximate_build_seconds > 0


def test_index_sizes_match_the_faiss_memory_formulas(default_report: RecallReport) -> None:
    """Flat stores n x d float32; HNSW adds at least 2M int32 links per vector at level 0 (FAISS wiki:
    about ``4d + 8M`` bytes per vector)."""
    vectors_bytes = N_DOCS * DIM * 4
    assert vectors_bytes <= default_report.flat_bytes < vectors_bytes + 4096
    per_vector = 4 * DIM + 8 * IndexSettings().hnsw_m
    assert N_DOCS * per_vector <= default_report.approximate_bytes < 1.5 * N_DOCS * per_vector


def test_a_tiny_ef_search_loses_recall(corpus: tuple[np.ndarray, np.ndarray], default_report: RecallReport) -> None:
    docs, queries = corpus
    tiny = approximate_recall(docs, queries, k=10, ef_search=1, hnsw_m=4)
    print(f"\n[ann] ef_search=1, M=4: recall@10 {tiny.recall_at_k:.3f} vs {default_report.recall_at_k:.3f} at the defaults")
    assert tiny.recall_at_k < default_report.recall_at_k - 0.05


def test_recall_at_k_by_hand() -> None:
    truth = np.array([[0, 1, 2], [3, 4, 5], [6, -1, -1]])
    found = np.array([[2, 9, 0], [-1, -1, -1], [6, 7, 8]])
    # row 0: {0, 2} of 3 found; row 1: none of 3; row 2: the only true hit found
    assert recall_at_k(truth, found) == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert recall_at_k(truth, truth) == 1.0


@pytest.mark.parametrize(
    "vectors, queries, k, message",
    [
        (np.zeros(5), np.zeros((1, 5)), 1, "must be 2-D"),
        (np.ones((5, 4)), np.ones((2, 3)), 1, "one dim"),
        (np.ones((5, 4)), np.ones((2, 4)), 6, "k=6"),
        (np.ones((5, 4)), np.ones((0, 4)), 1, ">= 1 query"),
    ],
)
def test_approximate_recall_refuses_bad_shapes(vectors: np.ndarray, queries: np.ndarray, k: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        approximate_recall(vectors, queries, k=k)


# -- index choice in the retriever ----------------------------------------------------------------


class TableEncoder:
    """A fake encoder that looks each text up in a table of fixed vectors (``"doc 17"`` -> row 17)."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.dim = int(vectors.shape[1])
        self.model_id = "table-fake/v1"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.vectors[[int(t.split()[-1]) for t in texts]]


QUERIES = [f"doc {i}" for i in range(150, 170)]  # rows past every corpus below: unseen vectors


def table(n: int) -> tuple[list[str], list[str], TableEncoder]:
    """``n <= 150`` documents ``"doc i"`` over clustered 32-d vectors, and an encoder for them and :data:`QUERIES`."""
    vectors = clustered(170, seed=3, dim=32, rank=8)
    return [f"d{i}" for i in range(n)], [f"doc {i}" for i in range(n)], TableEncoder(vectors)


def test_flat_up_to_flat_max_docs_and_hnsw_above() -> None:
    doc_ids, texts, encoder = table(150)
    at_limit = DenseRetriever("dense_t", index={"flat_max_docs": 150}).build(doc_ids, texts, encoder)
    above = DenseRetriever("dense_t", index={"flat_max_docs": 149, "ef_search": 200}).build(doc_ids, texts, encoder)
    assert (at_limit.index_type, above.index_type) == ("IndexFlatIP", "IndexHNSWFlat")
    assert above.faiss_index.hnsw.efSearch == 200 and above.faiss_index.hnsw.efConstruction == 200
    # efSearch above the corpus size visits every vector: the graph finds exactly what flat finds
    graph, flat = above.search(QUERIES, 10), at_limit.search(QUERIES, 10)
    assert [[d for d, _ in hits] for hits in graph] == [[d for d, _ in hits] for hits in flat]
    # the same inner products, summed in another order by the two index kinds: equal to float32 precision
    assert [[s for _, s in hits] for hits in graph] == [[pytest.approx(s, abs=1e-6) for _, s in hits] for hits in flat]
    stats = above.build_stats
    assert stats is not None and stats.index_bytes > 150 * 32 * 4 and stats.seconds >= stats.index_seconds > 0


def test_default_settings_keep_small_corpora_flat() -> None:
    doc_ids, texts, encoder = table(150)
    assert DenseRetriever("dense_t").build(doc_ids, texts, encoder).index_type == "IndexFlatIP"


def test_params_record_the_index_and_load_restores_ef_search(tmp_path: Path) -> None:
    doc_ids, texts, encoder = table(150)
    built = DenseRetriever("dense_t", index={"flat_max_docs": 10, "hnsw_m": 8, "ef_search": 40}).build(doc_ids, texts, encoder)
    built.save(tmp_path / "idx")
    params_path = tmp_path / "idx" / "params.json"
    params = json.loads(params_path.read_text())
    assert params["index_type"] == "IndexHNSWFlat"
    assert params["index"] == {
        "kind": "hnsw",
        "exact": False,
        "settings": {"flat_max_docs": 10, "approximate": "hnsw", "hnsw_m": 8, "ef_construction": 200, "ef_search": 40},
        "hnsw_m": 8,
        "ef_construction": 200,
        "ef_search": 40,
    }
    stats = params["build_stats"]
    assert stats["seconds"] >= stats["embed_seconds"] and stats["seconds"] >= stats["index_seconds"]
    assert stats["index_bytes"] == (tmp_path / "idx" / "index.faiss").stat().st_size  # the serialised index

    loaded = DenseRetriever.load(tmp_path / "idx", encoder)
    assert loaded.index_settings == built.index_settings and loaded.search(QUERIES, 5) == built.search(QUERIES, 5)
    params["index"]["settings"]["ef_search"] = 99  # efSearch comes from params.json, not from the FAISS file
    params_path.write_text(json.dumps(params))
    assert DenseRetriever.load(tmp_path / "idx", encoder).faiss_index.hnsw.efSearch == 99


def test_an_index_saved_before_index_settings_still_loads(tmp_path: Path) -> None:
    doc_ids, texts, encoder = table(30)
    built = DenseRetriever("dense_t").build(doc_ids, texts, encoder)
    built.save(tmp_path / "idx")
    params_path = tmp_path / "idx" / "params.json"
    params = json.loads(params_path.read_text())
    del params["index"]
    params_path.write_text(json.dumps(params))
    loaded = DenseRetriever.load(tmp_path / "idx", encoder)
    assert loaded.index_settings == IndexSettings() and loaded.index_type == "IndexFlatIP"
    assert loaded.search(QUERIES, 5) == built.search(QUERIES, 5)

    params["index"] = {"kind": "annoy"}
    params_path.write_text(json.dumps(params))
    with pytest.raises(ValueError, match=r"params\.json: unknown index kind 'annoy'"):
        DenseRetriever.load(tmp_path / "idx", encoder)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"flat_max_docs": -1}, "index.flat_max_docs: Input should be greater than or equal to 0"),
        ({"hnsw_m": 3}, "index.hnsw_m: Input should be greater than or equal to 4"),
        ({"ef_search": 0}, "index.ef_search"),
        ({"ef_construction": -5}, "index.ef_construction"),
        ({"approximate": "ivf"}, "unknown approximate index 'ivf'; known: hnsw"),
        ({"efsearch": 10}, "index.efsearch: Extra inputs are not permitted"),
    ],
)
def test_bad_index_settings_name_the_retriever(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=f"dense_bad: invalid index settings: .*{message}"):
        DenseRetriever("dense_bad", index=settings)


# -- the dense kind ---------------------------------------------------------------------------------


def test_registry_entries_with_bad_index_settings_are_reported_by_name(tmp_path: Path) -> None:
    model = fake_model_folder(tmp_path / "model")
    path = tmp_path / "retrievers.yaml"
    path.write_text(
        textwrap.dedent(f"""
        retrievers:
          dense_ok: {{kind: dense, model: {{path: {model}}}, index: {{flat_max_docs: 10}}}}
          dense_small_m: {{kind: dense, model: {{path: {model}}}, index: {{hnsw_m: 2}}}}
          dense_ivf: {{kind: dense, model: {{path: {model}}}, index: {{approximate: ivf}}}}
    """)
    )
    registry = load_retriever_specs(path)
    assert list(registry.specs) == ["dense_ok"]
    with pytest.raises(RetrieverError, match=r"retriever 'dense_small_m' is invalid: index\.hnsw_m"):
        registry.get("dense_small_m")
    with pytest.raises(RetrieverError, match=r"retriever 'dense_ivf' is invalid: index\.approximate.*unknown approximate index 'ivf'"):
        registry.get("dense_ivf")


def test_an_entry_without_index_keeps_its_identity(tmp_path: Path) -> None:
    model = fake_model_folder(tmp_path / "model")
    plain = parse_as(DenseSpec, "dense_toy", {"kind": "dense", "model": {"path": str(model)}})
    tuned = parse_as(DenseSpec, "dense_toy", {"kind": "dense", "model": {"path": str(model)}, "index": {"ef_search": 64}})
    assert "index" not in plain.settings()  # as before the block existed: indexes built then stay valid
    assert tuned.settings()["index"] == {**IndexSettings().model_dump(), "ef_search": 64}


def test_the_kind_builds_hnsw_above_its_limit_and_reports_it(tmp_path: Path) -> None:
    from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder

    model = fake_model_folder(tmp_path / "model")
    spec = parse_as(DenseSpec, "dense_toy", {"kind": "dense", "model": {"path": str(model)}, "index": {"flat_max_docs": 2}})
    encoder = KeywordEncoder(["cat", "dog", "fish", "bird"])
    params = build(spec, tmp_path, lambda _spec: encoder)
    assert params["index_type"] == "IndexHNSWFlat" and params["index_bytes"] > 0
    assert params["embed_seconds"] >= 0 and params["index_seconds"] >= 0  # rounded to ms: a 5-vector graph may take 0.000 s
    [cat] = load(spec, tmp_path, lambda _spec: encoder).search(["cat"], 1)
    assert cat[0][0] == "d0" and cat[0][1] == pytest.approx(1.0, abs=1e-6)
