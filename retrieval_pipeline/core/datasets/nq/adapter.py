"""``nq``: a Natural Questions CSV; the corpus is the de-duplicated long answers.

Registry block: ``nq`` (the CSV, optionally its first N questions). A question's gold is its own long
answer's chunk (identical long answers are one chunk, relevant to every question that gave it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from retrieval_pipeline.core.datasets import kind_api as api
from retrieval_pipeline.core.datasets.nq.reader import NQLoad, NQRow, dedupe_chunks, load_nq_csv, nq_cases, nq_documents


class NQSource(api.SettingsBlock):
    """A Natural Questions CSV (``question,long_answer,short_answer``).

    ``sample_size`` evaluates the first N questions against the corpus of EVERY row's long answer, as the
    real search would run: sampling questions never removes documents. ``corpus_rows`` is the explicit
    way to a smaller, easier corpus for a quick look (the long answers of the first N rows, the sampled
    questions' own included); the corpus's metadata says it is a subset.
    """

    csv: Path
    sample_size: int | None = Field(None, ge=1)  # first N questions, against the whole corpus
    corpus_rows: int | None = Field(None, ge=1)  # a corpus subset for quick looks: the first N rows' long answers


@api.register_adapter
class NQAdapter(api.DatasetAdapter):
    """Natural Questions: one relevant chunk per question, its own long answer."""

    kind = "nq"
    blocks = {"nq": api.Block(NQSource, path_keys=("csv",))}

    def load_cases(self, config: api.DatasetSettings) -> api.CasesBuild:
        source: NQSource = config.nq
        loaded, corpus_rows = _load(source)
        chunk_of = dedupe_chunks(corpus_rows).question_chunk  # chunk ids as the corpus numbers them
        cases = nq_cases(loaded.rows, str(source.csv))
        for case in cases:
            case.extra["gold_chunk_id"] = chunk_of[case.case_id]
        return api.CasesBuild(cases, loaded.rejects, loaded.total)

    def build_corpus(self, config: api.DatasetSettings) -> api.CorpusBuild:
        source: NQSource = config.nq
        _, rows = _load(source)
        chunks = dedupe_chunks(rows)
        report: dict[str, object] = {"long_answers": len(rows), "chunks": len(chunks.chunks), "merged_duplicates": chunks.duplicates}
        if source.corpus_rows is not None:
            report["corpus_subset"] = f"SUBSET for a quick look: the long answers of the first {len(rows):,} rows only (corpus_rows)"
        return api.CorpusBuild(nq_documents(chunks.chunks), [], report, str(source.csv))

    def pair_builder(self, config: api.DatasetSettings, documents: Sequence[api.Document]) -> api.PairBuilder:
        return nq_pair


def nq_pair(case: api.Case) -> api.QAPair:
    """The question's own long answer (its de-duplicated chunk) is the one relevant document."""
    chunk = case.extra.get("gold_chunk_id")
    return api.gold_pair(case, [chunk] if chunk else [], "nq:long_answer", {"short_answers": case.extra.get("short_answers", [])})


def _load(source: NQSource) -> tuple[NQLoad, list[NQRow]]:
    """The sampled questions (the first ``sample_size``, or all) and the rows whose long answers make the corpus.

    The CSV is read once: the sample is the first rows of the whole file. The corpus rows are every row, or
    the first ``corpus_rows`` plus the sampled ones; the chunk ids follow their order, so the cases and the
    corpus number them alike.
    """
    every = load_nq_csv(source.csv)
    sampled = every if source.sample_size is None else every.first(source.sample_size)
    if source.corpus_rows is None:
        return sampled, list(every.rows)
    kept = {row.question_id for row in sampled.rows}
    return sampled, [row for row in every.rows if row.index < source.corpus_rows or row.question_id in kept]
