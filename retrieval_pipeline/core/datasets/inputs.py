"""Every kind of dataset reduced to the same things: corpus and cases (queries); pairs come later.

Each stage asks the dataset kind's adapter (:mod:`retrieval_pipeline.core.datasets`): one module per
kind (``suite``, ``nq``, ``context_qa``, ``beir``, ...) says how its corpus and cases are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets import CasesBuild, CorpusBuild, adapter_for

if TYPE_CHECKING:
    from retrieval_pipeline.core.datasets.base import DatasetSettings

__all__ = ["CasesBuild", "CorpusBuild", "build_corpus", "documents_by_id", "load_cases"]


def build_corpus(config: DatasetSettings) -> CorpusBuild:
    """The documents retrievers index, with rejects and counts (the kind's adapter builds them)."""
    return adapter_for(config).build_corpus(config)


def load_cases(config: DatasetSettings) -> CasesBuild:
    """The queries, validated; invalid rows become rejects with file, case and reason (the kind's adapter reads them).

    Raises:
        RuntimeError: ``cases + rejects`` is not the number of rows read (nothing may be lost).
        InputError: No row is a valid case; names the inputs, the counts and the first reject.
    """
    loaded = adapter_for(config).load_cases(config)
    if len(loaded.cases) + len(loaded.rejects) != loaded.total:
        raise RuntimeError(f"case counts do not add up: {len(loaded.cases)} + {len(loaded.rejects)} != {loaded.total}")
    if not loaded.cases:
        first = loaded.rejects[0].reason if loaded.rejects else "the input is empty"
        raise InputError(
            f"no valid case: {loaded.total} read, {len(loaded.rejects)} rejected; first reject: {first}",
            path=", ".join(map(str, config.input_paths())),
        )
    return loaded


def documents_by_id(documents: Sequence[Document]) -> dict[str, Document]:
    return {d.doc_id: d for d in documents}
