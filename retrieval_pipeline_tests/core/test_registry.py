from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "datasets.yaml"
    path.write_text(text)
    return path


def test_project_registry_loads_with_its_default_floors():
    registry = load_registry(DEFAULT_REGISTRY_PATH)
    adk = registry.get("adk_v1_24_1")
    assert {m: (t.min, t.severity) for m, t in adk.thresholds.items()} == {
        "hit_rate@5": (0.80, "ERROR"),
        "hit_rate@10": (0.88, "WARN"),
        "mrr": (0.82, "WARN"),
    }  # no precision@5 floor: 0.72 failed by construction (test_default_floors)
    assert adk.gated == ["bm25"]  # the gate: its baseline (it names no production retriever)
    stdlib = registry.get("stdlib")  # the demo sample overrides one floor's severity only
    assert (stdlib.thresholds["hit_rate@5"].min, stdlib.thresholds["hit_rate@5"].severity) == (0.80, "WARN")
    assert stdlib.thresholds["mrr"] == adk.thresholds["mrr"]
    assert stdlib.retrievers == ["bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60", "bm25_code"]
    assert stdlib.baseline_retriever == "bm25" and stdlib.checked == stdlib.retrievers
    assert not registry.errors and not registry.retrievers.errors
    assert all(p.is_absolute() for p in stdlib.input_paths())


def test_dataset_overrides_merge_key_by_key(tmp_path):
    path = write(
        tmp_path,
        """
defaults:
  thresholds: {hit_rate@5: {min: 0.8, severity: ERROR}, mrr: {min: 0.5}}
  retrieval: {depth: 50, latency_sample: 10}
datasets:
  a:
    suites: [s.yaml]
    corpus: {introspect_modules: [json]}
    thresholds: {hit_rate@5: {min: 0.6, severity: WARN}}
    retrieval: {depth: 20}
    retrievers: [bm25_code, hybrid_rrf_k60]
    baseline: hybrid_rrf_k60
""",
    )
    a = load_registry(path, root=tmp_path).get("a")
    assert a.thresholds["hit_rate@5"].min == 0.6 and a.thresholds["hit_rate@5"].severity == "WARN"
    assert a.thresholds["mrr"].min == 0.5  # inherited
    assert (a.retrieval.depth, a.retrieval.latency_sample) == (20, 10)
    assert a.retrievers == ["bm25_code", "hybrid_rrf_k60"] and a.baseline_retriever == "hybrid_rrf_k60"
    assert a.suites == [(tmp_path / "s.yaml").resolve()]
    assert a.missing_inputs() == [(tmp_path / "s.yaml").resolve()]


def test_invalid_dataset_names_file_and_dataset_and_the_others_still_load(tmp_path):
    path = write(
        tmp_path,
        "datasets:\n  broken:\n    suites: [s.yaml]\n    corpus: {}\n"
        "  fine:\n    suites: [s.yaml]\n    corpus: {introspect_modules: [json]}\n",
    )
    registry = load_registry(path, root=tmp_path)
    assert registry.names == ["fine", "broken"] and registry.get("fine").name == "fine"
    with pytest.raises(InputError) as err:
        registry.get("broken")
    assert str(path) in str(err.value) and "dataset 'broken'" in str(err.value) and "exactly one" in str(err.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("retrievers: [bm25, bm99]", "unknown retriever 'bm99'"),
        ("retrievers: [bm25, bm25]", "listed twice"),
        ("retrievers: [bm25]\n    baseline: dense_minilm", "baseline: 'dense_minilm' is not one of the dataset's retrievers"),
        ("retrievers: [bm25]\n    checked_retrievers: [dense_minilm]", "checked_retrievers: ['dense_minilm'] are not among"),
        ("retrievers: []", "retrievers: List should have at least 1 item"),
        ("retrieval: {depth: 0}", "retrieval.depth: Input should be greater than or equal to 1"),
    ],
)
def test_retriever_settings_are_validated_per_dataset(tmp_path, settings, message):
    path = write(tmp_path, f"datasets:\n  d:\n    suites: [s.yaml]\n    corpus: {{introspect_modules: [json]}}\n    {settings}\n")
    with pytest.raises(InputError, match="dataset 'd' is invalid") as err:
        load_registry(path, root=tmp_path).get("d")
    assert message in str(err.value)


def test_unknown_dataset_lists_known_ones():
    with pytest.raises(InputError, match="known: stdlib"):
        load_registry().get("nope")


def test_yaml_syntax_error_names_file(tmp_path):
    path = write(tmp_path, "datasets: [unclosed\n")
    with pytest.raises(InputError, match=str(path)):
        load_registry(path)


def test_corpus_from_an_installed_package(tmp_path):
    path = write(tmp_path, "datasets:\n  p:\n    suites: [s.yaml]\n    corpus: {introspect_package: json}\n")
    assert "json.decoder" in load_registry(path, root=tmp_path).get("p").corpus.modules()
