"""The library's distribution and import name are separate, a wrong setting stops the verifier,
and a name the probe may have missed is undecided, never false.

Runs against an ADK-shaped library in a throwaway environment (:mod:`fake_adk`); the same checks against
the real google-adk are in ``test_adk_acceptance.py``.
"""

from __future__ import annotations

import time

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex, LibrarySettingError, ProbeCoverage, probe_environment
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report, run_meta
from retrieval_pipeline.core.verifier.verify import run_verification, verify_question
from retrieval_pipeline_tests.core.verifier import fake_adk


@pytest.fixture(scope="module")
def acme(acme_offline):
    """The ADK-shaped environment's sandbox settings (the verifier conftest's session environment; skips without a sandbox)."""
    return acme_offline[0]


@pytest.fixture(scope="module")
def acme_index(acme_offline):
    return acme_offline[1].index  # probe_environment(acme, fake_adk.DISTRIBUTION, import_name=fake_adk.IMPORT_NAME)


def cases():
    return [case for case, _ in fake_adk.SUITE]


def expected():
    return {case.case_id: verdict for case, verdict in fake_adk.SUITE}


# --------------------------------------------------------------------------------------------------
# Wrong settings: an error naming the setting, never verdicts


def test_an_import_name_that_cannot_be_imported_stops_the_verifier(acme):
    with pytest.raises(LibrarySettingError) as caught:
        run_verification(cases(), sandbox_settings=acme, import_name="acme-adk")
    message = str(caught.value)
    assert caught.value.setting == "verifier.import_name" and caught.value.value == "acme-adk"
    assert message.startswith(f"verifier.import_name 'acme-adk' cannot be imported in {acme.python}")
    assert "No module named 'acme-adk'" in message


def test_a_distribution_that_is_not_installed_stops_the_verifier(acme):
    with pytest.raises(LibrarySettingError, match=r"verifier\.library 'acme-adkk' is not an installed distribution in ") as caught:
        run_verification(cases(), sandbox_settings=acme, library="acme-adkk")
    assert caught.value.setting == "verifier.library"


def test_an_import_name_the_distribution_does_not_install_is_refused(acme):
    with pytest.raises(LibrarySettingError, match=r"verifier\.import_name 'acme_one' is not installed by verifier\.library 'acme-adk'"):
        probe_environment(acme, "acme-adk", import_name="acme_one")


def test_a_distribution_with_several_modules_needs_the_import_name(acme):
    with pytest.raises(LibrarySettingError, match=r"cannot tell which module .*acme-multi.* \(found: acme_one, acme_two\)"):
        probe_environment(acme, "acme-multi")
    assert probe_environment(acme, "acme-multi", import_name="acme_one").distribution == "acme-multi"


def test_the_import_name_is_derived_from_the_distribution_record(acme, acme_index):
    derived = probe_environment(acme, "acme-adk")
    assert (derived.import_name, derived.import_name_source) == ("acme.adk", "RECORD of acme-adk")
    assert (derived.distribution, derived.version) == ("acme-adk", "1.2.3")
    assert derived.names == acme_index.names
    given = probe_environment(acme, None, import_name="acme.adk")  # the distribution is found from the module
    assert (given.distribution, given.version, given.import_name_source) == ("acme-adk", "1.2.3", "verifier.import_name")


# --------------------------------------------------------------------------------------------------
# Coverage, and what an incomplete probe may decide


def test_the_probe_records_its_coverage(acme_index):
    coverage = acme_index.coverage
    assert not coverage.complete and coverage.budget_hit is None and coverage.not_reached == []
    assert coverage.modules_found == 15 and coverage.modules_imported == 11
    assert set(coverage.failed) == {
        "acme.adk.agents.remote_a2a_agent",
        "acme.adk.tools.openapi_tool",
        "acme.adk.tools.openapi_tool.openapi_toolset",
        "acme.adk.plugins",
    }
    assert coverage.failed["acme.adk.plugins"] == "ModuleNotFoundError: No module named 'plugin_extra_not_installed'"
    assert coverage.summary() == "11 of 15 modules imported, 4 failed, 0 not reached; time budget not hit"
    assert acme_index.resolve("ParallelAgent") == ("path", "acme.adk.agents.parallel_agent.ParallelAgent")
    assert acme_index.resolve("runner") == ("path", "acme.adk.runners.Runner")
    assert acme_index.module_aliases["types"] == "acme.adk.models.types"


def test_absent_names_are_undecided_when_the_probe_may_have_missed_them(acme_index):
    kind, reason = acme_index.absent("RemoteA2aAgent")
    assert kind == "unprobed" and "acme.adk.agents.remote_a2a_agent" in reason and "a2a_sdk_not_installed" in reason
    kind, reason = acme_index.absent("OpenAPIToolset")
    assert kind == "unprobed" and "openapi_toolset" in reason and "yaml_parser_not_installed" in reason
    kind, reason = acme_index.absent("SaveFilesAsArtifactsPlugin")  # only mentioned by a module that failed
    assert kind == "unprobed" and "acme.adk.plugins mentions it" in reason
    kind, reason = acme_index.absent("ConcurrentAgent")
    assert kind == "missing" and "4 failed" in reason and "no module the probe did not import mentions it" in reason
    assert acme_index.absent("no_such_thing") is None  # lower case, no class of that name: left to the proof


def test_a_name_beyond_the_time_budget_is_undecided_never_false(acme):
    index = probe_environment(acme, "acme-adk", cpu_budget_s=0.0)
    assert index.coverage.budget_hit == "cpu" and "acme.adk.tools.function_tool" in index.coverage.not_reached
    assert index.resolve("Runner") is not None  # the root module is always indexed
    assert index.absent("FunctionTool")[0] == "unprobed" and "time budget ran out" in index.absent("FunctionTool")[1]
    verdict = verify_question("c", "Which class wraps a Python function as a tool?",
                              {"A": "FunctionTool", "B": "MagicTool", "E": "None of the above"}, "E",
                              OfflineProver(index), acme)  # fmt: skip
    states = {e.letter: e.state for e in verdict.evidence}
    assert states == {"A": "undecided", "B": "false", "E": "undecided"} and verdict.verdict == "Unverifiable"


def test_absent_without_a_probe_gap_is_missing():
    index = LibraryIndex("lib", "lib", "1", "3.11", "python", names={"Known": ["lib.Known"]},
                         source_defs={"Known": "lib", "Nested": "lib.sub"}, coverage=ProbeCoverage(2, 2))  # fmt: skip
    assert index.absent("Other")[0] == "missing" and "every module imported" in index.absent("Other")[1]
    assert index.absent("Nested")[0] == "unprobed"  # defined in the source, exposed by no module: not "false"


# --------------------------------------------------------------------------------------------------
# Verdicts: right setting, idle and busy machine


def verdicts_of(acme, **kwargs):
    run = run_verification(cases(), sandbox_settings=acme, library=fake_adk.DISTRIBUTION, import_name=fake_adk.IMPORT_NAME, **kwargs)
    return run, {v.case_id: v.verdict for v in run.verdicts}


@pytest.mark.heavy
def test_adk_shaped_suite_verdicts_are_right_and_the_same_under_a_cpu_hog(acme, acme_index):
    idle_run, idle = verdicts_of(acme, index=acme_index)
    assert idle == expected(), {v.case_id: v.reasons for v in idle_run.verdicts if idle[v.case_id] != expected()[v.case_id]}
    moved = {v.case_id: v for v in idle_run.verdicts}["acme_mc:openapi_moved"]
    a = next(e for e in moved.evidence if e.letter == "A")
    assert a.state == "undecided" and "yaml_parser_not_installed" in a.note  # why it is not settled, in the evidence

    started = time.monotonic()
    with fake_adk.cpu_hog(max_seconds=600) as hog:
        busy_run, busy = verdicts_of(acme)  # probed again, under load
        assert hog.all_running(), "the CPU hog ended before the verification did"
    assert busy == idle
    assert busy_run.index.coverage.summary() == idle_run.index.coverage.summary()
    assert time.monotonic() - started < 600


def test_the_quality_report_carries_the_probe_coverage(acme, acme_index):
    run = run_verification(cases()[:1], sandbox_settings=acme, index=acme_index)
    report = quality_report(run.verdicts, run_meta(run, suite="acme"))
    probe = report["meta"]["probe"]
    assert probe["import_name"] == "acme.adk" and probe["distribution"] == "acme-adk" and probe["version"] == "1.2.3"
    assert (probe["modules_found"], probe["modules_imported"], probe["modules_failed"], probe["modules_not_reached"]) == (15, 11, 4, 0)
    assert probe["complete"] is False and probe["budget_hit"] is None and probe["budget"]["cpu_s"] == 150.0
    assert probe["failed"]["acme.adk.plugins"] == "ModuleNotFoundError: No module named 'plugin_extra_not_installed'"
    assert probe["failure_causes"]["ModuleNotFoundError: No module named 'yaml_parser_not_installed'"] == 2
    text = markdown_report(report)
    assert "## Library probe" in text and "11 of 15 modules imported, 4 failed, 0 not reached; time budget not hit" in text
    assert "undecided, never false" in text
    # a caller with its own meta passes the index instead
    own = quality_report(run.verdicts, {"dataset": "acme"}, index=acme_index)
    assert own["meta"]["probe"]["modules_failed"] == 4


def test_prover_binds_absent_names_by_what_the_probe_saw(acme_index):
    prover = OfflineProver(acme_index)
    claims = decompose("c", "Which agent class talks to a remote agent over A2A?", {"A": "RemoteA2aAgent", "B": "A2aProxyAgent"})
    a, b = (prover.prove(c).test_source for c in claims)
    assert "'unprobed'" in a and "'missing'" not in a
    assert "'missing'" in b


def test_a_variable_named_after_a_class_is_no_value_for_a_call_to_evaluate():
    """Kind of claim: a call evaluates. `text` in `Toolset(spec_str=text)` is a string the user holds; the index would
    bind it to a class `Text` (its rule for `runner` -> `Runner`), and the call, given the class, failed for that alone:
    a right key was false. In an expression the name is left unprobed (undecided); in a name lookup it still binds."""
    index = LibraryIndex("lib", "lib", "1", "3.11", "python", names={"Text": ["lib.Text"], "Toolset": ["lib.Toolset"]},
                         coverage=ProbeCoverage(2, 2))  # fmt: skip
    prover = OfflineProver(index)
    call = decompose("c", "Which call builds the toolset from the spec held in `text`?", {"A": "`Toolset(spec_str=text)`"})[0]
    assert call.kind == "expression"
    assert prover._names(call, ["text"])["text"][0] == "unprobed" and prover._names(call, ["Toolset"])["Toolset"] == ("path", "lib.Toolset")
    lookup = decompose("l", "Which `Text` attribute holds the body?", {"A": "`text.body`"})[0]
    assert prover._names(lookup, ["text"]).get("text", ("path", ""))[0] == "path"


def test_a_value_an_option_passes_that_the_library_does_not_define_is_no_evidence_against_the_call():
    """Kind of claim: a call evaluates (soundness rule 10, a value the user holds). `Forecast` in
    `llm_request.set_output_schema(Forecast)` is the user's pydantic model ("a pydantic model" in the question): the
    library defines it nowhere, and that made every option's call false, so the right key was disproven. A name only
    passed as a value is left unprobed (undecided); one the call is made on or looked up on is still missing."""
    from retrieval_pipeline.core.verifier.proofs.provers import passed_only  # noqa: PLC0415

    assert passed_only("llm_request.set_output_schema(Forecast)") == {"Forecast"}
    assert passed_only("f(Forecast, Forecast.x)") == set() and passed_only("Forecast(x=1)") == set()
    index = LibraryIndex("lib", "lib", "1", "3.11", "python", names={"Request": ["lib.Request"]}, coverage=ProbeCoverage(2, 2))
    prover = OfflineProver(index)
    question = "Which `Request` call makes the model answer as JSON matching your pydantic model?"
    call = decompose("c", question, {"A": "`Request().set_output_schema(Forecast)`"})[0]
    assert call.kind == "expression"
    assert prover._names(call, ["Forecast"])["Forecast"][0] == "unprobed"
    made_on = decompose("m", question, {"A": "`Forecast.from_request(Request())`"})[0]
    assert prover._names(made_on, ["Forecast"])["Forecast"][0] == "missing"


# --------------------------------------------------------------------------------------------------
# A busy machine: a proof stopped by the wall clock is run again with more time


class _SlowProver:
    """Proves anything true, after sleeping longer than the sandbox's wall-clock limit."""

    name = "slow"

    def prove(self, claim):
        from retrieval_pipeline.core.verifier.proofs.proof_source import EVIDENCE_FILE  # noqa: PLC0415
        from retrieval_pipeline.core.verifier.proofs.provers import Proof  # noqa: PLC0415

        source = (
            "import json, time\n\n\ndef test_option_A():\n    time.sleep(2.5)\n"
            f"    with open({EVIDENCE_FILE!r}, 'w') as handle:\n        json.dump({{'option_true': True, 'reason': 'slept'}}, handle)\n"
        )
        return Proof(claim, source, "proof", "test_option_A.py")


def test_a_proof_stopped_by_the_wall_clock_is_retried_with_more_time(sandbox):
    import dataclasses  # noqa: PLC0415

    settings = dataclasses.replace(sandbox, timeout_s=2.0)
    verdict = verify_question("c", "Which is the correct import statement for `dumps`?", {"A": "from json import dumps"}, "A",
                              _SlowProver(), settings)  # fmt: skip
    evidence = verdict.evidence[0]
    assert evidence.state == "true" and evidence.outcome == "passed" and evidence.duration_s > 2.0


# --------------------------------------------------------------------------------------------------
# The registry: two names, and the venv's interpreter as written


def test_verifier_settings_name_the_distribution_and_the_import_name_apart(tmp_path):
    from pydantic import ValidationError  # noqa: PLC0415

    from retrieval_pipeline.core.registry.load import _resolve_paths
    from retrieval_pipeline.core.verifier.settings import VerifierSettings

    settings = VerifierSettings(library="google-adk", import_name="google.adk")
    assert (settings.library, settings.import_name) == ("google-adk", "google.adk")
    with pytest.raises(ValidationError, match="import_name"):
        VerifierSettings(import_name="google-adk")  # a distribution name is no module name
    # a venv's bin/python is a symlink to its base interpreter: resolving it would leave the venv
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").symlink_to("/usr/bin/python3")
    raw = _resolve_paths({"verifier": {"python": "env/bin/python", "library": "x"}}, tmp_path)
    assert raw["verifier"] == {"python": str(tmp_path / "env" / "bin" / "python"), "library": "x"}
