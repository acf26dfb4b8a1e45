"""End to end on the sample suite: which planted faults the verifier catches, and nothing else flagged.

The planted-fault list is read HERE, in the test, from PLANTED_FAULTS.md; the verifier never sees it.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from retrieval_pipeline.core.datasets.suite.reader import load_suite
from retrieval_pipeline.core.verifier.fixes.remediation import remediate, write_proposals
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.report import INCORRECT_IS_A_FINDING, markdown_report, quality_report, run_meta, write_quality_report
from retrieval_pipeline.core.verifier.verify import run_verification

pytestmark = pytest.mark.heavy

EXPECTED_VERDICT = {"wrong answer": "Incorrect", "drifted": "Incorrect", "ambiguous": "Ambiguous"}


def planted_faults(project_root) -> dict[str, str]:
    text = (project_root / "data/samples/stdlib/PLANTED_FAULTS.md").read_text()
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `([^`]+)` \| ([^|]+) \|", text, re.M)}


@pytest.fixture(scope="module")
def sample_run(project_root):
    from retrieval_pipeline_tests.core.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    path = project_root / "data/samples/stdlib/multiple_choice.yaml"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    cases = load_suite(path).cases
    run = run_verification(cases)
    return path, digest, cases, run


def test_every_planted_fault_is_caught_and_nothing_else_is_flagged(sample_run, project_root):
    _, _, cases, run = sample_run
    faults = planted_faults(project_root)
    assert len(faults) == 9 and len(run.verdicts) == len(cases) == 39
    verdicts = {v.case_id: v for v in run.verdicts}
    for case_id, kind in faults.items():
        assert verdicts[case_id].verdict == EXPECTED_VERDICT[kind], (case_id, verdicts[case_id].reasons)
    flagged = {v.case_id for v in run.verdicts if v.verdict in ("Ambiguous", "Incorrect")}
    assert flagged == set(faults)
    # what the verifier proved instead, for the wrong answers
    assert verdicts["stdlib_mc:what_does_bisect_bisect_left_1_2_2_3_2_return"].proven_true == ["A"]
    assert verdicts["stdlib_mc:what_does_datetime_date_2024_1_31_isoweekday_retur"].proven_true == ["B"]
    # its key is disproven and so are the other options; "None of the above" (the right answer, time.process_time) is
    # not proven by that alone (soundness rule 9): Incorrect, with nothing proven to propose instead
    assert verdicts["stdlib_mc:which_time_function_returns_the_processor_time_use"].proven_true == []
    assert verdicts["stdlib_mc:snippet_json_set"].proven_true == ["B"]  # TypeError, found by running the snippet
    assert verdicts["stdlib_mc:snippet_insort_position"].proven_true == ["B"]
    assert verdicts["stdlib_mc:snippet_stack_pop"].proven_true == ["A", "B"]
    # the rest is Valid or honestly Unverifiable, never guessed
    counts = {label: sum(v.verdict == label for v in run.verdicts) for label in ("Valid", "Unverifiable")}
    # 19, not 20: a key that only passes a necessary check leaves "None of the above" open (soundness rule 1)
    assert counts["Valid"] >= 19 and counts["Valid"] + counts["Unverifiable"] == 30


def test_questions_about_code_are_decided_by_running_their_snippets(sample_run):
    _, _, cases, run = sample_run
    snippet_ids = {c.case_id for c in cases if "code_snippet" in c.extra}
    assert len(snippet_ids) == 7
    verdicts = {v.case_id: v for v in run.verdicts if v.case_id in snippet_ids}
    # the four without a planted fault are Valid, each option settled by a run of the snippet
    valid = {"stdlib_mc:snippet_dataclass_mutable_default", "stdlib_mc:snippet_unique_enum", "stdlib_mc:snippet_defaultdict_counts",
             "stdlib_mc:snippet_chain_print"}  # fmt: skip
    assert {case_id for case_id, v in verdicts.items() if v.verdict == "Valid"} == valid
    for verdict in verdicts.values():
        assert all(e.claim.kind in ("snippet", "none_of_the_above") and e.state != "undecided" for e in verdict.evidence)
    dataclass_case = verdicts["stdlib_mc:snippet_dataclass_mutable_default"]
    assert "mutable default" in dataclass_case.evidence[0].note  # the exception the snippet really raised


def test_report_and_remediation(sample_run, tmp_path):
    path, digest, cases, run = sample_run
    flagged = [v for v in run.verdicts if v.verdict in ("Ambiguous", "Incorrect")]
    flagged_cases = [c for c in cases if c.case_id in {v.case_id for v in flagged}]
    from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings  # noqa: PLC0415

    proposals = remediate(flagged, flagged_cases, OfflineProver(run.index), SandboxSettings())
    # a new key Valid only by elimination (consistent, not proven true) needs review, naming what was tried (rule 4)
    review = [p for p in proposals if p.status != "verified"]
    assert len(proposals) == 9 and len(review) == 3, [(p.case_id, p.status, p.note) for p in proposals]
    assert all(p.note.startswith("needs review") for p in review), [p.note for p in review]
    by_note = {p.case_id: p.note for p in review}
    assert "(key consistent)" in by_note["stdlib_mc:which_expression_creates_an_empty_collections_dequ"]
    # a disproven key whose right answer is "None of the above": nothing is proven to put in its place (rule 9)
    assert "no other option is proven true" in by_note["stdlib_mc:which_time_function_returns_the_processor_time_use"]
    by_id = {p.case_id: p for p in proposals}
    assert by_id["stdlib_mc:snippet_json_set"].proposed["correct_answer"] == "B"
    assert by_id["stdlib_mc:snippet_stack_pop"].proposed["options"]["B"] == "`stack[-1] + 1` is `4`"
    out = write_proposals(proposals, cases, tmp_path / "proposals.yaml", inputs=[path])
    reloaded = load_suite(out, files_root=path.parent)  # snippet refs are relative to the sample folder
    assert reloaded.total == 9 and len(reloaded.cases) == 9
    assert sum("code_snippet" in c.extra for c in reloaded.cases) == 3
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # the input is untouched

    report = quality_report(run.verdicts, run_meta(run, suite="stdlib"), proposals)
    written = write_quality_report(report, tmp_path / "quality_report.json")
    data = json.loads(written.read_text())
    assert data["counts"]["Incorrect"] == 6 and data["counts"]["Ambiguous"] == 3
    assert data["meta"]["python_version"].startswith("3.")
    assert data["seconds_per_question"]["mean"] > 0
    first = data["cases"][0]["evidence"][0]
    assert first["execution"]["test_source"].startswith('"""Proof for case')
    text = markdown_report(report)
    assert "## Incorrect (6)" in text and "## Proposed fixes" in text
    # an Incorrect is a finding to review: the section says so once, before its cases (no other section does)
    assert text.count(INCORRECT_IS_A_FINDING) == 1 and text.index(INCORRECT_IS_A_FINDING) > text.index("## Incorrect (6)")
