"""The real thing on the real ADK suites (../shared/data): every asset of adk_v1_24_1, the real models and google-adk.

Its own file, so a parallel test run gives this longest test a worker of its own from the start. The question
verifier's assets are left out: nothing downstream reads them, and ``core/verifier/test_adk_acceptance.py`` runs
the same verification (the registry's verifier settings of this dataset, google-adk in ``.venvs/adk``) on the
same 61 questions and checks its verdicts, so running it here too would double the longest test for nothing.
"""

from __future__ import annotations

import math

import dagster as dg
import pandas as pd
import pytest

from retrieval_pipeline.core.evaluation.scoring import evaluated_qrels
from retrieval_pipeline_tests.defs.real.real_runs import VERIFIER_ASSETS, assert_checks_agree_with_metrics, metadata, run

pytestmark = [pytest.mark.integration, pytest.mark.heavy]


def test_real_adk_suites_against_ranked_targets_v1_24_1(shared_data, real_resources):
    result = run("adk_v1_24_1", real_resources, dg.DagsterInstance.ephemeral(), without=VERIFIER_ASSETS)
    assert not {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()} & set(VERIFIER_ASSETS)
    cases = metadata(result, "raw_cases")
    assert cases["accepted"] + cases["rejected"] == cases["rows_read"] and cases["rejected"] == 0
    corpus = metadata(result, "corpus")
    assert corpus["kept"] == corpus["documents"] and corpus["duplicates"] == 1  # the data README's known duplicate id
    pairs = metadata(result, "qa_pairs")
    assert pairs["api_gold_resolved"] <= pairs["api_gold_strings"]
    # aliases and suffixes lift it above the ~53% exact matches; the Agent aliases resolve by import in .venvs/adk
    assert pairs["api_gold_resolution_rate"] == 1.0 and pairs["api_gold_share_import"] > 0
    frame = result.asset_value("qa_pairs")
    fix = frame[frame["benchmark_type"] == "fix_error"]
    assert not fix["warnings"].str.contains("not found").any()  # suite_files_root finds every code file
    assert (fix["method"] == "ast:ast").all() and (fix["status"] == "resolved").all()  # targets read from the code
    assert (fix["status"] == "resolved").sum() == pairs["fix_error_targets_found"]
    assert_checks_agree_with_metrics(result, "adk_v1_24_1")
    assert_lifting_to_classes_never_lowers_a_class_gold(result.asset_value("retrieval_runs"), result.asset_value("retrieval_dataset"))


def assert_lifting_to_classes_never_lowers_a_class_gold(runs: pd.DataFrame, dataset: pd.DataFrame) -> None:
    """Every ADK gold is a class; lifted to classes, each ranks as high as before or higher, and some higher.

    Each hit above a class gold lifts to at most one class, so the gold's rank cannot fall; it rises when a
    method of its class, or two members of another class, rank above it.
    """
    qrels = evaluated_qrels(runs, dataset)

    def best_gold_rank(retriever: str) -> dict[str, float]:
        best = {query_id: math.inf for query_id in qrels}
        for row in runs[runs["retriever"] == retriever].itertuples():
            if qrels.get(row.query_id, {}).get(row.doc_id, 0) > 0:
                best[row.query_id] = min(best[row.query_id], row.rank)
        return best

    for base in ("code_lexical", "dense_minilm"):
        plain, lifted = best_gold_rank(base), best_gold_rank(f"{base}_classes")
        assert all(lifted[q] <= plain[q] for q in qrels), base
        assert sum(lifted[q] < plain[q] for q in qrels) >= 1, base
