"""A Dagster encoder resource for tests: keyword fakes instead of models (no torch)."""

from __future__ import annotations

from typing import Any

from retrieval_pipeline.defs.resources import EncoderResource
from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder, KeywordScorer


class KeywordEncoderResource(EncoderResource):
    """Deterministic keyword fakes for tests (an encoder per dense spec, a scorer per rerank spec): no model, no torch."""

    vocabulary: list[str]

    def encoder_for(self, spec: Any) -> Any:
        return KeywordScorer() if getattr(spec, "kind", None) == "rerank" else KeywordEncoder(self.vocabulary)
