"""The filtering stage's settings in a dataset's registry entry (``filter:`` and ``negatives:``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class NegativeSettings(BaseModel):
    """How many hard negatives each query gets: siblings of its gold, and BM25 hits that are not gold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_query_siblings: int = Field(3, ge=0)
    per_query_bm25: int = Field(3, ge=0)


class FilterSettings(BaseModel):
    """The forward-RAG filter: which judge, and how many random contexts it is compared against."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # auto: an LLM when an endpoint is configured, else the deterministic offline_lexical judge
    judge: Literal["auto", "llm", "offline_lexical", "none"] = "auto"
    random_contexts: int = Field(3, ge=0)
    min_description_tokens: int = Field(2, ge=0)
    max_random_coverage: float = Field(0.5, ge=0.0, le=1.0)
    seed: int = 13
