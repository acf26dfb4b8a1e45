"""End to end on the sample suite: which planted faults the verifier catches, and nothing else flagged.

The planted-fault list is read HERE, in the test, from PLANTED_FAULTS.md; the verifier never sees it.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from retrieval_pipeline.core.sources.suites import load_suite
from retrieval_pipeline.core.verifier.provers import OfflineProver
from retrieval_pipeline.core.verifier.remediation import remediate, write_proposals
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report, run_meta, write_quality_report
from retrieval_pipeline.core.verifier.verify import run_verification

EXPECTED_VERDICT = {"wrong answer": "Incorrect", "drifted": "Incorrect", "ambiguous": "Ambiguous"}


def planted_faults(project_root) -> dict[str, str]:
    text = (project_root / "data/samples/stdlib/PLANTED_FAULTS.md").read_text()
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `([^`]+)` \| ([^|]+) \|", text, re.M)}


@pytest.fixture(scope="module")
def sample_run(project_root):
    from retrieval_pipeline_tests.core.verifier.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    path = project_root / "data/samples/stdlib/multiple_choice.yaml"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    cases = load_suite(path).cases
    run = run_verification(cases)
    return path, digest, cases, run


def test_every_planted_fault_is_caught_and_nothing_else_is_flagged(sample_run, project_root):
    _, _, cases, run = sample_run
    faults = planted_faults(project_root)
    assert len(faults) == 6 and len(run.verdicts) == len(cases) == 32
    verdicts = {v.case_id: v for v in run.verdicts}
    for case_id, kind in faults.items():
        assert verdicts[case_id].verdict == EXPECTED_VERDICT[kind], (case_id, verdicts[case_id].reasons)
    flagged = {v.case_id for v in run.verdicts if v.verdict in ("Ambiguous", "Incorrect")}
    assert flagged == set(faults)
    # what the verifier proved instead, for the wrong answers
    assert verdicts["stdlib_mc:what_does_bisect_bisect_left_1_2_2_3_2_return"].proven_true == ["A"]
    assert verdicts["stdlib_mc:what_does_datetime_date_2024_1_31_isoweekday_retur"].proven_true == ["B"]
    assert verdicts["stdlib_mc:which_time_function_returns_the_processor_time_use"].proven_true == ["E"]
    # the rest is Valid or honestly Unverifiable, never guessed
    counts = {label: sum(v.verdict == label for v in run.verdicts) for label in ("Valid", "Unverifiable")}
    assert counts["Valid"] >= 20 and counts["Valid"] + counts["Unverifiable"] == 26


def test_report_and_remediation(sample_run, tmp_path):
    path, digest, cases, run = sample_run
    flagged = [v for v in run.verdicts if v.verdict in ("Ambiguous", "Incorrect")]
    flagged_cases = [c for c in cases if c.case_id in {v.case_id for v in flagged}]
    from retrieval_pipeline.core.verifier.sandbox import SandboxSettings  # noqa: PLC0415

    proposals = remediate(flagged, flagged_cases, OfflineProver(run.index), SandboxSettings())
    assert [p.status for p in proposals] == ["verified"] * 6
    out = write_proposals(proposals, cases, tmp_path / "proposals.yaml", inputs=[path])
    assert load_suite(out).total == 6 and len(load_suite(out).cases) == 6
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # the input is untouched

    report = quality_report(run.verdicts, run_meta(run, suite="stdlib"), proposals)
    written = write_quality_report(report, tmp_path / "quality_report.json")
    data = json.loads(written.read_text())
    assert data["counts"]["Incorrect"] == 4 and data["counts"]["Ambiguous"] == 2
    assert data["meta"]["python_version"].startswith("3.")
    assert data["seconds_per_question"]["mean"] > 0
    first = data["cases"][0]["evidence"][0]
    assert first["execution"]["test_source"].startswith('"""Proof for case')
    text = markdown_report(report)
    assert "## Incorrect (4)" in text and "## Proposed fixes" in text
