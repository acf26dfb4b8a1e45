"""``context_qa``: QA pairs with an expected context and no chunk ids; relevance by text similarity.

Registry block: ``context_qa`` (the QA file; markdown documents or pydoc_data topics; chunking and
similarity settings). The corpus is the chunked documents; a case's golds are every chunk whose
similarity to the expected context reaches the threshold (see :class:`ContextMatcher`). Evaluation
adds context coverage, best-match position and MRR@k per query, and records the similarity settings.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from retrieval_pipeline.core.common.cache.result_cache import active_result_cache
from retrieval_pipeline.core.common.frames import from_frame
from retrieval_pipeline.core.datasets import kind_api as api
from retrieval_pipeline.core.datasets.context_qa.chunking import chunk_markdown
from retrieval_pipeline.core.datasets.context_qa.documents import load_documents, pydoc_topic_documents
from retrieval_pipeline.core.datasets.context_qa.metrics import context_qa_metrics
from retrieval_pipeline.core.datasets.context_qa.pairs import ContextMatcher
from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa
from retrieval_pipeline.core.datasets.context_qa.similarity import SimilaritySettings, cached_similarities

if TYPE_CHECKING:
    import pandas as pd


#: Columns of :func:`~retrieval_pipeline.core.datasets.context_qa.metrics.context_qa_metrics` that per_query_metrics lacks.
_EXTRA_COLUMN_PREFIXES = ("context_coverage", "best_match_position", "mrr@", "hit@")
#: The cutoffs ("max hits") of the context-QA columns; the deepest is how many hits per query need a similarity.
CONTEXT_KS = (1, 5, 10)


class ChunkingSettings(api.SettingsBlock):
    """How documents are cut: chunks of at most ``size`` characters, ``overlap`` of them carried to the next chunk."""

    size: int = Field(400, ge=50)  # characters; see docs/design.md for why 400/100 (the relevance ceiling)
    overlap: int = Field(100, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingSettings:
        """``overlap >= size`` would fail at ``corpus`` (:func:`~retrieval_pipeline.core.datasets.context_qa.chunking.chunk_markdown`): refused here."""
        if self.overlap >= self.size:
            raise ValueError(
                f"overlap ({self.overlap}) must be smaller than size ({self.size}): "
                "each chunk carries at most overlap characters of the previous one"
            )
        return self


class SimilaritySettingsModel(api.SettingsBlock):
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    autojunk: bool = False
    normalise: bool = True

    def settings(self) -> SimilaritySettings:
        """The settings object the similarity functions take."""
        return SimilaritySettings(threshold=self.threshold, autojunk=self.autojunk, normalise=self.normalise)


class ContextQASource(api.SettingsBlock):
    """QA pairs with an expected context and no chunk ids; relevance by text similarity."""

    qa: Path
    documents: list[Path] | None = None  # markdown files ...
    pydoc_topics: list[str] | None = None  # ... or topics of CPython's language reference (pydoc_data); ["*"]: all
    chunking: ChunkingSettings = ChunkingSettings()
    similarity: SimilaritySettingsModel = SimilaritySettingsModel()

    @model_validator(mode="after")
    def _one_document_source(self) -> ContextQASource:
        if bool(self.documents) == bool(self.pydoc_topics):
            raise ValueError("context_qa needs exactly one of documents, pydoc_topics")
        return self


@api.register_adapter
class ContextQAAdapter(api.DatasetAdapter):
    """Context QA: chunked documents, golds by similarity to the expected context."""

    kind = "context_qa"
    blocks = {"context_qa": api.Block(ContextQASource, path_keys=("qa", "documents"))}

    def load_cases(self, config: api.DatasetSettings) -> api.CasesBuild:

        loaded = load_context_qa(_source(config).qa)
        return api.CasesBuild(loaded.cases, loaded.rejects, loaded.total, dict(loaded.report))

    def build_corpus(self, config: api.DatasetSettings) -> api.CorpusBuild:

        spec = _source(config)
        topics = None if spec.pydoc_topics == ["*"] else spec.pydoc_topics  # "*": the whole language reference
        rejects: list[api.Rejected] = []  # documents that contribute no chunk, each named
        sources = load_documents(spec.documents, rejects) if spec.documents else pydoc_topic_documents(topics)
        files = {Path(p).stem: str(p) for p in spec.documents or []}
        chunks: list[api.Document] = []
        for document_id, text in sources:
            cut = chunk_markdown(document_id, text, size=spec.chunking.size, overlap=spec.chunking.overlap)
            if not cut:
                where = files.get(document_id, f"pydoc_data topic {document_id}")
                rejects.append(
                    api.Rejected(
                        where,
                        document_id,
                        None,
                        f"file {where}: document {document_id!r} has headings but no text: it contributes no chunk",
                    )
                )
            chunks.extend(cut)
        read = len(spec.documents) if spec.documents else len(sources)  # documents_read = documents + documents_rejected
        report = {
            "documents_read": read,
            "documents": read - len(rejects),
            "documents_rejected": len(rejects),
            "chunks": len(chunks),
            "chunk_size": spec.chunking.size,
            "chunk_overlap": spec.chunking.overlap,
        }
        where = ", ".join(map(str, spec.documents)) if spec.documents else f"pydoc_data topics {', '.join(spec.pydoc_topics or [])}"
        return api.CorpusBuild(chunks, rejects, report, where)

    def pair_builder(self, config: api.DatasetSettings, documents: Sequence[api.Document]) -> api.PairBuilder:
        """:class:`ContextMatcher` over the chunks, with the active result cache (if any).

        Matches are read from and stored in the cache made active by the asset
        (:func:`~retrieval_pipeline.core.common.cache.result_cache.using_result_cache`), so an unchanged re-run skips the similarity.
        """

        return ContextMatcher(documents, _source(config).similarity.settings(), active_result_cache()).pair

    def pairs_report(self, pairs: Sequence[api.QAPair]) -> dict[str, Any]:
        """How many expected contexts matched a chunk; their share is the relevance ceiling, the best hit
        rate any retriever can reach on this corpus at these settings."""
        if not pairs:
            return {}
        matched = sum(1 for p in pairs if p.status == "resolved")
        return {
            "context_pairs": len(pairs),
            "contexts_matched": matched,
            "relevance_ceiling": matched / len(pairs),
            "relevant_chunks_per_pair": sum(len(p.gold_doc_ids) for p in pairs) / len(pairs),
            # pairs with a chunk that holds the answer verbatim outside their gold (ContextMatcher.answer_outside_gold)
            "answer_outside_gold": sum(1 for p in pairs if p.evidence.get("answer_outside_gold")),
        }

    def extra_query_columns(
        self, config: api.DatasetSettings, raw_cases: pd.DataFrame, corpus: pd.DataFrame, ranking: api.RankingMetrics
    ) -> api.QueryColumns:
        """Per max hits k: context coverage, best-match position, MRR@k and hit@k (see :mod:`context_metrics`).

        The exact similarities of the retrieved chunks come from the active result cache when one is open
        (:func:`~retrieval_pipeline.core.common.cache.result_cache.using_result_cache`): read in one lookup per retriever,
        the missing ones computed and stored, so an unchanged re-run computes none.
        """

        settings = _source(config).similarity.settings()
        expected = {c.case_id: str(c.extra.get("expected_context", "")) for c in from_frame(raw_cases, api.Case, api.CASE_JSON_FIELDS)}
        chunks = {d.doc_id: d for d in from_frame(corpus, api.Document)}
        cache = active_result_cache()

        def columns(run: api.Run, qrels: api.Qrels) -> pd.DataFrame:
            if cache is not None:
                cached_similarities(_retrieved_pairs(run, qrels, expected, chunks, max(CONTEXT_KS)), settings, cache)
            frame = context_qa_metrics(run, qrels, expected, chunks, settings, ks=CONTEXT_KS, ranking=ranking)
            return frame[[c for c in frame.columns if c == "query_id" or c.startswith(_EXTRA_COLUMN_PREFIXES)]]

        return columns

    def metadata(self, config: api.DatasetSettings) -> dict[str, Any]:
        return {"similarity_settings": _source(config).similarity.model_dump()}


def _retrieved_pairs(
    run: api.Run, qrels: api.Qrels, expected: dict[str, str], chunks: dict[str, api.Document], depth: int
) -> Iterator[tuple[str, str]]:
    """``(expected context, chunk text)`` of every query's top ``depth`` hits, as context-QA metrics will ask for them.

    Unknown queries and chunks are skipped here: :func:`~retrieval_pipeline.core.datasets.context_qa.metrics.context_qa_metrics`
    reports them.
    """
    for query_id in qrels:
        for doc_id, _score in (run.get(query_id) or [])[:depth]:
            if query_id in expected and doc_id in chunks:
                yield expected[query_id], chunks[doc_id].text


def _source(config: api.DatasetSettings) -> ContextQASource:
    return config.context_qa
