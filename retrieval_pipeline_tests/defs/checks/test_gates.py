"""Gates the user chooses: only the retrievers in a dataset's ``gate`` fail its run on an ERROR floor.

A deliberately bad extra retriever (it never finds anything) sits beside bm25 on the tiny dataset. Gated
by default (the baseline only), its failed ERROR floor is reported as WARN and the run succeeds; named in
``gate:``, the same floor fails the run.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import dagster as dg
import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline_tests.defs.conftest import API_SUITE, VOCAB
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.defs.test_graph import all_assets
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

#: A name the project's retriever registry defines (the asset graph has its steps), redefined here as the bad plug-in.
BAD = "dense_sre_minilm"


class NothingFound:
    """A plug-in retriever that never finds a relevant document: every floor fails for it."""

    def build(self, doc_ids: list[str], texts: list[str]) -> None:
        self.doc_ids = doc_ids

    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        return [[] for _ in queries]


def _registry(root: Path, extra: str = "") -> Path:
    (root / "suites").mkdir(parents=True, exist_ok=True)
    (root / "suites" / "api_understanding.yaml").write_text(API_SUITE)
    (root / "retrievers.yaml").write_text(
        textwrap.dedent(f"""
        retrievers:
          bm25: {{kind: bm25}}
          {BAD}: {{kind: python, factory: "retrieval_pipeline_tests.defs.checks.test_gates:NothingFound"}}
        """)
    )
    registry = root / "datasets.yaml"
    registry.write_text(
        textwrap.dedent(f"""
        root: .
        defaults:
          filter: {{judge: none}}
        datasets:
          stdlib:
            suites: [suites/api_understanding.yaml]
            corpus: {{introspect_modules: [json, csv]}}
            retrievers: [bm25, {BAD}]
            baseline: bm25
            thresholds: {{hit_rate@5: {{min: 0.3, severity: ERROR}}}}
        """)
        + textwrap.indent(extra, " " * 4)
    )
    return registry


def _materialize(tmp_path: Path, extra: str = "") -> dg.ExecuteInProcessResult:
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), _registry(tmp_path / "in", extra))
    selection = [a for a in all_assets() if not {k.to_user_string() for k in a.keys} & {"question_verdicts", "quality_report"}]
    return dg.materialize(selection, partition_key="stdlib", resources=resources, raise_on_error=False)


def _floor(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}["min_hit_rate_at_5"]


def test_a_bad_retriever_outside_the_gate_warns_and_the_run_succeeds(tmp_path: Path) -> None:
    result = _materialize(tmp_path)  # gate: the default, the baseline bm25 only
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    floor = _floor(result)
    assert not floor.passed and floor.severity == dg.AssetCheckSeverity.WARN
    assert f"{BAD} (0.000)" in floor.description and "bm25 (" not in floor.description
    assert "not in the gate ['bm25']" in floor.description
    assert floor.metadata["gate"].value == ["bm25"]


def test_a_bad_gated_retriever_still_fails_the_run(tmp_path: Path) -> None:
    result = _materialize(tmp_path, f"gate: [bm25, {BAD}]\n")
    assert not result.success
    floor = _floor(result)
    assert not floor.passed and floor.severity == dg.AssetCheckSeverity.ERROR
    failures = [e for e in result.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["retrieval_metrics"]
    assert failures[0].step_failure_data.error.cls_name == "DagsterAssetCheckFailedError"


def test_gate_defaults_to_the_baseline_and_the_production_retriever(tmp_path: Path) -> None:
    registry = load_registry(_registry(tmp_path, f"production: {BAD}\n"))
    assert registry.get("stdlib").gated == ["bm25", BAD]


@pytest.mark.parametrize(
    ("extra", "message"),
    [("gate: [bm25, no_such]\n", "gate: ['no_such'] are not among"), ("production: nope\n", "production: 'nope' is not one of")],
)
def test_unknown_gate_or_production_names_are_refused_naming_file_and_dataset(tmp_path: Path, extra: str, message: str) -> None:
    path = _registry(tmp_path, extra)
    registry = load_registry(path)
    assert message in registry.errors["stdlib"]
    with pytest.raises(InputError) as refused:
        registry.get("stdlib")
    assert str(refused.value).startswith(f"file {path}: dataset 'stdlib' is invalid: ") and message in str(refused.value)
