"""The quality report's Markdown: a title naming the dataset and the library, no ``None``, file names in backticks."""

from __future__ import annotations

import platform
import re

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex, ProbeCoverage
from retrieval_pipeline.core.verifier.questions import check_questions
from retrieval_pipeline.core.verifier.report import library_label, markdown_report, markdown_text, quality_report, run_meta
from retrieval_pipeline.core.verifier.settings import VerifierSettings
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict
from retrieval_pipeline.core.verifier.verify import VerificationRun

INIT_FAILURE = "ImportError: cannot import name 'Tool' from 'acme.tools' (/venv/lib/python3.11/site-packages/acme/tools/__init__.py)"


def _verdict(case_id: str, label: str, reason: str) -> Verdict:
    claim = Claim(case_id, "A", "from acme.tools import Tool", "import", "h", None, {})  # type: ignore[arg-type]
    evidence = OptionEvidence("A", claim, "proof", None, "undecided", note=reason)
    return Verdict(case_id, label, "A", [], [reason], [evidence], undecided=["A"], duration_s=0.42)  # type: ignore[arg-type]


def _index(*, import_name: str | None, distribution: str | None, version: str | None) -> LibraryIndex:
    coverage = ProbeCoverage(modules_found=3, modules_imported=2, failed={"acme.tools": INIT_FAILURE}, seconds=1.5, cpu_seconds=1.2)
    return LibraryIndex(import_name, distribution, version, "3.11.7", "/venv/bin/python", coverage=coverage,
                        import_name_source="verifier.import_name" if import_name else None)  # fmt: skip


def _headline(markdown: str) -> str:
    title = markdown.splitlines()[0]
    assert title.startswith("# Question verifier: ")
    return title[len("# Question verifier: ") :]


def _file_names_in_backticks(markdown: str) -> None:
    """Every ``__init__.py`` is inside a code span; none is left to render as a bold "init"."""
    assert "`/venv/lib/python3.11/site-packages/acme/tools/__init__.py`" in markdown
    outside = re.sub(r"`[^`]*`", "", markdown)
    assert "__init__" not in outside and "__" not in outside


def test_a_library_report_names_dataset_library_and_version_and_shows_no_none():
    index = _index(import_name="acme.adk", distribution="acme-adk", version="1.2.3")
    run = VerificationRun([_verdict("acme:1", "Unverifiable", INIT_FAILURE)], index, "offline", 3.21, [])
    report = quality_report(run.verdicts, {**run_meta(run, suite="acme_v1"), "dataset": "acme_v1"})
    markdown = markdown_report(report)
    assert _headline(markdown) == "acme_v1 — acme-adk 1.2.3 (Python 3.11.7)"
    assert "None" not in markdown
    assert "1 cases in 3.21 s (mean 0.42 s, median 0.42 s per question)" in markdown
    assert "module probed: `acme.adk`" in markdown and "distribution acme-adk 1.2.3" in markdown
    _file_names_in_backticks(markdown)


def test_a_standard_library_report_says_so_and_shows_no_none():
    index = _index(import_name=None, distribution=None, version=None)
    run = VerificationRun([_verdict("stdlib:1", "Unverifiable", INIT_FAILURE)], index, "offline", 1.5, [])
    meta = run_meta(run, suite="stdlib")
    assert (meta["library"], meta["library_version"]) == ("standard library", "3.11.7")
    markdown = markdown_report(quality_report(run.verdicts, meta))
    assert _headline(markdown) == "stdlib — standard library (Python 3.11.7)"
    assert "None" not in markdown and "1 cases in 1.5 s" in markdown
    _file_names_in_backticks(markdown)


def test_the_report_check_questions_writes_without_questions_has_a_title_and_no_none(tmp_path):
    api = Case("api:1", "api", "api_understanding", "api.yaml", 0, "How do I serialise?", gold_fqns=["json.dumps"])
    checked = check_questions([api], VerifierSettings(), dataset="stdlib", report_path=tmp_path / "quality_report.json",
                              proposals_path=tmp_path / "proposed_fixes.yaml")  # fmt: skip
    markdown = (tmp_path / "quality_report.md").read_text()
    assert _headline(markdown) == f"stdlib — standard library (Python {platform.python_version()})"
    assert "None" not in markdown and "nothing was proven" in markdown
    assert "None" not in str(checked.verdicts_metadata)


def test_library_label_never_says_none():
    assert library_label({}) == "standard library"
    assert library_label({"library": "google-adk", "library_version": None, "python_version": None}) == "google-adk (version unknown)"
    assert library_label({"library": "python stdlib", "python_version": "3.12.1"}) == "standard library (Python 3.12.1)"


def test_markdown_text_puts_file_names_paths_and_dunders_in_backticks():
    assert markdown_text("defined in google/adk/__init__.py, line 3") == "defined in `google/adk/__init__.py`, line 3"
    assert markdown_text("see __init__ and setup.cfg") == "see `__init__` and `setup.cfg`"
    assert markdown_text("(/usr/lib/python3.11/json/__init__.py)") == "(`/usr/lib/python3.11/json/__init__.py`)"
    assert markdown_text("f(*args, **kwargs) returns <class 'int'>") == "f(`*args`, `**kwargs`) returns \\<class 'int'>"
    assert markdown_text("already `__init__.py` quoted") == "already `__init__.py` quoted"
    assert markdown_text("json.dumps accepts sort_keys; 2 ** 3 and a/b") == "json.dumps accepts sort_keys; 2 ** 3 and a/b"
