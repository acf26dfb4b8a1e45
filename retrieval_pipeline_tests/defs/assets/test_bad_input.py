"""Bad input stops the stage with a message naming the file and the case; nothing is dropped silently."""

from __future__ import annotations

import textwrap

import dagster as dg

from retrieval_pipeline.defs.assets.datasets import corpus, raw_cases
from retrieval_pipeline.defs.io_manager import ParquetIOManagerFactory
from retrieval_pipeline.defs.resources import PipelineSettings


def resources(tmp_path, suites: str, corpus_spec: str = "{introspect_modules: [json]}"):
    registry = tmp_path / "datasets.yaml"
    registry.write_text(
        textwrap.dedent(f"""
        root: .
        datasets:
          stdlib:
            suites: {suites}
            corpus: {corpus_spec}
    """)
    )
    return {
        "io_manager": ParquetIOManagerFactory(base_path=str(tmp_path / "out")),
        "settings": PipelineSettings(registry_path=str(registry), out_dir=str(tmp_path / "out")),
    }


def failure_message(result) -> str:
    return "\n".join(str(e.event_specific_data.error) for e in result.all_events if e.is_step_failure)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    (tmp_path / "bad.yaml").write_text("benchmarks:\n- id: a\n  question: [unclosed\n")
    result = dg.materialize([raw_cases], partition_key="stdlib", resources=resources(tmp_path, "[bad.yaml]"), raise_on_error=False)
    assert not result.success
    message = failure_message(result)
    assert "bad.yaml" in message and "line" in message


def test_missing_question_and_duplicate_ids_are_rejected_with_reasons(tmp_path):
    (tmp_path / "s.yaml").write_text(
        textwrap.dedent("""
        benchmarks:
        - {id: a, benchmark_type: api_understanding, question: ok?, answers: [{fully_qualified_class_name: [json.dumps]}]}
        - {id: b, benchmark_type: api_understanding, answers: [{fully_qualified_class_name: [json.dumps]}]}
        - {id: a, benchmark_type: api_understanding, question: again?, answers: [{fully_qualified_class_name: [json.loads]}]}
    """)
    )
    result = dg.materialize([raw_cases], partition_key="stdlib", resources=resources(tmp_path, "[s.yaml]"))
    rejects = result.asset_value("case_rejects").set_index("case_id")
    assert len(result.asset_value("raw_cases")) == 1 and len(rejects) == 2
    assert "question" in rejects.loc["b", "reason"] and "s.yaml" in rejects.loc["b", "source_file"]
    assert "duplicate" in rejects.loc["a", "reason"]


def test_empty_corpus_fails_naming_the_source(tmp_path):
    (tmp_path / "s.yaml").write_text("benchmarks: []\n")
    res = resources(tmp_path, "[s.yaml]", "{introspect_modules: [no_such_module_for_sure]}")
    result = dg.materialize([corpus], partition_key="stdlib", resources=res, raise_on_error=False)
    assert not result.success and "corpus is empty" in failure_message(result)
