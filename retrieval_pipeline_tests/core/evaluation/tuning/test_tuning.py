"""Fusion tuning: a stable seeded split, re-fusion identical to the hybrid, choosing on dev and reporting test."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from retrieval_pipeline.core.common.types import Hit, Qrels
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics, tuning_objectives, view_columns
from retrieval_pipeline.core.evaluation.scoring import evaluated_qrels
from retrieval_pipeline.core.evaluation.tuning.fusion_sweep import (
    FUSION_METHODS,
    TuningSettings,
    choose,
    curve_columns,
    split_queries,
    sweep,
)
from retrieval_pipeline.core.evaluation.tuning.refusion import Judgements, fused_run, fusion_table, setting_metrics, stored_metrics
from retrieval_pipeline.core.retrieval.base import QueryError
from retrieval_pipeline.core.retrieval.engines.fusion import HybridRetriever, minmax_fuse, rrf_fuse
from retrieval_pipeline.core.retrieval.kinds.hybrid import HybridSpec
from retrieval_pipeline.core.retrieval.run_loop import TimedRun, batched_run, frame_to_runs, runs_to_frame

PROJECT_ROOT = Path(__file__).resolve().parents[4]
MINMAX = HybridSpec(name="hy_minmax", retrievers=["bm25", "dense"], method="minmax", weights=[0.5, 0.5])
RRF = HybridSpec(name="hy_rrf", retrievers=["bm25", "dense"], method="rrf", k=60)


# --------------------------------------------------------------------------------------------------
# The split
# --------------------------------------------------------------------------------------------------


def ids(n: int, prefix: str = "q") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_split_is_a_partition_and_ignores_input_order_and_duplicates() -> None:
    queries = ids(300)
    dev, test = split_queries(queries, seed=13, dev_share=0.5)
    assert set(dev).isdisjoint(test) and set(dev) | set(test) == set(queries)
    shuffled = random.Random(1).sample(queries, len(queries))
    assert split_queries(shuffled + queries[:10], seed=13, dev_share=0.5) == (dev, test)


def test_adding_queries_never_moves_existing_ones() -> None:
    old = ids(200)
    dev, _ = split_queries(old, seed=7, dev_share=0.5)
    dev_more, test_more = split_queries(old + ids(500, prefix="new"), seed=7, dev_share=0.5)
    assert set(dev_more) & set(old) == set(dev)
    assert set(test_more) & set(old) == set(old) - set(dev)


def test_seed_changes_the_split_and_dev_share_sets_its_size() -> None:
    queries = ids(2000)
    dev_a, _ = split_queries(queries, seed=1, dev_share=0.5)
    dev_b, _ = split_queries(queries, seed=2, dev_share=0.5)
    assert set(dev_a) != set(dev_b)
    # two independent fair splits agree on about half the queries: far from identical, far from complementary
    assert 0.4 < len(set(dev_a) ^ set(dev_b)) / len(queries) < 0.6
    dev, _ = split_queries(queries, seed=3, dev_share=0.3)
    sigma = (0.3 * 0.7 / len(queries)) ** 0.5  # a binomial draw per query
    assert abs(len(dev) / len(queries) - 0.3) < 4 * sigma


@pytest.mark.parametrize("share", [0.0, 1.0, -0.1])
def test_split_refuses_a_share_outside_the_open_unit_interval(share: float) -> None:
    with pytest.raises(ValueError, match="dev_share"):
        split_queries(ids(10), seed=1, dev_share=share)


# --------------------------------------------------------------------------------------------------
# Re-fusion equals the fusion functions and the hybrid retriever
# --------------------------------------------------------------------------------------------------


def random_runs(seed: int, n_queries: int = 40, depth: int = 12) -> tuple[dict[str, dict[str, list[Hit]]], Qrels]:
    """Two components over overlapping docs; tied scores, all-equal lists, a one-hit list and an empty list included."""
    rng = random.Random(seed)
    runs: dict[str, dict[str, list[Hit]]] = {"bm25": {}, "dense": {}}
    qrels: Qrels = {}
    for i in range(n_queries):
        q = f"q{i:03d}"
        pool = [f"d{j:02d}" for j in range(30)]
        for name in runs:
            n = rng.choice([0, 1, depth, depth, rng.randint(2, depth)]) if i % 7 == 0 else depth
            docs = rng.sample(pool, n)
            style = rng.random()
            if style < 0.15:
                scores = [1.0] * n  # all equal: normalised to 1
            elif style < 0.4:
                scores = sorted((rng.choice([0.5, 1.0, 2.0, 3.0]) for _ in range(n)), reverse=True)  # ties
            else:
                scores = sorted((rng.uniform(0, 20) for _ in range(n)), reverse=True)
            runs[name][q] = list(zip(docs, scores))
        qrels[q] = {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(pool, rng.randint(1, 4))}
    return runs, qrels


def as_frame(runs: dict[str, dict[str, list[Hit]]]) -> pd.DataFrame:
    return runs_to_frame([TimedRun(name, run, {}) for name, run in runs.items()])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_minmax_and_rrf_equal_the_fusion_functions_exactly(seed: int) -> None:
    runs, qrels = random_runs(seed)
    judgements = Judgements.from_qrels(qrels)
    depth = 10
    table = fusion_table(as_frame(runs), ["bm25", "dense"], judgements, depth=12)
    for alpha in (0.0, 0.05, 0.3, 0.5, 0.85, 1.0):
        expected = {q: minmax_fuse([runs["bm25"][q], runs["dense"][q]], [alpha, 1 - alpha])[:depth] for q in qrels}
        assert fused_run(table, "minmax", alpha, depth, judgements) == expected, alpha
    for k in (0, 1, 10, 60, 200):
        expected = {q: rrf_fuse([runs["bm25"][q], runs["dense"][q]], k)[:depth] for q in qrels}
        assert fused_run(table, "rrf", k, depth, judgements) == expected, k


@pytest.mark.parametrize("seed", [3, 4, 10, 11])
def test_vectorised_metrics_equal_per_query_metrics(seed: int) -> None:
    runs, qrels = random_runs(seed)
    judgements = Judgements.from_qrels(qrels)
    frame = as_frame(runs)
    table = fusion_table(frame, ["bm25", "dense"], judgements, depth=12)
    names = tuning_objectives()
    assert set(view_columns("sweep")) <= set(names)
    # extremes included: alpha 0 and 1 and rrf k 0 leave many exact score ties for the tie-break to settle
    for method, value in (("minmax", 0.0), ("minmax", 0.35), ("minmax", 1.0), ("rrf", 0), ("rrf", 5)):
        reference = per_query_metrics(fused_run(table, method, value, 12, judgements), qrels).set_index("query_id")[names]
        pd.testing.assert_frame_equal(setting_metrics(table, method, value, 12, judgements, names), reference, check_names=False)
    reference = per_query_metrics(runs["dense"], qrels).set_index("query_id")[names]
    pd.testing.assert_frame_equal(stored_metrics(frame, "dense", judgements, names), reference, check_names=False)


def test_vectorised_metrics_at_deeper_cutoffs_equal_per_query_metrics() -> None:
    runs, qrels = random_runs(5)
    judgements = Judgements.from_qrels(qrels, cut=20)
    frame = as_frame(runs)
    table = fusion_table(frame, ["bm25", "dense"], judgements, depth=20)
    names = ["hit_rate@15", "recall@20", "precision@20", "f1@20", "mrr", "ndcg@20"]
    fused = fused_run(table, "rrf", 10, 20, judgements)
    reference = per_query_metrics(fused, qrels, ks=(15, 20), ndcg_k=20, f1_k=20, precision_ks=(20,)).set_index("query_id")[names]
    pd.testing.assert_frame_equal(setting_metrics(table, "rrf", 10, 20, judgements, names), reference, check_names=False)
    with pytest.raises(ValueError, match=r"metrics \['recall@20'\] read deeper than the 10 ranks judged"):
        stored_metrics(frame, "dense", Judgements.from_qrels(qrels), ["mrr", "recall@20"])


class ListRetriever:
    """A fake retriever answering from fixed lists (a QueryError where the list is one)."""

    def __init__(self, name: str, answers: dict[str, list[Hit] | QueryError]) -> None:
        self.name = name
        self.answers = answers

    def search(self, queries: list[str], k: int) -> list:
        return [a if isinstance(a := self.answers[q], QueryError) else a[:k] for q in queries]


@pytest.mark.parametrize("spec", [MINMAX, RRF], ids=["minmax", "rrf"])
def test_refusion_at_the_configured_value_reproduces_the_hybrid_run(spec: HybridSpec) -> None:
    """The hybrid fetches max(spec.depth, k) per component: with spec.depth <= k the stored runs hold all it fused."""
    spec = spec.model_copy(update={"depth": 10})
    runs, qrels = random_runs(5, depth=15)
    answers: dict[str, dict] = {name: dict(run) for name, run in runs.items()}
    answers["dense"]["q005"] = QueryError("encoder timed out")  # the hybrid reports the failure, fusing nothing
    parts = [ListRetriever(name, answers[name]) for name in spec.retrievers]
    weights = spec.fusion_weights() if spec.method == "minmax" else None
    hybrid = HybridRetriever(spec.name, parts, spec.method, rrf_k=spec.k, depth=spec.depth, weights=weights)
    depth = 10
    timed = [_timed(r, list(qrels), depth) for r in [*parts, hybrid]]
    frame = runs_to_frame(timed)
    judgements = Judgements.from_qrels(qrels)
    table = fusion_table(frame, spec.retrievers, judgements, max(spec.depth, depth))
    refused = fused_run(table, spec.method, FUSION_METHODS[spec.method].default(spec), depth, judgements)
    own = frame_to_runs(frame)[spec.name].run
    assert own["q005"] == [] and refused["q005"] == []
    assert refused == own
    assert table.failed_queries == 1


def _timed(retriever, queries: list[str], k: int) -> TimedRun:
    return batched_run(retriever, {q: q for q in queries}, k, latency_sample=0)


def test_refusion_reproduces_the_stored_hybrids_on_the_real_stdlib_runs() -> None:
    runs_path = PROJECT_ROOT / "data" / "out" / "retrieval_runs" / "stdlib.parquet"
    dataset_path = PROJECT_ROOT / "data" / "out" / "retrieval_dataset" / "stdlib.parquet"
    if not runs_path.exists() or not dataset_path.exists():
        pytest.skip(f"{runs_path} or {dataset_path} is absent: materialise the stdlib partition first (the fake-data test covers parity)")
    from retrieval_pipeline.core.registry import load_registry

    registry = load_registry()
    frame = pd.read_parquet(runs_path)
    judgements = Judgements.from_qrels(evaluated_qrels(frame, pd.read_parquet(dataset_path)))
    stored = frame_to_runs(frame)
    depth = registry.get("stdlib").retrieval.depth
    hybrids = [registry.retrievers.get(n) for n in stored if registry.retrievers.get(n).kind == "hybrid"]
    assert hybrids, "the stored stdlib runs hold no hybrid"
    for spec in hybrids:
        table = fusion_table(frame, spec.retrievers, judgements, max(spec.depth, depth))
        refused = fused_run(table, spec.method, FUSION_METHODS[spec.method].default(spec), depth, judgements)
        stale = f"re-fusing {spec.name} differs from its stored run (if retrievers.yaml changed since, re-materialise stdlib)"
        assert refused == {q: stored[spec.name].run.get(q, []) for q in judgements.query_ids}, stale


# --------------------------------------------------------------------------------------------------
# Choosing on dev, reporting test
# --------------------------------------------------------------------------------------------------


def test_choose_breaks_ties_towards_the_default_then_the_smaller_value() -> None:
    assert choose([0.2, 0.4, 0.6], [0.9, 0.8, 0.7], default=0.5) == 0.2  # a clear winner
    assert choose([0.4, 0.6], [0.8, 0.8], default=0.5) == 0.4  # equally close: the smaller
    assert choose([0.1, 0.45, 0.9], [0.8, 0.8, 0.8], default=0.5) == 0.45
    assert choose([1, 60, 200], [0.7, 0.7, 0.7], default=60) == 60


def opposed_halves(settings: TuningSettings, n: int = 24) -> tuple[pd.DataFrame, Qrels, list[str], list[str]]:
    """Dev queries where bm25 is right and dense wrong; test queries the other way round.

    Dev, per query: bm25 ``g:10, a:5, b:0`` -> normalised g 1, a 0.5, b 0; dense ``a:0.9, b:0.8, g:0.1`` ->
    a 1, b 0.875, g 0. Fused: g = alpha, a = 0.5 alpha + (1 - alpha), b = 0.875 (1 - alpha), so the gold g
    is first exactly when alpha > 2/3: on the 0.05 grid, alpha in {0.7, ..., 1} all give nDCG 1 on dev,
    and the tie goes to the value closest to the default 0.5, i.e. 0.7.
    """
    queries = ids(n)
    dev, test = split_queries(queries, settings.seed, settings.dev_share)
    right = {"bm25": [("g", 10.0), ("a", 5.0), ("b", 0.0)], "dense": [("a", 0.9), ("b", 0.8), ("g", 0.1)]}
    runs: dict[str, dict[str, list[Hit]]] = {"bm25": {}, "dense": {}}
    for q in queries:
        bm25, dense = (
            (right["bm25"], right["dense"]) if q in dev else ([("a", 10.0), ("b", 5.0), ("g", 0.0)], [("g", 0.9), ("a", 0.8), ("b", 0.1)])
        )
        runs["bm25"][q] = [(f"{q}/{d}", s) for d, s in bm25]
        runs["dense"][q] = [(f"{q}/{d}", s) for d, s in dense]
    qrels = {q: {f"{q}/g": 1} for q in queries}
    return as_frame(runs), qrels, dev, test


def independent_means(frame: pd.DataFrame, qrels: Qrels, queries: list[str], alpha: float, metric: str) -> float:
    """The metric on a half, from minmax_fuse and per_query_metrics (not the vectorised path)."""
    runs = {name: tr.run for name, tr in frame_to_runs(frame).items()}
    fused = {q: minmax_fuse([runs["bm25"][q], runs["dense"][q]], [alpha, 1 - alpha]) for q in queries}
    return float(per_query_metrics(fused, {q: qrels[q] for q in queries})[metric].mean())


def test_the_value_is_chosen_on_dev_and_the_reported_numbers_are_tests() -> None:
    settings = TuningSettings()
    frame, qrels, dev, test = opposed_halves(settings)
    assert dev and test
    result = sweep(frame, qrels, [MINMAX, RRF], settings, depth=10)
    chosen = result.chosen.set_index("hybrid").loc["hy_minmax"]
    assert chosen["chosen_value"] == 0.7  # derived by hand in opposed_halves
    dev_curve = [independent_means(frame, qrels, dev, a, "ndcg@10") for a in settings.alphas]
    test_curve = [independent_means(frame, qrels, test, a, "ndcg@10") for a in settings.alphas]
    assert chosen["chosen_value"] == choose(list(settings.alphas), dev_curve, 0.5)
    assert chosen["chosen_value"] != choose(list(settings.alphas), test_curve, 0.5)  # test would have chosen otherwise
    assert chosen["dev_chosen"] == pytest.approx(1.0)
    assert chosen["test_chosen"] == pytest.approx(independent_means(frame, qrels, test, 0.7, "ndcg@10"))
    assert chosen["test_default"] == pytest.approx(independent_means(frame, qrels, test, 0.5, "ndcg@10"))
    assert chosen["dev_default"] == pytest.approx(independent_means(frame, qrels, dev, 0.5, "ndcg@10"))
    assert chosen["test_bm25"] == pytest.approx(0.5)  # gold third of three on test: 1 / log2(4)
    assert chosen["test_dense"] == pytest.approx(1.0)
    assert (chosen["n_dev"], chosen["n_test"]) == (len(dev), len(test)) == (result.n_dev, result.n_test)

    curve = result.curve[result.curve["hybrid"] == "hy_minmax"].set_index(["value", "half"])
    for alpha, d, t in zip(settings.alphas, dev_curve, test_curve):
        assert curve.loc[(alpha, "dev"), "ndcg@10"] == pytest.approx(d)
        assert curve.loc[(alpha, "test"), "ndcg@10"] == pytest.approx(t)
    assert set(curve.index[curve["chosen"]].get_level_values("value")) == {0.7}
    assert set(curve.index[curve["is_default"]].get_level_values("value")) == {0.5}
    # rrf: in both halves the wrong document beats g at every k (1/(k+2) > 1/(k+3)), so all tie and the default stays
    assert result.chosen.set_index("hybrid").loc["hy_rrf", "chosen_value"] == 60


def test_curve_and_chosen_frames_have_the_documented_columns_and_the_default_joins_the_grid() -> None:
    runs, qrels = random_runs(6)
    settings = TuningSettings(alphas=(0.0, 1.0), rrf_ks=(1, 100), objective="mrr")
    odd_k = HybridSpec(name="hy_rrf61", retrievers=["dense", "bm25"], method="rrf", k=61)
    result = sweep(as_frame(runs), qrels, [MINMAX, odd_k], settings, depth=10)
    assert (
        list(result.curve.columns)
        == curve_columns("mrr")
        == [
            *["hybrid", "method", "parameter", "value", "half"],
            *["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@10", "chosen", "is_default"],
        ]
    )
    grids = result.curve.groupby("hybrid")["value"].apply(lambda v: sorted(set(v))).to_dict()
    assert grids == {"hy_minmax": [0.0, 0.5, 1.0], "hy_rrf61": [1.0, 61.0, 100.0]}
    assert (result.curve.groupby(["hybrid", "value"]).size() == 2).all()  # dev and test, once each
    assert (result.curve.groupby("hybrid")["chosen"].sum() == 2).all()  # one value, both halves
    assert list(result.chosen.columns) == [
        *["hybrid", "method", "parameter", "default_value", "chosen_value", "objective"],
        *["dev_default", "dev_chosen", "test_default", "test_chosen", "test_bm25", "test_dense", "n_dev", "n_test", "note"],
    ]
    assert list(result.chosen["parameter"]) == ["alpha", "k"] and set(result.chosen["objective"]) == {"mrr"}
    # the specs fuse 100 hits per component but the runs were stored 10 deep: said, not hidden
    assert result.chosen["note"].str.contains("re-fusion approximates the hybrid").all()
    meta = result.metadata()
    assert meta["hy_rrf61/default_k"] == 61 and meta["hy_minmax/default_alpha"] == 0.5
    assert meta["hy_minmax/chosen_alpha"] in (0.0, 0.5, 1.0)
    assert "| hy_minmax" in meta["chosen_table"]


def test_hybrids_that_cannot_be_refused_are_skipped_with_a_reason() -> None:
    runs, qrels = random_runs(7)
    three = HybridSpec(name="hy_three", retrievers=["bm25", "dense", "splade"], method="minmax")
    absent = HybridSpec(name="hy_absent", retrievers=["bm25", "splade"], method="rrf")
    result = sweep(as_frame(runs), qrels, [three, absent, RRF], TuningSettings(), depth=10)
    assert list(result.chosen["hybrid"]) == ["hy_rrf"]
    assert len(result.skipped) == 2
    assert result.skipped[0].startswith("hy_three: minmax over 3 components")
    assert result.skipped[1].startswith("hy_absent: component(s) ['splade'] have no runs")


def test_a_component_listing_a_document_twice_skips_the_hybrid() -> None:
    runs, qrels = random_runs(8)
    frame = as_frame(runs)
    frame = pd.concat([frame, frame[(frame["retriever"] == "bm25") & (frame["rank"] == 1)].head(1)], ignore_index=True)
    result = sweep(frame, qrels, [RRF], TuningSettings(), depth=10)
    assert result.chosen.empty and "bm25 lists document" in result.skipped[0]


def test_too_few_queries_gives_a_clear_result_not_an_exception() -> None:
    runs, qrels = random_runs(9, n_queries=3)
    result = sweep(as_frame(runs), qrels, [MINMAX], TuningSettings(), depth=10, dataset="tiny")
    assert "not enough queries" in result.note and "tiny has 3 evaluated queries" in result.note
    assert result.curve.empty and result.chosen.empty and list(result.curve.columns) == curve_columns("ndcg@10")
    assert result.metadata()["note"] == result.note

    runs, qrels = random_runs(9, n_queries=6)
    settings = TuningSettings(dev_share=0.001)
    assert split_queries(qrels, settings.seed, settings.dev_share)[0] == []  # precondition: an empty dev half
    result = sweep(as_frame(runs), qrels, [MINMAX], settings, depth=10)
    assert "not enough queries" in result.note and "dev 0, test 6" in result.note


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("objective", "ndcg@7", "tuning.objective"), ("alphas", (0.0, 1.5), "tuning.alphas"), ("rrf_ks", (1, -2), "tuning.rrf_ks")],
)
def test_bad_tuning_settings_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TuningSettings(**{field: value})
