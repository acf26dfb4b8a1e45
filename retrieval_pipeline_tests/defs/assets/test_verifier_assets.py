"""The question verifier as Dagster assets: verdicts, report files, proposals, the check and the alert."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.sensors import retrieval_alert_sensor
from retrieval_pipeline_tests.core.conftest import require_sandbox
from retrieval_pipeline_tests.defs.conftest import VOCAB, write_dataset
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource


@pytest.fixture(autouse=True)
def _sandbox() -> None:
    """Skip when the verifier's sandbox cannot run here; fail under CI=true (no silent security skips)."""
    require_sandbox()


MC_SUITE = """
benchmarks:
- id: mc:json_import
  question: Which is the correct import statement for the `dumps` function?
  options: {A: from json import dumps, B: from json.encoder import dumps_all, C: from jsonlib import dumps, D: None of the above}
  correct_answer: A
  explanation: dumps lives in json.
  benchmark_type: multiple_choice
- id: mc:wrong_marked
  question: Which is the correct import statement for the `OrderedDict` class?
  options: {A: from collections import OrderedDict, B: from itertools import OrderedDict, C: from functools import OrderedDict}
  correct_answer: B
  explanation: planted wrong answer
  benchmark_type: multiple_choice
"""


@pytest.fixture
def verifier_resources(tmp_path):
    registry = write_dataset(tmp_path / "in")
    (tmp_path / "in" / "suites" / "multiple_choice.yaml").write_text(MC_SUITE)
    text = registry.read_text().replace(
        "suites: [suites/api_understanding.yaml, suites/fix_errors.yaml]",
        "suites: [suites/api_understanding.yaml, suites/fix_errors.yaml, suites/multiple_choice.yaml]",
    )
    registry.write_text(text)
    return resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), registry)


def test_verdicts_report_and_check_on_planted_questions(verifier_resources):
    instance = dg.DagsterInstance.ephemeral()
    suite = verifier_resources["settings"].dataset("stdlib").suites[-1]
    before = suite.read_bytes()
    result = dg.materialize(
        list(defs().assets),
        selection=["raw_cases", "case_rejects", "question_verdicts", "quality_report"],
        partition_key="stdlib",
        resources=verifier_resources,
        instance=instance,
    )
    assert result.success  # a disproven answer flags the benchmark; it does not fail the pipeline
    verdicts = result.asset_value("question_verdicts").set_index("case_id")
    assert verdicts.loc["mc:json_import", "verdict"] == "Valid"
    assert verdicts.loc["mc:wrong_marked", "verdict"] == "Incorrect"
    assert list(verdicts.loc["mc:wrong_marked", "proven_true"]) == ["A"]
    check = {e.check_name: e for e in result.get_asset_check_evaluations()}["no_incorrect_questions"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR

    settings = verifier_resources["settings"]
    report = json.loads(settings.export_path("stdlib", "quality_report.json").read_text())
    assert report["counts"]["Incorrect"] == 1 and report["counts"]["Valid"] == 1
    proposals = settings.export_path("stdlib", "proposed_fixes.yaml")
    assert proposals.exists() and "mc:wrong_marked" in proposals.read_text()
    assert suite.read_bytes() == before  # proposals never go over the input suite

    context = dg.build_sensor_context(instance=instance, resources={"alerts": verifier_resources["alerts"]})
    retrieval_alert_sensor.evaluate_tick(context)
    alerts = verifier_resources["alerts"].sink().read()
    assert [a["asset"] for a in alerts] == ["quality_report"] and alerts[0]["failed_checks"][0]["check"] == "no_incorrect_questions"


def test_a_dataset_of_only_multiple_choice_questions_succeeds(tmp_path):
    """Nothing to evaluate for retrieval: said, and skipped; the verifier's assets materialise; the run succeeds."""
    registry = write_dataset(tmp_path / "in")
    (tmp_path / "in" / "suites" / "multiple_choice.yaml").write_text(MC_SUITE)
    registry.write_text(
        registry.read_text().replace(
            "suites: [suites/api_understanding.yaml, suites/fix_errors.yaml]", "suites: [suites/multiple_choice.yaml]"
        )
    )
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), registry)
    result = dg.materialize(
        list(defs().assets), partition_key="stdlib", resources=resources, raise_on_error=False, instance=dg.DagsterInstance.ephemeral()
    )
    failures = [e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert result.success and not failures, failures
    materialised = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert {"question_verdicts", "quality_report", "verified_pairs"} <= materialised
    assert "retrieval_dataset" not in materialised and "retrieval_metrics" not in materialised
    verdicts = result.asset_value("question_verdicts").set_index("case_id")
    assert verdicts.loc["mc:json_import", "verdict"] == "Valid" and verdicts.loc["mc:wrong_marked", "verdict"] == "Incorrect"
    observed = [
        e.event_specific_data.asset_observation.metadata["nothing_to_evaluate"].value
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION" and e.asset_key == dg.AssetKey("retrieval_dataset")
    ]
    assert len(observed) == 1 and "nothing to evaluate" in observed[0] and "no retrieval case" in observed[0]
    skipped = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SKIPPED"}
    assert {"retrieval_metrics", "evaluation_report"} <= skipped
    assert not resources["settings"].export_path("stdlib", "retrieval_dataset.jsonl").exists()
    assert resources["settings"].export_path("stdlib", "quality_report.json").exists()
