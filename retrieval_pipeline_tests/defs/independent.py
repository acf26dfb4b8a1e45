"""Readers and reference computations that share no code with the pipeline.

The pipeline writes ``qrels.txt`` with :mod:`retrieval_pipeline.core.evaluation.exports.trec_writer` and builds qrels with
:mod:`retrieval_pipeline.core.evaluation.scoring` and :mod:`retrieval_pipeline.core.filtering.retrieval_dataset`. A test that
reads the export back with the same module cannot see a bug both sides share, so everything here is
written against the file formats and pandas only: a TREC qrels reader, a BEIR qrels TSV reader, and
``hit_rate@k`` straight from the ``retrieval_runs`` and ``retrieval_dataset`` frames. Nothing here
imports ``core.trec``, ``core.scoring`` or ``core.filtering.retrieval_dataset``.

The qrels reader's parity with a reference library (pytrec_eval's ``parse_qrel``) is proven in
``test_independent_qrels.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.resources import PipelineSettings
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

#: ``{query_id: {doc_id: grade}}``, as read here.
QrelsDict = dict[str, dict[str, int]]

#: What :func:`export_dataset` materialises: ``evaluation_exports`` and everything it needs (retrievers the
#: registry does not list are skipped cheaply by their assets).
EXPORTS = dg.AssetSelection.assets("evaluation_exports").upstream().required_multi_asset_neighbors()


def read_qrels_txt(path: Path) -> QrelsDict:
    """A TREC qrels file (``query_id iteration doc_id grade``) read with pandas.

    Raises:
        AssertionError: naming the file: a line without 4 fields, an iteration other than ``0``, a grade
            that is not an integer, or a (query, doc) pair listed twice.
    """
    rows = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    bad = [i + 1 for i, row in enumerate(rows) if len(row) != 4]
    assert not bad, f"{path}: lines {bad[:5]} do not have 4 fields"
    frame = pd.DataFrame(rows, columns=["query_id", "iteration", "doc_id", "grade"])
    assert (frame["iteration"] == "0").all(), f"{path}: an iteration column is not 0"
    assert frame["grade"].str.fullmatch(r"-?[0-9]+").all(), f"{path}: a grade is not an integer"
    repeated = frame[frame.duplicated(["query_id", "doc_id"])]
    assert repeated.empty, f"{path}: (query, doc) pairs listed twice: {repeated.head().values.tolist()}"
    return _nested(frame.assign(grade=frame["grade"].astype(int)))


def read_beir_qrels(path: Path) -> pd.DataFrame:
    """A BEIR ``qrels/<split>.tsv`` (``query-id corpus-id score``, header line optional) as a frame.

    Returns:
        Columns ``query_id``, ``doc_id``, ``grade`` (int), in file order.
    """
    frame = pd.read_csv(path, sep="\t", header=None, dtype=str, keep_default_na=False, names=["query_id", "doc_id", "grade"])
    if len(frame) and not frame["grade"].iloc[0].strip().lstrip("-").isdigit():
        frame = frame.iloc[1:]  # the header line ("query-id corpus-id score")
    return frame.assign(grade=frame["grade"].astype(int)).reset_index(drop=True)


def relevant(frame: pd.DataFrame) -> QrelsDict:
    """The judgements with grade >= 1 (what a qrels export holds), nested by query."""
    return _nested(frame[frame["grade"] >= 1])


def _nested(frame: pd.DataFrame) -> QrelsDict:
    out: QrelsDict = {}
    for query_id, doc_id, grade in frame[["query_id", "doc_id", "grade"]].itertuples(index=False):
        out.setdefault(str(query_id), {})[str(doc_id)] = int(grade)
    return out


def fold(text: str) -> str:
    """Every run of whitespace (``str.split``'s, so no-break spaces too) as one space, ends stripped."""
    return " ".join(text.split())


def positives(dataset: pd.DataFrame) -> QrelsDict:
    """``{query: {doc: rank_relevance}}`` from a ``retrieval_dataset`` frame's ``positive_ctxs``."""
    return {str(row.id): {str(p["fqn"]): int(p["rank_relevance"]) for p in row.positive_ctxs} for row in dataset.itertuples()}


def hit_rate_at(runs: pd.DataFrame, dataset: pd.DataFrame, k: int) -> dict[str, float]:
    """Share of the dataset's queries with any positive in a retriever's top ``k``, per retriever (pandas only).

    Args:
        runs: The ``retrieval_runs`` frame (``retriever``, ``query_id``, ``rank`` 1-based, 0 for no hit, ``doc_id``).
        dataset: The ``retrieval_dataset`` frame (its ``positive_ctxs`` are the golds).
    """
    golds = {(q, d) for q, docs in positives(dataset).items() for d in docs}
    top = runs[(runs["rank"] >= 1) & (runs["rank"] <= k)]
    hit = top[[(q, d) in golds for q, d in zip(top["query_id"], top["doc_id"])]]
    found = hit.groupby("retriever")["query_id"].nunique()
    return {str(r): float(found.get(r, 0)) / len(dataset) for r in runs["retriever"].unique()}


@dataclass
class Exported:
    """One materialisation up to ``evaluation_exports`` and where its exports are."""

    result: dg.ExecuteInProcessResult
    settings: PipelineSettings
    partition: str

    def export(self, name: str) -> Path:
        """An export file of the run's partition (``qrels.txt``, ``retrieval_dataset.jsonl``, ...)."""
        return Path(self.settings.export_path(self.partition, name))

    def value(self, asset: str) -> Any:
        """An asset's value in this run."""
        return self.result.asset_value(asset)


def export_dataset(tmp_path: Path, partition: str, entry: Mapping[str, Any]) -> Exported:
    """Materialise ``evaluation_exports`` (and its upstream) for one dataset of a registry written here.

    Args:
        tmp_path: Where the registry, outputs and caches go.
        partition: One of the project's partition keys; the registry names its dataset so.
        entry: The dataset's registry entry (``kind`` and its block, ``filter``, ...); ``retrievers`` defaults to BM25 only.

    Raises:
        AssertionError: the run failed (the failure messages are shown).
    """
    import yaml

    registry = tmp_path / "datasets.yaml"
    registry.write_text(yaml.safe_dump({"datasets": {partition: {"retrievers": ["bm25"], **entry}}}), encoding="utf-8")
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=["unused"]), registry)
    result = dg.materialize(
        list(defs().assets),
        selection=EXPORTS,
        partition_key=partition,
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return Exported(result, resources["settings"], partition)


def ranx_scores(qrels_path: Path, run_path: Path, metrics: list[str]) -> dict[str, float]:
    """Metrics of an exported TREC run by ranx (the reference library), read from the files as any tool reads them.

    Queries of the qrels missing from the run count as misses (``make_comparable``), as they do in the pipeline.
    """
    import ranx

    qrels = ranx.Qrels.from_file(str(qrels_path), kind="trec")
    run = ranx.Run.from_file(str(run_path), kind="trec")
    scores = ranx.evaluate(qrels, run, metrics, make_comparable=True)
    return {metrics[0]: float(scores)} if len(metrics) == 1 else {m: float(v) for m, v in scores.items()}
