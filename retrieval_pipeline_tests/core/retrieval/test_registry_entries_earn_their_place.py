"""Registry entries that cannot differ from another entry of the same dataset are not listed beside it (issue 38)."""

from __future__ import annotations

from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs

SPECS = load_retriever_specs(DEFAULT_REGISTRY_PATH.with_name("retrievers.yaml"))


def _scorer_model(spec) -> tuple[str, str] | None:
    """(model, backend) a dense entry embeds with, or a bi-encoder rerank scores with."""
    if spec.kind == "dense" or (spec.kind == "rerank" and spec.scorer == "bi_encoder"):
        return spec.model.model_dump_json(), spec.backend
    return None


def test_no_dataset_lists_a_bi_encoder_rerank_beside_the_dense_entry_of_its_own_model() -> None:
    """Re-scoring a base's top n by the cosine of a dense entry's own model and backend ranks them in that entry's
    order; its top hits are among the n, so the two give the same numbers (rerank_rrf_minilm and dense_minilm:
    equal on dev NQ and insurance, ADK MRR +.004)."""
    offenders = []
    for name, dataset in load_registry().datasets.items():
        listed = [SPECS.specs[r] for r in dataset.retrievers if r in SPECS.specs]
        dense = {_scorer_model(s): s.name for s in listed if s.kind == "dense"}
        offenders += [f"{name}: {s.name} ~ {dense[_scorer_model(s)]}" for s in listed if s.kind == "rerank" and _scorer_model(s) in dense]
    assert offenders == []
