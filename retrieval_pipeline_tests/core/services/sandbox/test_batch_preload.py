"""A batch's runner imports the library's modules once (``SandboxSettings.preload``), and only clean imports.

The proofs of a question name the same modules of the library under test; importing them once in the runner,
before it forks the proofs, saves an import per proof. A proof must still see every import that shows
something (output, a warning, an error) happen itself: then the runner starts again without preloading.
Standard-library modules stand in for the library: ``colorsys`` imports quietly, ``this`` prints the Zen of
Python when imported.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from retrieval_pipeline.core.services.sandbox.batch import MAX_PRELOAD, preload_names
from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest_batch
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings


def test_preloaded_are_the_names_under_the_packages_that_two_files_contain():
    sources = [
        'X = "google.adk.agents.LlmAgent"  # google.adkfoo, mygoogle.adk.tools',
        "import google.adk.agents\nY = 'google.adk.agents.LlmAgent'\nZ = 'google.genai.types'",
        "google.adk.runners.Runner google.genai.types",
        "google.adk.runners.Runner google.adkbar",
    ]
    assert preload_names(sources, ["google.adk", "google.genai.types"]) == [
        "google.adk.agents.LlmAgent",
        "google.adk.runners.Runner",
        "google.genai.types",
    ]
    assert preload_names(sources, []) == [] and preload_names(sources[:1], ["google.adk"]) == []  # nothing to share
    many = [" ".join(f"pkg.m{i}" for i in range(MAX_PRELOAD + 5))] * 2
    assert len(preload_names(many, ["pkg"])) == MAX_PRELOAD


def _seen_by_each(settings: SandboxSettings, module: str, proofs: int = 3) -> list[str]:
    """Per proof: whether ``module`` was in ``sys.modules`` when the proof started, then what importing it printed."""
    source = f"""import sys

ALREADY = {module!r} in sys.modules  # names {module} for the runner to find


def test_it():
    import {module}
    print("ALREADY", ALREADY)
    assert False  # pytest shows what the test printed
"""
    results = run_pytest_batch([(source, f"test_p{i}.py") for i in range(proofs)], settings)
    assert all(result is not None and result.outcome == "failed" for result in results), results
    return [result.stdout for result in results if result is not None]


def test_a_module_the_proofs_name_is_imported_once_before_they_fork(sandbox):
    assert all("ALREADY False" in out for out in _seen_by_each(sandbox, "colorsys"))  # no preloading asked for
    preloaded = dataclasses.replace(sandbox, preload=("colorsys",))
    assert all("ALREADY True" in out for out in _seen_by_each(preloaded, "colorsys"))


def test_an_import_that_prints_is_left_to_each_proof(sandbox):
    for out in _seen_by_each(dataclasses.replace(sandbox, preload=("this",)), "this"):
        assert "ALREADY False" in out and "Beautiful is better than ugly." in out  # the runner started afresh


def _warns_on_import() -> str | None:
    """A standard-library module of this interpreter whose import warns (deprecated modules), if there is one."""
    for name in ("asyncore", "asynchat", "imp", "telnetlib", "cgi"):
        code = f"import warnings\nwarnings.simplefilter('error')\nimport {name}"
        if subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 1:
            found = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True)
            if found.returncode == 0:
                return name
    return None


def test_an_import_that_warns_is_left_to_each_proof(sandbox):
    module = _warns_on_import()
    if module is None:
        pytest.skip(f"no standard-library module of Python {sys.version.split()[0]} warns when imported")
    for out in _seen_by_each(dataclasses.replace(sandbox, preload=(module,)), module):
        assert "ALREADY False" in out
