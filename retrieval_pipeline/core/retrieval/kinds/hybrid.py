"""``kind: hybrid``: fusion of two or more named retrievers (:mod:`retrieval_pipeline.core.retrieval.engines.fusion`).

Settings: ``retrievers`` (names, in the order weights refer to), ``method``: ``minmax`` (weighted sum of
min-max normalised scores, ``weights`` one per retriever, default equal) or ``rrf`` (Reciprocal Rank
Fusion with constant ``k``), and ``depth``: hits taken from each retriever before fusing. Both equal
``ranx.fuse`` on the same runs (``test_fusion.py``). The index is nothing but ``params.json``: the
components' own indexes are loaded, so building a hybrid never rebuilds them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from retrieval_pipeline.core.retrieval.engines.fusion import HybridRetriever
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind


@register_kind
class HybridSpec(RetrieverSpec):
    kind: Literal["hybrid"] = "hybrid"
    retrievers: list[str] = Field(min_length=2)
    method: Literal["minmax", "rrf"] = "rrf"
    weights: list[float] | None = None
    k: float = Field(60, ge=0)
    depth: int = Field(100, ge=1)

    @model_validator(mode="after")
    def _weights_fit(self) -> HybridSpec:
        if len(set(self.retrievers)) != len(self.retrievers):
            raise ValueError(f"retrievers lists a name twice: {self.retrievers}")
        if self.weights is not None:
            if self.method != "minmax":
                raise ValueError("weights apply to method minmax only")
            if len(self.weights) != len(self.retrievers) or any(w < 0 for w in self.weights) or not any(self.weights):
                raise ValueError(f"weights: one non-negative weight per retriever, not all 0 (got {self.weights} for {self.retrievers})")
        return self

    def components(self) -> list[str]:
        return list(self.retrievers)

    def fusion_weights(self) -> list[float]:
        return list(self.weights) if self.weights is not None else [1.0 / len(self.retrievers)] * len(self.retrievers)

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        for part in self.retrievers:  # fail now, not at search time, when a component is not built
            ctx.component(part)
        return {"components": list(self.retrievers)}

    def load(self, ctx: RetrieverContext) -> HybridRetriever:
        parts = [ctx.component(p) for p in self.retrievers]
        return HybridRetriever(
            self.name,
            parts,
            self.method,
            rrf_k=self.k,
            depth=self.depth,
            weights=self.fusion_weights() if self.method == "minmax" else None,
        )
