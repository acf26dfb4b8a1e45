"""No floor of the project's registry fails by construction.

The project's datasets have one or two gold documents per query, so a floor a perfect ranking cannot
reach (``precision@5 >= 0.72``: P@5 is at most 0.2 per gold) would fail on every dataset whatever the
retriever. Every threshold of every dataset must be met by the ideal ranking (gold documents first)
of queries with one gold, and of queries with two.
"""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.evaluation.metrics import aggregate, per_query_metrics
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry

REGISTRY = load_registry(DEFAULT_REGISTRY_PATH)


def ideal_means(n_gold: int) -> dict[str, float]:
    """The metric means of a perfect ranking: each query's gold documents first, then 20 others."""
    qrels = {f"q{i}": {f"q{i}-gold{g}": 1 for g in range(n_gold)} for i in range(4)}
    run = {q: [(d, 100.0 - r) for r, d in enumerate([*gold, *(f"{q}-other{j}" for j in range(20))])] for q, gold in qrels.items()}
    return aggregate(per_query_metrics(run, qrels), None)


@pytest.mark.parametrize("n_gold", [1, 2])
@pytest.mark.parametrize("dataset", sorted(REGISTRY.datasets))
def test_every_floor_is_reachable_by_a_perfect_ranking(dataset: str, n_gold: int) -> None:
    ideal = ideal_means(n_gold)
    floors = {m: t.min for m, t in REGISTRY.get(dataset).thresholds.items() if m in ideal}
    unreachable = {m: (floor, ideal[m]) for m, floor in floors.items() if ideal[m] < floor}
    assert not unreachable, f"{dataset}: floors a perfect ranking with {n_gold} gold(s) per query misses (floor, best): {unreachable}"
