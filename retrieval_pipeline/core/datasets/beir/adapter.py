"""``beir``: a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), judgements as given.

Registry block: ``beir`` (the folder and the split). Pairs are the qrels, graded: grade >= 1 is
relevant, grade 0 judged non-relevant (kept as evidence).

Rejects are split by file: ``corpus.jsonl`` rows go with the corpus (``corpus_rejects``); rejected query
rows, queries left with no valid judgement and rejected qrels lines go with the cases (``case_rejects``).
So the cases' ``total`` counts what they were built from: the split's query rows
(``split_queries_read``, queries the split never names left out) plus the rejected qrels lines (a kept
line is part of its case), and ``cases + rejects == total``; the report has each file's own counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retrieval_pipeline.core.datasets import kind_api as api
from retrieval_pipeline.core.datasets.beir.reader import load_beir


class BeirSource(api.SettingsBlock):
    """A BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv."""

    path: Path
    split: str = "test"


@api.register_adapter
class BeirAdapter(api.DatasetAdapter):
    """BEIR: corpus, queries and graded qrels read as given."""

    kind = "beir"
    blocks = {"beir": api.Block(BeirSource, path_keys=("path",))}

    def load_cases(self, config: api.DatasetSettings) -> api.CasesBuild:

        source: BeirSource = config.beir
        loaded = load_beir(source.path, split=source.split)
        rejects = [r for r in loaded.rejects if not _is_corpus_reject(r)]
        total = loaded.report["split_queries_read"] + loaded.report["qrels_rejected"]  # query rows + rejected qrels lines
        return api.CasesBuild(loaded.cases, rejects, total, dict(loaded.report))

    def build_corpus(self, config: api.DatasetSettings) -> api.CorpusBuild:

        source: BeirSource = config.beir
        loaded = load_beir(source.path, split=source.split)
        return api.CorpusBuild(loaded.documents, [r for r in loaded.rejects if _is_corpus_reject(r)], dict(loaded.report), str(source.path))

    def pair_builder(self, config: api.DatasetSettings, documents: Sequence[api.Document]) -> api.PairBuilder:
        return beir_pair


def _is_corpus_reject(reject: api.Rejected) -> bool:
    return reject.source_file.endswith("corpus.jsonl")


def beir_pair(case: api.Case) -> api.QAPair:
    """BEIR judgements as given: grade >= 1 is relevant (graded); grade 0 is judged non-relevant."""
    judged = {str(d): int(g) for d, g in (case.extra.get("qrels") or {}).items()}
    relevant = sorted((d for d, g in judged.items() if g >= 1), key=lambda d: (-judged[d], d))
    return api.gold_pair(
        case,
        relevant,
        "beir:qrels",
        {"judged_non_relevant": sorted(d for d, g in judged.items() if g < 1)},
        [] if relevant else [f"query {case.case_id!r} ({case.source_file}) has no judgement with grade >= 1"],
        [judged[d] for d in relevant],
    )
