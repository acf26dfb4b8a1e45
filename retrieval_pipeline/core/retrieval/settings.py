"""The retrieval stage's settings in a dataset's registry entry (``retrieval:``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RetrievalSettings(BaseModel):
    """How runs are made; which retrievers run is the dataset's ``retrievers`` list."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    depth: int = Field(100, ge=1)  # hits retrieved per query (MRR, found and avg rank use this depth)
    latency_sample: int = Field(200, ge=0)  # queries timed one at a time; all are ranked in a batch
