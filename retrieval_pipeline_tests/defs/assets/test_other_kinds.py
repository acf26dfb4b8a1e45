"""NQ, context-QA and BEIR datasets through the same assets (keyword encoder: plumbing, counts, exports)."""

from __future__ import annotations

import json

import dagster as dg
import pandas as pd
import pytest

from retrieval_pipeline.core.evaluation.exports.trec import read_trec_qrels, read_trec_run
from retrieval_pipeline.core.evaluation.metrics import aggregate, per_query_metrics
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.definitions import defs
from retrieval_pipeline_tests.defs.independent import fold, read_beir_qrels
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

VOCAB = [
    "python",
    "release",
    "version",
    "function",
    "statement",
    "exception",
    "loop",
    "import",
    "module",
    "policy",
    "coverage",
    "vehicle",
    "home",
    "damage",
    "what",
    "who",
    "when",
]


@pytest.fixture
def resources(tmp_path):
    return resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB))


def run(partition, resources):
    result = dg.materialize(
        list(defs().assets), partition_key=partition, resources=resources, instance=dg.DagsterInstance.ephemeral(), raise_on_error=False
    )
    failures = [e.message for e in result.all_events if e.is_step_failure and "retrieval_metrics" not in (e.step_key or "")]
    assert not failures, failures  # only a blocking ERROR floor on the metrics may fail a run
    return result


def meta(result, key):
    """An asset's metadata, its numbers read back from the text the UI shows (numbers are text: never plotted across datasets)."""
    event = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(key)][0]
    return {k: _number(v.value) for k, v in event.materialization.metadata.items()}


def _number(value):
    if not isinstance(value, str):
        return value
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value


def csv_counts(dataset):
    """``(rows, distinct long answers after whitespace folding)`` of an NQ dataset's CSV, counted here with pandas."""
    rows = pd.read_csv(load_registry().get(dataset).nq.csv, dtype=str, keep_default_na=False)
    return len(rows), rows["long_answer"].map(fold).nunique()


def qa_rows(dataset):
    """The rows of a context-QA dataset's QA file, read here."""
    return json.loads(load_registry().get(dataset).context_qa.qa.read_text(encoding="utf-8"))


def assert_trec_exports_reproduce_the_metrics(result, resources, partition):
    """The exported TREC files, read back (and by ranx, unchanged), give the metric table's numbers."""
    ranx = pytest.importorskip("ranx")
    settings = resources["settings"]
    table = result.asset_value("retrieval_metrics").set_index("retriever")
    qrels_path = settings.export_path(partition, "qrels.txt")
    qrels = read_trec_qrels(qrels_path)
    for retriever in table.index:
        run_path = settings.export_path(partition, f"{retriever}.run")
        ours = aggregate(per_query_metrics(read_trec_run(run_path), qrels))
        assert ours["ndcg@10"] == pytest.approx(table.loc[retriever, "ndcg@10"], abs=1e-9)
        theirs = ranx.evaluate(
            ranx.Qrels.from_file(str(qrels_path), kind="trec"),
            ranx.Run.from_file(str(run_path), kind="trec"),
            ["ndcg@10", "mrr"],
            make_comparable=True,
        )
        assert theirs["ndcg@10"] == pytest.approx(table.loc[retriever, "ndcg@10"], abs=1e-9)
        assert theirs["mrr"] == pytest.approx(table.loc[retriever, "mrr"], abs=1e-9)


@pytest.mark.heavy
def test_nq_sample_dedups_long_answers_and_exports_evaluation_results(resources):
    result = run("python_nq", resources)
    corpus, pairs = meta(result, "corpus"), meta(result, "qa_pairs")
    rows, distinct = csv_counts("python_nq")  # 60 and 52 today
    assert tuple(int(corpus[k]) for k in ("long_answers", "chunks", "merged_duplicates")) == (rows, distinct, rows - distinct)
    assert distinct < rows and pairs["resolved"] == pairs["total"] == rows
    dataset = result.asset_value("retrieval_dataset")
    golds = [tuple(p["fqn"] for p in ctxs) for ctxs in dataset["positive_ctxs"]]
    assert len(set(golds)) == corpus["chunks"] < len(golds)  # a shared long answer is gold for each of its questions
    path = resources["settings"].export_path("python_nq", "evaluation_results.json")
    results = json.loads(path.read_text())
    assert set(results) == {"bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"}
    assert set(results["bm25"]["metrics"]) == {
        "total_questions",
        "recall_at_1",
        "recall_at_5",
        "mrr",
        "not_found",
        "not_found_pct",
        "avg_rank_when_found",
    }
    assert results["bm25"]["metrics"]["total_questions"] == len(dataset)
    assert_trec_exports_reproduce_the_metrics(result, resources, "python_nq")


@pytest.mark.heavy
def test_context_qa_sample_relevance_by_similarity_with_settings_recorded(resources):
    result = run("python_reference_qa", resources)
    pairs = meta(result, "qa_pairs")
    frame = result.asset_value("qa_pairs")
    rows, matched = len(qa_rows("python_reference_qa")), int(frame["gold_doc_ids"].map(len).gt(0).sum())  # counted here
    assert tuple(int(pairs[k]) for k in ("total", "context_pairs", "contexts_matched", "unresolved")) == (
        rows,
        rows,
        matched,
        rows - matched,
    )
    assert 0 < matched < rows and pairs["relevance_ceiling"] == pytest.approx(matched / rows, abs=5e-4)  # 4 digits: text in the UI
    for row in frame[frame["status"] == "unresolved"].itertuples():
        assert "qa_pairs.json row" in row.warnings and "matches no chunk at threshold 0.5" in row.warnings
    evidence = json.loads(frame[frame["status"] == "resolved"].iloc[0]["evidence"])
    assert evidence["similarity"]["threshold"] == 0.5 and evidence["similarity"]["autojunk"] is False
    results = result.asset_value("query_results")
    assert {"context_coverage@1", "context_coverage@5", "context_coverage@10", "best_match_position@5", "hit@3"} <= set(results.columns)
    table = result.asset_value("retrieval_metrics")
    assert (table["hit_rate@10"] <= pairs["relevance_ceiling"] + 1e-12).all() or pairs["unresolved"] == 0
    assert_trec_exports_reproduce_the_metrics(result, resources, "python_reference_qa")


@pytest.mark.integration
def test_real_beir_graded_qrels_through_the_assets(shared_data, resources):
    result = run("beir_msmarco", resources)
    cases = meta(result, "raw_cases")
    qrels = read_beir_qrels(load_registry().get("beir_msmarco").beir.path / "qrels" / "test.tsv")
    judged = qrels["query_id"].nunique()  # the split's queries, counted here: 43 of the 50 in queries.jsonl
    assert tuple(int(cases[k]) for k in ("rows_read", "accepted", "rejected")) == (judged, judged, 0)
    grades = {p["rank_relevance"] for ctxs in result.asset_value("retrieval_dataset")["positive_ctxs"] for p in ctxs}
    assert grades <= {1, 2, 3} and len(grades) > 1  # graded relevance reaches nDCG
    assert_trec_exports_reproduce_the_metrics(result, resources, "beir_msmarco")


@pytest.mark.integration
@pytest.mark.heavy
def test_real_nq_and_insurance_counts_add_up(shared_data, resources):
    nq = run("nq", resources)
    corpus = meta(nq, "corpus")
    rows, distinct = csv_counts("nq")  # 1,656 rows, 1,617 distinct long answers
    assert tuple(int(corpus[k]) for k in ("long_answers", "chunks", "merged_duplicates")) == (rows, distinct, rows - distinct)
    assert int(meta(nq, "raw_cases")["accepted"]) == rows
    insurance = run("insurance", resources)
    pairs = meta(insurance, "qa_pairs")
    rows = len(qa_rows("insurance"))
    # the three parser-junk rows match no chunk (checked by hand in test_independent_qrels.py); all others match
    assert tuple(int(pairs[k]) for k in ("context_pairs", "contexts_matched", "unresolved")) == (rows, rows - 3, 3)
    assert float(pairs["relevance_ceiling"]) == pytest.approx((rows - 3) / rows, rel=1e-3)
