"""Every check result carries its dataset: a passing dataset never masks a failing one.

Two datasets of one tiny registry, ``python_nq`` failing its floor and ``stdlib`` passing it, are evaluated
in one instance, the failing one first. Dagster's per-partition check status must still show the failure
after the passing dataset ran, and every result names its dataset.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import dagster as dg

from retrieval_pipeline.defs.assets.evaluation import retrieval_metrics
from retrieval_pipeline_tests.defs.conftest import API_SUITE, VOCAB
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.defs.test_graph import all_assets
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

FLOOR = dg.AssetCheckKey(dg.AssetKey("retrieval_metrics"), "min_hit_rate_at_5")
DRIFT = dg.AssetCheckKey(dg.AssetKey("retrieval_metrics"), "drift_hit_rate_at_5")


def _two_datasets(root: Path) -> Path:
    (root / "suites").mkdir(parents=True)
    (root / "suites" / "api_understanding.yaml").write_text(API_SUITE)
    registry = root / "datasets.yaml"
    registry.write_text(
        textwrap.dedent("""
        root: .
        defaults:
          filter: {judge: none}
          retrievers: [bm25, dense_minilm]
        datasets:
          stdlib:
            suites: [suites/api_understanding.yaml]
            corpus: {introspect_modules: [json, csv]}
            thresholds: {hit_rate@5: {min: 0.0, severity: WARN}}
          python_nq:
            kind: suite
            suites: [suites/api_understanding.yaml]
            corpus: {introspect_modules: [json, csv]}
            thresholds: {hit_rate@5: {min: 1.01, severity: WARN}}
    """)
    )
    return registry


def test_check_status_is_kept_per_dataset(tmp_path):
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), _two_datasets(tmp_path / "in"))
    instance = dg.DagsterInstance.ephemeral()
    selection = [
        a
        for a in all_assets()
        if isinstance(a, dg.AssetsDefinition) and not {k.to_user_string() for k in a.keys} & {"question_verdicts", "quality_report"}
    ]
    for dataset in ("python_nq", "stdlib"):  # the failing dataset first, then the passing one
        result = dg.materialize(selection, partition_key=dataset, resources=resources, instance=instance, raise_on_error=False)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        floor = {e.check_name: e for e in result.get_asset_check_evaluations()}["min_hit_rate_at_5"]
        assert floor.partition == dataset
        assert floor.passed is (dataset == "stdlib")
        assert floor.metadata["dataset"].value == dataset

    status = {
        info.partition_key: info.latest_execution_status.value
        for info in instance.event_log_storage.get_asset_check_partition_info([FLOOR], partition_keys=["stdlib", "python_nq"])
    }
    assert status == {"stdlib": "SUCCEEDED", "python_nq": "FAILED"}  # the later passing run did not mask the failure

    history = instance.event_log_storage.get_asset_check_execution_history(DRIFT, limit=10)
    assert sorted(r.partition for r in history) == ["python_nq", "stdlib"]  # each dataset's own drift history


def test_check_specs_are_partitioned_by_dataset():
    partitioned = {spec.name: spec.partitions_def for spec in retrieval_metrics.check_specs}
    assert partitioned and all(p is not None and "stdlib" in p.get_partition_keys() for p in partitioned.values())


def test_a_check_is_blocking_only_where_a_dataset_sets_its_floor_at_error():
    """Dagster blocks only on a failed blocking check of ERROR severity: a WARN-only floor is not declared blocking,
    and every description names the datasets where it blocks and says the results are per partition."""
    from retrieval_pipeline.defs.partitions import REGISTRY

    specs = {spec.name: spec for spec in retrieval_metrics.check_specs}
    for metric in {m for d in REGISTRY.datasets.values() for m in d.thresholds}:
        spec = specs["min_" + metric.replace("@", "_at_").replace(".", "_")]
        errors = [n for n, d in REGISTRY.datasets.items() if metric in d.thresholds and d.thresholds[metric].severity == "ERROR"]
        assert spec.blocking == bool(errors), metric
        assert all(n in spec.description for n in errors) and "per dataset partition" in spec.description
    assert not any(s.blocking for n, s in specs.items() if n.startswith("drift_"))
    assert specs["min_hit_rate_at_5"].blocking and not specs["min_mrr"].blocking  # the registry: hit@5 ERROR by default, MRR WARN
