"""Real acceptance: the ADK multiple-choice suite (written for google-adk 1.20) against an installed google-adk.

Needs the separate environment made by ``make adk-env`` (``bash benchmarks/make_adk_env.sh``; ``.venvs/adk``;
another interpreter can be named with ``RP_ADK_PYTHON``) and ``../shared/data``. Skips, saying which, otherwise.

The registry's own verifier setting is used (``library: google-adk`` is the distribution,
``import_name: google.adk`` the module probed); a wrong import name is an error, not verdicts; and the
verdicts do not change when every core is busy.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from retrieval_pipeline.core.datasets.suite.reader import load_suite
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.library_index import LibrarySettingError
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report, run_meta, write_quality_report
from retrieval_pipeline.core.verifier.verdicts.verdict import decide
from retrieval_pipeline.core.verifier.verify import run_verification
from retrieval_pipeline_tests.core.verifier.fake_adk import cpu_hog

pytestmark = pytest.mark.heavy

SUITE = "adk/benchmark_definitions/configure_adk_features_mc/benchmark.yaml"
DATASET = "adk_v1_24_1"
#: Questions about names (exists, import, constructor keyword, parameter) proven again with every core busy: the
#: kind a timeout must not turn into "not defined anywhere". Eight keep the test at about half a minute;
#: ``test_library_probe.py`` runs a whole ADK-shaped suite with known verdicts under the same load.
NAMING_UNDER_LOAD = 8
#: Classes a slow or failed probe calls "not defined anywhere in google-adk"; all exist.
HARD_TO_PROBE_NAMES = ("ParallelAgent", "OpenAPIToolset", "CredentialManager", "SaveFilesAsArtifactsPlugin", "Runner", "runner")


@pytest.fixture(scope="module")
def adk(project_root, shared_data):
    """The suite's cases, the registry's verifier settings and the sandbox for the google-adk environment."""
    from retrieval_pipeline_tests.core.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    verifier = load_registry().get(DATASET).verifier
    python = Path(os.environ.get("RP_ADK_PYTHON") or verifier.python or project_root / ".venvs/adk/bin/python")
    if not python.exists():
        pytest.skip(f"no google-adk environment at {python}: run `make adk-env` (bash benchmarks/make_adk_env.sh)")
    suite = shared_data / SUITE
    if not suite.is_file():
        pytest.skip(f"ADK MC suite not found at {suite}")
    settings = SandboxSettings(python=python, timeout_s=verifier.timeout_s, memory_mb=verifier.memory_mb)
    return load_suite(suite).cases, verifier, settings


@pytest.fixture(scope="module")
def adk_run(adk):
    cases, verifier, settings = adk
    return run_verification(cases, sandbox_settings=settings, library=verifier.library, import_name=verifier.import_name)


@pytest.mark.integration
def test_the_registry_names_the_distribution_and_the_import_name_apart(adk):
    _, verifier, _ = adk
    assert (verifier.library, verifier.import_name) == ("google-adk", "google.adk")
    assert verifier.python is None or verifier.python.name == "python" and verifier.python.parent.name == "bin"  # the venv's, not its base


@pytest.mark.integration
@pytest.mark.parametrize(("library", "import_name", "setting"), [
    (None, "google-adk", "verifier.import_name"),  # the distribution name where the module belongs
    ("google-adk", "google-adk", "verifier.import_name"),
    ("google-adkk", None, "verifier.library"),
])  # fmt: skip
def test_a_wrong_library_setting_is_an_error_not_verdicts(adk, library, import_name, setting):
    cases, _, settings = adk
    with pytest.raises(LibrarySettingError) as caught:
        run_verification(cases, sandbox_settings=settings, library=library, import_name=import_name)
    assert caught.value.setting == setting and str(settings.python) in str(caught.value)
    assert str(caught.value).startswith(setting)


@pytest.mark.integration
def test_adk_mc_suite_against_installed_google_adk(adk, adk_run, tmp_path):
    cases, _, settings = adk
    run = adk_run
    assert run.index.distribution == "google-adk" and run.index.version and run.index.import_name == "google.adk"
    assert len(run.verdicts) == len(cases) == 61
    for name in HARD_TO_PROBE_NAMES:  # found, or at worst undecided: never "not defined anywhere"
        assert run.index.resolve(name) is not None or run.index.absent(name)[0] == "unprobed", name
    verdicts = {v.case_id.split(":", 1)[1]: v for v in run.verdicts}
    # stable facts of google-adk that the offline prover settles outright
    assert verdicts["which_is_the_correct_import_statement_for_the_runn"].verdict == "Valid"
    # E (max_llm_calls, not among A..D): every regular option is disproven, which alone proves no "None of the
    # above" (soundness rule 9), so the question stays undecided rather than Valid by elimination
    limit = verdicts["which_runconfig_parameter_allows_you_to_limit_the_"]
    assert limit.verdict == "Unverifiable" and all(e.state == "false" for e in limit.evidence if e.letter != "E")
    assert sum(v.verdict == "Valid" for v in run.verdicts) >= 10
    assert [v.case_id for v in run.verdicts if v.verdict == "Incorrect"] == []

    report = quality_report(run.verdicts, run_meta(run, suite="configure_adk_features_mc", settings=settings))
    path = write_quality_report(report, tmp_path / "quality_report.json")
    data = json.loads(path.read_text())
    assert data["meta"]["library_version"] == run.index.version
    probe = data["meta"]["probe"]
    assert probe["modules_imported"] > 500 and probe["modules_failed"] == len(run.index.coverage.failed)
    assert probe["budget_hit"] is None
    print(markdown_report(report))


@pytest.mark.integration
def test_adk_verdicts_are_the_same_under_a_cpu_hog(adk, adk_run):
    """Probe and proofs again with every core busy: the same verdicts as on the idle machine."""
    cases, verifier, settings = adk
    naming = [c for c in cases if any(claim.kind in ("exists", "import", "constructor_kwarg", "signature_param")
                                      for claim in decompose(c.case_id, c.query, c.options or {}))][:NAMING_UNDER_LOAD]  # fmt: skip
    idle = {v.case_id: v.verdict for v in adk_run.verdicts if v.case_id in {c.case_id for c in naming}}
    with cpu_hog(max_seconds=900) as hog:
        busy_run = run_verification(naming, sandbox_settings=settings, library=verifier.library, import_name=verifier.import_name)
        assert hog.all_running(), "the CPU hog ended before the verification did"
    assert {v.case_id: v.verdict for v in busy_run.verdicts} == idle
    assert busy_run.index.coverage.summary() == adk_run.index.coverage.summary()


#: Questions whose options the atom claim kinds settle, with the library facts that settle them (true in google-adk 1.20
#: and 2.13 alike, read off the installed library by hand): ``App`` has ``events_compaction_config``,
#: ``context_cache_config``; ``Runner`` takes no ``auto_compact``/``enable_cache``; ``LlmAgent`` has ``output_schema`` and
#: ``input_schema`` but no ``cache``/``max_history``/``response_schema``; ``types.Content`` takes ``parts``/``role`` only and
#: ``types.Part`` no ``image``; ``LoggingPlugin`` derives from ``BasePlugin`` and ``EventsCompactionConfig`` does not;
#: ``adk deploy cloud_run`` has ``--service_name`` and none of the four flags offered.
ATOM_KIND_VALID = {
    "how_do_you_configure_an_app_to_automatically_compa": "compound",
    "how_do_you_enable_context_caching_for_an_entire_ap": "compound",
    "you_want_to_automatically_summarize_old_events_to_": "compound",
    "llmagent_pydantic_schema_parameters": "compound",
    "you_want_to_pass_an_image_to_an_llmagent_as_part_o": "compound",
    "which_plugin_would_you_use_to_log_all_agent_intera": "exists",
    "when_deploying_to_cloud_run_using_adk_deploy_cloud": "cli_option",
}


@pytest.mark.integration
def test_atom_claim_kinds_settle_more_adk_questions_and_disprove_no_marked_answer(adk_run):
    verdicts = {v.case_id.split(":", 1)[1]: v for v in adk_run.verdicts}
    for name, kind in ATOM_KIND_VALID.items():
        verdict = verdicts[name]
        all_states = {e.letter: e.state for e in verdict.evidence}
        states = {e.letter: e.state for e in verdict.evidence if e.claim.kind not in ("none_of_the_above", "all_of_the_above")}
        # every distractor disproven and the key passing its check; Valid only when the key is proven true, since a
        # necessary check leaves "None of the above" open (docs/verifier.md, soundness rule 1)
        assert {s for letter, s in states.items() if letter != verdict.marked} <= {"false"}, (name, verdict.reasons)
        assert verdict.verdict in ("Valid", "Unverifiable"), (name, verdict.reasons)
        if verdict.marked not in states:  # the key is "None of the above": disproofs alone never prove it (rule 9)
            assert all_states[verdict.marked] == "undecided" and "does not prove" in verdict.reasons[0], (name, verdict.reasons)
            assert verdict.verdict == "Unverifiable", name
        else:
            assert all_states[verdict.marked] in ("true", "consistent"), (name, verdict.reasons)
            assert verdict.verdict == "Valid" or verdict.reasons[0].endswith("E are not ruled out"), (name, verdict.reasons)
        assert any(e.claim.kind == kind and e.decided_by == "offline" for e in verdict.evidence), name
    assert [v.case_id for v in adk_run.verdicts if v.verdict == "Incorrect"] == []
    plugin = verdicts["which_plugin_would_you_use_to_log_all_agent_intera"]
    assert "BasePlugin" in {e.letter: e.note for e in plugin.evidence}["A"]  # EventsCompactionConfig is no plugin


#: Keys proven by the library's own words or declared types (the same in google-adk 1.20 and 2.13): the field
#: descriptions of ``RunConfig.support_cfc`` ("Compositional Function Calling") and ``RunConfig.proactivity``, the
#: docstring of ``App`` ("the top-level container ... application"), and ``LlmAgent.tools``, declared ``list[...]``.
PROVEN_KEYS = (
    "what_does_runconfig_support_cfc_control",
    "what_does_runconfig_proactivity_control",
    "what_is_app_primarily_used_for",
    "you_want_to_configure_an_llmagent_with_a_specific_",
)


@pytest.mark.integration
def test_real_keys_proven_by_docs_or_declared_types_catch_a_mark_moved_to_none_of_the_above(adk_run):
    verdicts = {v.case_id.split(":", 1)[1]: v for v in adk_run.verdicts}
    for name in PROVEN_KEYS:
        verdict = verdicts[name]
        key = verdict.marked
        states = {e.letter: e.state for e in verdict.evidence}
        assert [letter for letter, state in states.items() if state == "true"] == [key], (name, states)
        assert {e.letter: e.decided_by for e in verdict.evidence}[key] == "offline"
        # the same evidence with the mark on "None of the above" (E): a planted fault the verifier must catch
        assert decide(verdict.case_id, "E", copy.deepcopy(verdict.evidence)).verdict == "Incorrect", name
