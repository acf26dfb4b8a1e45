"""The corpus-trained cross-encoder left the registry (issue 38); its benchmark still builds it."""

from __future__ import annotations

from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs, parse_spec

SPECS = load_retriever_specs(DEFAULT_REGISTRY_PATH.with_name("retrievers.yaml"))


def test_the_corpus_trained_cross_encoder_left_the_registry_and_its_benchmark_still_builds_it(load_benchmark) -> None:
    assert "rerank_rrf_minilm_ce" not in SPECS.specs and "rerank_rrf_minilm_ce" not in SPECS.errors
    extra = load_benchmark("cross_encoder_dev.py").EXTRA_SPECS
    spec = parse_spec("rerank_rrf_minilm_ce", extra["rerank_rrf_minilm_ce"])
    assert spec.kind == "rerank" and spec.base in SPECS.specs and spec.model.finetuned_cross_encoder.learning_rate == 5e-5
