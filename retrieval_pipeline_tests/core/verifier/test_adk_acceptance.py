"""Real acceptance: the ADK multiple-choice suite (written for google-adk 1.20) against an installed google-adk.

Needs the separate environment made by ``bash benchmarks/make_adk_env.sh`` (``.venvs/adk``; another
interpreter can be named with ``RP_ADK_PYTHON``) and ``../shared/data``. Skips, saying which, otherwise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from retrieval_pipeline.core.sources.suites import load_suite
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report, run_meta, write_quality_report
from retrieval_pipeline.core.verifier.sandbox import SandboxSettings
from retrieval_pipeline.core.verifier.verify import run_verification

SUITE = "adk/benchmark_definitions/configure_adk_features_mc/benchmark.yaml"


@pytest.mark.integration
def test_adk_mc_suite_against_installed_google_adk(project_root, shared_data, tmp_path):
    from retrieval_pipeline_tests.core.verifier.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    python = Path(os.environ.get("RP_ADK_PYTHON", project_root / ".venvs/adk/bin/python"))
    if not python.exists():
        pytest.skip(f"no google-adk environment at {python}: run `bash benchmarks/make_adk_env.sh`")
    suite = shared_data / SUITE
    if not suite.is_file():
        pytest.skip(f"ADK MC suite not found at {suite}")

    cases = load_suite(suite).cases
    settings = SandboxSettings(python=python)
    run = run_verification(cases, sandbox_settings=settings, library="google.adk")

    assert run.index.distribution == "google-adk" and run.index.version
    assert len(run.verdicts) == len(cases) == 61
    verdicts = {v.case_id.split(":", 1)[1]: v for v in run.verdicts}
    # stable facts of google-adk that the offline prover settles outright
    assert verdicts["which_is_the_correct_import_statement_for_the_runn"].verdict == "Valid"
    assert verdicts["which_runconfig_parameter_allows_you_to_limit_the_"].verdict == "Valid"  # E: max_llm_calls
    assert sum(v.verdict == "Valid" for v in run.verdicts) >= 10

    report = quality_report(run.verdicts, run_meta(run, suite="configure_adk_features_mc", settings=settings))
    path = write_quality_report(report, tmp_path / "quality_report.json")
    assert json.loads(path.read_text())["meta"]["library_version"] == run.index.version
    print(markdown_report(report))
