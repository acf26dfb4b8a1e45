"""``nq``: a Natural Questions CSV; the corpus is the de-duplicated long answers.

Registry block: ``nq`` (the CSV, optionally its first N questions). A question's gold is its own long
answer's chunk (identical long answers are one chunk, relevant to every question that gave it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from retrieval_pipeline.core.datasets.base import (
    Block,
    CasesBuild,
    CorpusBuild,
    DatasetAdapter,
    PairBuilder,
    SettingsBlock,
    register_adapter,
)
from retrieval_pipeline.core.datasets.nq.reader import dedupe_chunks, load_nq_csv, nq_cases, nq_documents
from retrieval_pipeline.core.types import Case, Document, QAPair

if TYPE_CHECKING:
    from retrieval_pipeline.core.datasets.config import DatasetConfig


class NQSource(SettingsBlock):
    """A Natural Questions CSV (``question,long_answer,short_answer``)."""

    csv: Path
    sample_size: int | None = Field(None, ge=1)  # first N questions, for quick runs


@register_adapter
class NQAdapter(DatasetAdapter):
    """Natural Questions: one relevant chunk per question, its own long answer."""

    kind = "nq"
    blocks = {"nq": Block(NQSource, path_keys=("csv",))}

    def load_cases(self, config: DatasetConfig) -> CasesBuild:

        source: NQSource = config.nq
        loaded = load_nq_csv(source.csv, sample_size=source.sample_size)
        chunk_of = dedupe_chunks(loaded.rows).question_chunk
        cases = nq_cases(loaded.rows, str(source.csv))
        for case in cases:
            case.extra["gold_chunk_id"] = chunk_of[case.case_id]
        return CasesBuild(cases, loaded.rejects, loaded.total)

    def build_corpus(self, config: DatasetConfig) -> CorpusBuild:

        source: NQSource = config.nq
        loaded = load_nq_csv(source.csv, sample_size=source.sample_size)
        chunks = dedupe_chunks(loaded.rows)
        report = {"long_answers": len(loaded.rows), "chunks": len(chunks.chunks), "merged_duplicates": chunks.duplicates}
        return CorpusBuild(nq_documents(chunks.chunks), [], report, str(source.csv))

    def pair_builder(self, config: DatasetConfig, documents: Sequence[Document]) -> PairBuilder:
        return nq_pair


def nq_pair(case: Case) -> QAPair:
    """The question's own long answer (its de-duplicated chunk) is the one relevant document."""
    chunk = case.extra.get("gold_chunk_id")
    return QAPair(
        case.case_id,
        case.suite,
        case.benchmark_type,
        case.source_file,
        case.query,
        [chunk] if chunk else [],
        "resolved" if chunk else "unresolved",
        "nq:long_answer",
        {"short_answers": case.extra.get("short_answers", [])},
    )
