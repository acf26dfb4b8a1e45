"""``fusion_sweep`` in Dagster: materialised on a small inline stdlib sample with the keyword encoder (no model)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
from retrieval_pipeline.core.evaluation.scoring import evaluated_qrels
from retrieval_pipeline.core.evaluation.tuning.fusion_sweep import FUSION_METHODS, choose, split_queries
from retrieval_pipeline.core.evaluation.tuning.refusion import Judgements, fused_run, fusion_table
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.core.retrieval.run_loop import frame_to_runs
from retrieval_pipeline.definitions import defs
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

PARTITION = "stdlib"
QUESTIONS = {
    "dumps": ("How do I turn a Python dict into a JSON string?", "json.dumps"),
    "loads": ("Which function parses a JSON document from a string?", "json.loads"),
    "dump": ("How do I write a JSON document to an open file?", "json.dump"),
    "load": ("How do I read a JSON document from a file object?", "json.load"),
    "decode_error": ("Which exception is raised when decoding JSON fails?", "json.JSONDecodeError"),
    "encoder": ("Which class encodes Python objects as JSON?", "json.JSONEncoder"),
    "decoder": ("Which class decodes a JSON document into Python objects?", "json.JSONDecoder"),
    "dict_reader": ("How can I read rows of a CSV file as dictionaries keyed by the header?", "csv.DictReader"),
    "dict_writer": ("How do I write dictionaries as rows of a CSV file with a header?", "csv.DictWriter"),
    "reader": ("How do I read the rows of a CSV file as lists of strings?", "csv.reader"),
    "writer": ("How do I write rows to a CSV file?", "csv.writer"),
    "sniffer": ("How can I guess the dialect of a CSV file from a sample?", "csv.Sniffer"),
    "register": ("How do I register a new CSV dialect under a name?", "csv.register_dialect"),
    "field_limit": ("How do I change the largest CSV field size the parser allows?", "csv.field_size_limit"),
}
VOCAB = ["json", "string", "dict", "parse", "csv", "rows", "header", "dictionary", "writer", "reader", "file", "write"]
VOCAB += ["read", "decode", "encode", "dialect", "field", "size", "object", "document", "exception", "class"]


def suite_yaml() -> str:
    cases = [
        f"- id: api_understanding:{key}\n  question: {q}\n  benchmark_type: api_understanding\n"
        f"  answers:\n  - answer: {fqn.split('.')[-1]}\n    fully_qualified_class_name: [{fqn}]\n"
        for key, (q, fqn) in QUESTIONS.items()
    ]
    return "benchmarks:\n" + "".join(cases)


def write_registry(root: Path, tuning: str) -> Path:
    (root / "suites").mkdir(parents=True, exist_ok=True)
    (root / "suites" / "api.yaml").write_text(suite_yaml())
    path = root / "datasets.yaml"
    path.write_text(
        textwrap.dedent(f"""
        root: .
        defaults:
          filter: {{judge: none}}
        datasets:
          stdlib:
            suites: [suites/api.yaml]
            corpus: {{introspect_modules: [json, csv]}}
            tuning: {tuning}
    """)
    )
    return path


def materialise(tmp_path: Path, tuning: str) -> tuple[dg.ExecuteInProcessResult, Path]:
    registry = write_registry(tmp_path / "in", tuning)
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), registry)
    selection = dg.AssetSelection.assets("fusion_sweep").upstream().required_multi_asset_neighbors()
    result = dg.materialize(
        list(defs().assets), selection=selection, partition_key=PARTITION, resources=resources, instance=dg.DagsterInstance.ephemeral()
    )
    return result, registry


def metadata(result: dg.ExecuteInProcessResult, key: str) -> dict:
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key)
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_fusion_sweep_chooses_on_dev_and_reports_the_test_half(tmp_path: Path) -> None:
    result, registry_path = materialise(tmp_path, "{alphas: [0.0, 0.25, 0.5, 0.75, 1.0], rrf_ks: [1, 10, 100], seed: 5}")
    assert result.success
    runs = result.asset_value("retrieval_runs")
    qrels = evaluated_qrels(runs, result.asset_value("retrieval_dataset"))
    dev, test = split_queries(qrels, seed=5, dev_share=0.5)
    assert len(qrels) == len(QUESTIONS) and dev and test  # precondition: both halves exist

    curve = result.asset_value("fusion_sweep")
    assert set(curve["hybrid"]) == {"hybrid_minmax_a0.5", "hybrid_rrf_k60"}
    grids = curve.groupby("hybrid")["value"].apply(lambda v: sorted(set(v))).to_dict()
    assert grids == {"hybrid_minmax_a0.5": [0.0, 0.25, 0.5, 0.75, 1.0], "hybrid_rrf_k60": [1.0, 10.0, 60.0, 100.0]}  # config + default
    stored = tmp_path / "out" / "fusion_sweep" / f"{PARTITION}.parquet"
    pd.testing.assert_frame_equal(pd.read_parquet(stored), curve)  # the project's IO manager kept the curve

    meta = metadata(result, "fusion_sweep")
    assert (int(meta["n_dev"]), int(meta["n_test"]), meta["objective"], meta["skipped"]) == (len(dev), len(test), "ndcg@10", [])
    assert "| hybrid_minmax_a0.5" in meta["chosen_table"]
    registry = load_registry(registry_path)
    stored_runs = {name: tr.run for name, tr in frame_to_runs(runs).items()}
    for name, parameter in (("hybrid_minmax_a0.5", "alpha"), ("hybrid_rrf_k60", "k")):
        rows = curve[curve["hybrid"] == name]
        dev_curve = rows[rows["half"] == "dev"].set_index("value")["ndcg@10"]
        default = 0.5 if parameter == "alpha" else 60.0
        assert float(meta[f"{name}/default_{parameter}"]) == pytest.approx(default, rel=1e-3)
        assert float(meta[f"{name}/chosen_{parameter}"]) == pytest.approx(choose(list(dev_curve.index), list(dev_curve), default), rel=1e-3)
        # the configured value's test number, derived from the hybrid's own stored run (not from re-fusion)
        own = per_query_metrics(stored_runs[name], qrels).set_index("query_id")
        assert float(meta[f"{name}/test_default"]) == pytest.approx(own.loc[test, "ndcg@10"].mean(), abs=5e-4)
        assert float(meta[f"{name}/dev_default"]) == pytest.approx(own.loc[dev, "ndcg@10"].mean(), abs=5e-4)
        dense = per_query_metrics(stored_runs["dense_minilm"], qrels).set_index("query_id")
        assert float(meta[f"{name}/test_dense_minilm"]) == pytest.approx(dense.loc[test, "ndcg@10"].mean(), abs=5e-4)
        # and re-fusing the components at the configured value gives the hybrid's run exactly (keyword ties included)
        spec = registry.retrievers.get(name)
        judgements = Judgements.from_qrels(qrels)
        table = fusion_table(runs, spec.retrievers, judgements, max(spec.depth, 100))
        refused = fused_run(table, spec.method, FUSION_METHODS[spec.method].default(spec), 100, judgements)
        assert refused == {q: stored_runs[name].get(q, []) for q in judgements.query_ids}


def test_fusion_sweep_on_too_few_queries_says_so_and_succeeds(tmp_path: Path) -> None:
    result, _ = materialise(tmp_path, "{dev_share: 0.001}")  # every query lands in test: no dev half
    assert result.success
    assert result.asset_value("fusion_sweep").empty
    meta = metadata(result, "fusion_sweep")
    assert meta["note"].startswith("not enough queries: dataset stdlib") and meta["n_dev"] == "0"
