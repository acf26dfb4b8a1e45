"""Remediation that follows library drift: every fix re-verified against each library version.

Unit tests run remediation against a small model of two library versions (a set of accepted keyword names per
version, and the verdict rule written out by hand), so what is asserted does not come from the verifier itself.
The integration test runs the real LoopAgent question against google-adk 2.x and 1.20 (``.venvs/adk``, ``.venvs/adk120``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.fixes import remediation
from retrieval_pipeline.core.verifier.fixes.remediation import Environment, proposals_as_suite, propose_fix, remediate, stale_distractors
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.questions import compare_environments, compare_setting, propose_fixes
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report
from retrieval_pipeline.core.verifier.settings import VerifierSettings
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict

QUESTION = "You are using a `LoopAgent` and want to prevent it from running infinitely. Which parameter should you set?"
OPTIONS = {"A": "max_iterations", "B": "loop_limit", "C": "max_steps", "D": "timeout", "E": "None of the above"}
#: Two versions of a library, as the keyword names LoopAgent accepts in each (google-adk 2.x added ``timeout``).
ACCEPTS = {"new": {"max_iterations", "timeout", "sub_agents"}, "old": {"max_iterations", "sub_agents"}}
SETTINGS = {name: SandboxSettings(python=Path(f"/fake/{name}/python")) for name in ACCEPTS}


def version_of(settings: SandboxSettings) -> str:
    return next(name for name, s in SETTINGS.items() if s is settings)


def model_verdict(case_id: str, options: dict[str, str], marked: str, version: str) -> Verdict:
    """The verdict rule by hand: accepted options are consistent; Valid iff only the marked one is accepted."""
    accepted = [letter for letter, text in options.items() if text in ACCEPTS[version]]
    if marked not in accepted:
        return Verdict(case_id, "Incorrect", marked, [], [f"{marked} is not accepted in {version}"], [])
    if accepted == [marked]:
        return Verdict(case_id, "Valid", marked, [], ["by elimination"], [])
    return Verdict(case_id, "Unverifiable", marked, [], [f"{accepted} are accepted in {version}"], [])


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, dict[str, str]]]:
    """Replace the sandboxed verification by :func:`model_verdict`; records (version, options) per call."""
    seen: list[tuple[str, dict[str, str]]] = []

    def fake(case_id, question, options, marked, prover, settings, workers=2):
        seen.append((version_of(settings), dict(options)))
        return model_verdict(case_id, dict(options), marked, version_of(settings))

    monkeypatch.setattr(remediation, "verify_question", fake)
    return seen


def case(options: dict[str, str] = OPTIONS, marked: str = "A") -> Case:
    return Case("loop", "mc", "multiple_choice", "mc.yaml", 0, QUESTION, options=dict(options), correct_answer=marked, explanation="x")


def stale_verdict(states: dict[str, str] | None = None) -> Verdict:
    """The verdict against the new version: A and D both pass the keyword check, B and C are false."""
    states = states or {"A": "consistent", "B": "false", "C": "false", "D": "consistent", "E": "undecided"}
    evidence = [
        OptionEvidence(c.letter, c, "proof", None, states[c.letter], note=states[c.letter]) for c in decompose("loop", QUESTION, OPTIONS)
    ]  # type: ignore[arg-type]
    return Verdict("loop", "Unverifiable", "A", [], ["D is not ruled out"], evidence)


def env(version: str) -> Environment:
    return Environment(f"lib {version}", OfflineProver(), SETTINGS[version])


def fix(verdict: Verdict, *, compare: tuple[Environment, ...] = (), item: Case | None = None):
    return propose_fix(verdict, item or case(), OfflineProver(), SETTINGS["new"], label="lib new", compare=compare)


def test_a_stale_distractor_is_replaced_by_one_false_in_both_versions(calls):
    proposal = fix(stale_verdict(), compare=(env("old"),))
    assert proposal is not None and proposal.status == "verified"
    assert proposal.original_verdicts == {"lib new": "Unverifiable", "lib old": "Valid"}
    new_d = proposal.proposed["options"]["D"]
    assert new_d != "timeout" and all(new_d not in accepted for accepted in ACCEPTS.values())
    assert {k: v for k, v in proposal.proposed["options"].items() if k != "D"} == {k: v for k, v in OPTIONS.items() if k != "D"}
    assert proposal.proposed["correct_answer"] == "A"
    assert proposal.attempts[-1].verdicts == {"lib new": "Valid", "lib old": "Valid"}
    assert "library drift" in proposal.note and "lib old" in proposal.note and "'timeout'" in proposal.note
    assert [version for version, _ in calls] == ["old", "new", "old"]  # the original against old, then the fix against both


def test_without_drift_an_unverifiable_question_gets_no_fix(calls):
    assert fix(stale_verdict()) is None  # nothing to compare with
    assert remediate([stale_verdict()], [case()], OfflineProver(), SETTINGS["new"], label="lib new") == []
    both_new = Environment("lib new too", OfflineProver(), SETTINGS["new"])
    assert fix(stale_verdict(), compare=(both_new,)) is None  # as Unverifiable there: no sign of drift


@pytest.mark.parametrize(
    "states",
    [
        {"A": "consistent", "B": "false", "C": "undecided", "D": "consistent", "E": "undecided"},  # C is not known to pass
        {"A": "undecided", "B": "false", "C": "false", "D": "consistent", "E": "undecided"},  # the marked answer is open
        {"A": "consistent", "B": "false", "C": "false", "D": "false", "E": "undecided"},  # nothing stale
    ],
)
def test_only_distractors_passing_the_marked_answers_check_are_stale(states):
    assert stale_distractors(stale_verdict(states)) == []


def test_stale_distractors_are_the_passing_ones():
    assert [e.letter for e in stale_distractors(stale_verdict())] == ["D"]


def test_a_fix_valid_in_one_version_only_is_not_accepted(calls):
    # against "new", C ("timeout") is the only accepted option, so the marked D ("max_steps") is Incorrect;
    # the obvious fix (C becomes the answer) is Valid there, but in "old" nothing is accepted: not Valid.
    options = {"A": "loop_limit", "B": "count", "C": "timeout", "D": "max_steps", "E": "None of the above"}
    claims = decompose("loop", QUESTION, options)
    states = {"A": "false", "B": "false", "C": "true", "D": "false", "E": "false"}
    evidence = [OptionEvidence(c.letter, c, "proof", None, states[c.letter], note=states[c.letter]) for c in claims]  # type: ignore[arg-type]
    verdict = Verdict("loop", "Incorrect", "D", ["C"], ["D is proven false"], evidence)
    proposal = fix(verdict, compare=(env("old"),), item=case(options, marked="D"))
    assert proposal is not None and proposal.status == "needs_human_review" and proposal.proposed is None
    first = proposal.attempts[0]
    assert first.correct_answer == "C" and first.verdicts == {"lib new": "Valid", "lib old": "Incorrect"}
    assert any(r.startswith("against lib old:") for r in first.reasons)


def test_a_fix_not_valid_in_the_target_is_not_run_against_the_others(calls):
    # the marked D is accepted nowhere and nothing else is true: no candidate fix at all, and "old" only sees the original
    verdict = Verdict("loop", "Incorrect", "D", [], ["D is proven false"], stale_verdict().evidence)
    proposal = fix(verdict, compare=(env("old"),), item=case({**OPTIONS, "D": "max_steps"}, marked="D"))
    assert proposal is not None and proposal.attempts == [] and proposal.note.startswith("needs review: no candidate fix")
    assert calls == [("old", {**OPTIONS, "D": "max_steps"})]


def test_the_written_suite_and_the_report_carry_the_verdict_per_version(calls):
    proposals = remediate([stale_verdict()], [case()], OfflineProver(), SETTINGS["new"], label="lib new", compare=(env("old"),))
    row = proposals_as_suite(proposals, [case()])["benchmarks"][0]["remediation"]
    assert row["verdicts_before"] == {"lib new": "Unverifiable", "lib old": "Valid"}
    assert row["attempts"][-1]["verdicts"] == {"lib new": "Valid", "lib old": "Valid"}
    md = markdown_report(quality_report([stale_verdict()], {"suite": "mc"}, proposals))
    assert "as it stands: lib new: Unverifiable, lib old: Valid" in md
    assert "last fix tried: lib new: Valid, lib old: Valid" in md


def test_propose_fixes_passes_the_versions_on(calls):
    proposals = propose_fixes([stale_verdict()], [case()], OfflineProver(), SETTINGS["new"], label="lib new", compare=(env("old"),))
    assert [p.status for p in proposals] == ["verified"]


def test_the_compare_setting_is_read_with_a_default():
    assert compare_setting(VerifierSettings()) == []
    assert compare_setting(SimpleNamespace(compare_pythons=["a/python", Path("b/python")])) == [Path("a/python"), Path("b/python")]  # type: ignore[arg-type]


def test_a_missing_comparison_interpreter_names_the_setting_and_the_dataset(tmp_path):
    missing = tmp_path / "nope" / "python"
    with pytest.raises(InputError) as error:
        compare_environments([missing], VerifierSettings(), dataset="adk", registry_path="datasets.yaml")
    text = str(error.value)
    assert "verifier.compare_pythons[0]" in text and str(missing) in text and "does not exist" in text
    assert "dataset adk" in text and "datasets.yaml" in text


def test_the_library_under_test_is_not_a_comparison(tmp_path):
    python = tmp_path / "python"
    python.write_text("")
    with pytest.raises(InputError, match=r"compare_pythons\[0\].*names the library under test itself"):
        compare_environments([python], VerifierSettings(), dataset="adk", target=python)


def test_a_broken_comparison_interpreter_names_it(tmp_path, sandbox):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(InputError) as error:
        compare_environments([broken], VerifierSettings(timeout_s=20), dataset="adk")
    assert "verifier.compare_pythons[0]" in str(error.value) and str(broken) in str(error.value)
    assert "cannot be probed" in str(error.value)


# --------------------------------------------------------------------------------------------------
# Real: the LoopAgent `timeout` distractor, stale in google-adk 2.x

ADK_SUITE = "adk/benchmark_definitions/configure_adk_features_mc/benchmark.yaml"
LOOP_CASE = "configure_adk_features_mc:you_are_using_a_loopagent_and_want_to_prevent_it_f"


@pytest.mark.integration
@pytest.mark.heavy
def test_the_loop_agent_timeout_distractor_is_fixed_for_both_google_adk_versions(project_root, shared_data):
    from retrieval_pipeline_tests.core.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    from retrieval_pipeline.core.datasets.suite.reader import load_suite  # noqa: PLC0415
    from retrieval_pipeline.core.verifier.verify import run_verification  # noqa: PLC0415

    new, old = project_root / ".venvs/adk/bin/python", project_root / ".venvs/adk120/bin/python"
    for python in (new, old):
        if not python.exists():
            pytest.skip(f"no google-adk environment at {python}: run `make adk-env` (ADK_VERSION=1.20.0 for .venvs/adk120)")
    if not (shared_data / ADK_SUITE).is_file():
        pytest.skip(f"ADK MC suite not found at {shared_data / ADK_SUITE}")
    loop = [c for c in load_suite(shared_data / ADK_SUITE).cases if c.case_id == LOOP_CASE]
    settings = VerifierSettings(python=new, library="google-adk", import_name="google.adk")
    target = SandboxSettings(python=new)
    run = run_verification(loop, sandbox_settings=target, library="google-adk", import_name="google.adk", parallel=1)
    assert run.verdicts[0].verdict == "Unverifiable" and [e.letter for e in stale_distractors(run.verdicts[0])] == ["D"]
    compare = compare_environments([old], settings, dataset="adk")
    assert compare[0].label == "google-adk 1.20.0"
    proposals = remediate(run.verdicts, loop, OfflineProver(run.index), target, label=f"google-adk {run.index.version}", compare=compare)
    # the key only passes a necessary check (the keyword exists), so "None of the above" stays open and the question is
    # not Valid on 1.20 either (docs/verifier.md, soundness rule 1): no version shows the drift, and no fix is proposed
    assert proposals == []
