"""What a dataset kind's ``adapter.py`` needs, in one place: ``from retrieval_pipeline.core.datasets import kind_api as api``.

The kind protocol (:mod:`.base`: the adapter class, its settings blocks, the builds it returns, the pair and
registration helpers) and the shared record types (:mod:`retrieval_pipeline.core.common.types`) an adapter
reads and returns. A new kind imports this module, not the pieces.
"""

from __future__ import annotations

from retrieval_pipeline.core.common.types import Case, Document, QAPair, Qrels, Rejected, Run
from retrieval_pipeline.core.datasets.base import (
    CASE_JSON_FIELDS,
    Block,
    CasesBuild,
    CorpusBuild,
    DatasetAdapter,
    DatasetSettings,
    PairBuilder,
    QueryColumns,
    RankingMetrics,
    SettingsBlock,
    gold_pair,
    register_adapter,
)

__all__ = [
    "CASE_JSON_FIELDS",
    "Block",
    "Case",
    "CasesBuild",
    "CorpusBuild",
    "DatasetAdapter",
    "DatasetSettings",
    "Document",
    "PairBuilder",
    "QAPair",
    "QueryColumns",
    "RankingMetrics",
    "Qrels",
    "Rejected",
    "Run",
    "SettingsBlock",
    "gold_pair",
    "register_adapter",
]
