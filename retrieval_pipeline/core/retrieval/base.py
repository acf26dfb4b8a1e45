"""The one retriever interface: a batch of query strings in, ranked ``(doc_id, score)`` lists out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from retrieval_pipeline.core.types import Hit


@runtime_checkable
class Retriever(Protocol):
    """A built index that answers queries.

    ``search`` returns, for each query, at most ``k`` hits sorted by score descending; ties are broken
    by document position in the corpus (ascending), so results are deterministic.
    """

    name: str

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


@runtime_checkable
class PersistentRetriever(Retriever, Protocol):
    """A retriever that saves itself with its parameters (``params.json``) and loads back identically."""

    def save(self, directory: Path) -> None: ...

    @classmethod
    def load(cls, directory: Path) -> PersistentRetriever: ...
