"""NQ, context-QA and BEIR datasets through the same assets (keyword encoder: plumbing, counts, exports)."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from retrieval_pipeline.core.metrics import aggregate, per_query_metrics
from retrieval_pipeline.core.trec import read_trec_qrels, read_trec_run
from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.resources import KeywordEncoderResource
from retrieval_pipeline_tests.defs.support import resources_in

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
    event = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(key)][0]
    return {k: v.value for k, v in event.materialization.metadata.items()}


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


def test_nq_sample_dedups_long_answers_and_exports_evaluation_results(resources):
    result = run("python_nq", resources)
    corpus, pairs = meta(result, "corpus"), meta(result, "qa_pairs")
    assert corpus["chunks"] + corpus["merged_duplicates"] == corpus["long_answers"]
    assert corpus["merged_duplicates"] > 0 and pairs["resolved"] == pairs["total"]
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


def test_context_qa_sample_relevance_by_similarity_with_settings_recorded(resources):
    result = run("python_reference_qa", resources)
    pairs = meta(result, "qa_pairs")
    assert pairs["contexts_matched"] + pairs["unresolved"] == pairs["context_pairs"] == pairs["total"]
    assert pairs["relevance_ceiling"] == pytest.approx(pairs["contexts_matched"] / pairs["context_pairs"])
    frame = result.asset_value("qa_pairs")
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
    assert cases["accepted"] + cases["rejected"] == cases["rows_read"]
    grades = {p["rank_relevance"] for ctxs in result.asset_value("retrieval_dataset")["positive_ctxs"] for p in ctxs}
    assert grades <= {1, 2, 3} and len(grades) > 1  # graded relevance reaches nDCG
    assert_trec_exports_reproduce_the_metrics(result, resources, "beir_msmarco")


@pytest.mark.integration
def test_real_nq_and_insurance_counts_add_up(shared_data, resources):
    nq = run("nq", resources)
    corpus = meta(nq, "corpus")
    assert corpus["chunks"] + corpus["merged_duplicates"] == corpus["long_answers"] == meta(nq, "raw_cases")["accepted"]
    insurance = run("insurance", resources)
    pairs = meta(insurance, "qa_pairs")
    assert pairs["contexts_matched"] + pairs["unresolved"] == pairs["context_pairs"]
    assert 0 < pairs["relevance_ceiling"] <= 1
