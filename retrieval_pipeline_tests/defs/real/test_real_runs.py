"""The real thing: all-MiniLM-L6-v2 (offline) on the embedded sample (the ADK suites: test_real_adk_run.py).

The question verifier's assets are left out, as in ``test_real_adk_run.py``: nothing downstream reads them,
``core/verifier/test_sample_suite.py`` verifies the same 39 questions of this sample with the same settings (this
interpreter, the offline prover) and checks every verdict, and ``test_verifier_assets.py`` runs the assets
themselves in the real sandbox. Verifying here too cost this test 17 of its 50 s.
"""

from __future__ import annotations

import dagster as dg
import pytest

from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline_tests.defs.independent import hit_rate_at, ranx_scores
from retrieval_pipeline_tests.defs.real.real_runs import VERIFIER_ASSETS, assert_checks_agree_with_metrics, metadata, run

pytestmark = [pytest.mark.integration, pytest.mark.heavy]


def test_sample_main_job_on_the_real_model(real_resources):
    instance = dg.DagsterInstance.ephemeral()
    result = run("stdlib", real_resources, instance, without=VERIFIER_ASSETS)
    assert result.success  # the sample's floors are WARN, so failing floors do not fail the demo run

    cases = metadata(result, "raw_cases")
    assert cases["accepted"] + cases["rejected"] == cases["rows_read"]
    assert cases["type/api_understanding"] >= 40 and cases["type/fix_error"] >= 10 and cases["type/multiple_choice"] >= 20
    pairs = metadata(result, "qa_pairs")
    assert pairs["resolved"] + pairs["unresolved"] + pairs["not_retrieval"] == pairs["total"]
    assert pairs["api_gold_resolution_rate"] == 1.0  # the sample's golds are written against its own corpus
    verified = metadata(result, "verified_pairs")
    assert int(verified["kept"]) + int(verified["dropped"]) == int(verified["pairs"])

    table = assert_checks_agree_with_metrics(result, "stdlib")
    assert list(table.index) == load_registry().get("stdlib").retrievers
    # the table against independent computations: hit_rate@5 from the runs and positives with pandas alone,
    # MRR and nDCG@10 by ranx from the exported TREC files
    settings = real_resources["settings"]
    hit_rate = hit_rate_at(result.asset_value("retrieval_runs"), result.asset_value("retrieval_dataset"), 5)
    for retriever in table.index:
        reference = ranx_scores(
            settings.export_path("stdlib", "qrels.txt"), settings.export_path("stdlib", f"{retriever}.run"), ["mrr", "ndcg@10"]
        )
        assert table.loc[retriever, "hit_rate@5"] == pytest.approx(hit_rate[retriever], abs=1e-12), retriever
        assert table.loc[retriever, ["mrr", "ndcg@10"]].to_dict() == pytest.approx(reference, abs=1e-9), retriever
    assert metadata(result, "retrievers/dense_minilm_index")["embedded_now"] == metadata(result, "corpus")["documents"]

    again = run("stdlib", real_resources, instance, without=VERIFIER_ASSETS)
    assert again.success
    assert metadata(again, "retrievers/dense_minilm_index")["embedded_now"] == 0  # unchanged corpus: nothing re-embedded
    assert metadata(again, "retrievers/dense_minilm_index")["from_cache"] == metadata(again, "corpus")["documents"]
