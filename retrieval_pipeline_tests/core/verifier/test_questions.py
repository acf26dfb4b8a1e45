"""The dataset question check in core: verdicts, report files, proposals, check outcome (no Dagster)."""

from __future__ import annotations

import json
import platform
import shutil

import pytest

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.verifier.questions import FLAGGED_COLUMNS, VERDICT_COLUMNS, check_questions, report_case
from retrieval_pipeline.core.verifier.settings import VerifierSettings

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")


def mc(case_id: str, question: str, options: dict[str, str], answer: str) -> Case:
    return Case(case_id, "mc", "multiple_choice", "mc.yaml", 0, question, options=options, correct_answer=answer)


API = Case("api:1", "api", "api_understanding", "api.yaml", 0, "How do I serialise?", gold_fqns=["json.dumps"])


def paths(tmp_path):
    out = tmp_path / "exports" / "ds"
    return {"report_path": out / "quality_report.json", "proposals_path": out / "proposed_fixes.yaml"}


def test_no_multiple_choice_case_writes_an_empty_report_and_passes(tmp_path):
    where = paths(tmp_path)
    checked = check_questions([API], VerifierSettings(), dataset="ds", **where)
    assert checked.verdicts.empty and list(checked.verdicts.columns) == VERDICT_COLUMNS
    assert checked.flagged.empty and list(checked.flagged.columns) == FLAGGED_COLUMNS
    assert checked.passed and checked.incorrect == [] and checked.proposals_path is None
    assert checked.check_description() == "no marked answer was disproven"
    assert checked.check_metadata() == {"incorrect": [], "questions": 0}
    counts = {"verdict/Valid": 0, "verdict/Ambiguous": 0, "verdict/Incorrect": 0, "verdict/Unverifiable": 0}
    assert checked.verdicts_metadata == {
        "questions": 0,
        **counts,
        "seconds_per_question": 0.0,
        "library": "standard library",
        "library_version": platform.python_version(),
        "preview": "_none_",
    }
    report = json.loads(where["report_path"].read_text())
    assert report["total_cases"] == 0 and report["meta"]["dataset"] == "ds" and report["meta"]["prover"] is None
    assert where["report_path"].with_suffix(".md").exists() and not where["proposals_path"].exists()
    assert checked.report_metadata == {
        **counts,
        "proposals": 0,
        "report_json": where["report_path"],
        "report": where["report_path"].with_suffix(".md").read_text(),
    }


def test_a_missing_verifier_interpreter_names_the_registry_and_dataset(tmp_path):
    settings = VerifierSettings(python=tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(InputError, match=r"file registry\.yaml, case 'dataset ds': the verifier environment .*make adk-env"):
        check_questions([API], settings, dataset="ds", registry_path="registry.yaml", **paths(tmp_path))


def test_report_case_finds_the_entry_or_nothing():
    report = {"cases": [{"case_id": "a", "verdict": "Valid"}, {"case_id": "b", "verdict": "Incorrect"}]}
    assert report_case(report, "b") == {"case_id": "b", "verdict": "Incorrect"} and report_case(report, "c") == {}


@needs_bwrap
def test_planted_wrong_answer_is_incorrect_flagged_and_a_fix_proposed(tmp_path):
    where = paths(tmp_path)
    suite = tmp_path / "mc.yaml"
    suite.write_text("benchmarks: []\n")
    cases = [
        API,
        mc(
            "mc:right",
            "Which is the correct import statement for the `dumps` function?",
            {"A": "from json import dumps", "B": "from jsonlib import dumps"},
            "A",
        ),
        mc(
            "mc:wrong",
            "Which is the correct import statement for the `OrderedDict` class?",
            {"A": "from collections import OrderedDict", "B": "from itertools import OrderedDict"},
            "B",
        ),
    ]
    checked = check_questions(cases, VerifierSettings(timeout_s=60), dataset="ds", inputs=[suite], **where)
    verdicts = checked.verdicts.set_index("case_id")
    assert verdicts["verdict"].to_dict() == {"mc:right": "Valid", "mc:wrong": "Incorrect"}  # the api case is not a question
    assert json.loads(verdicts.loc["mc:wrong", "evidence"])["case_id"] == "mc:wrong"
    assert not checked.passed and checked.incorrect == ["mc:wrong"]
    assert checked.check_description() == "1 question(s) whose marked answer was disproven: findings to review, see quality_report.md"
    assert checked.check_metadata() == {"incorrect": ["mc:wrong"], "questions": 2}
    assert (
        checked.verdicts_metadata["questions"],
        checked.verdicts_metadata["verdict/Valid"],
        checked.verdicts_metadata["verdict/Incorrect"],
    ) == (2, 1, 1)
    assert list(checked.flagged["case_id"]) == ["mc:wrong"] and checked.report_metadata["proposals"] == 1
    assert checked.proposals_path == where["proposals_path"].resolve() and "mc:wrong" in checked.proposals_path.read_text()
    assert checked.report_metadata["proposed_fixes"] == checked.proposals_path
    assert isinstance(checked.report_metadata["report"], Markdown) and "mc:wrong" in checked.report_metadata["report"]
    assert suite.read_text() == "benchmarks: []\n"
