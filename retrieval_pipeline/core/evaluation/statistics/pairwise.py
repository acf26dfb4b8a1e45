"""Every retriever against every other: paired deltas with bootstrap CIs, Holm-corrected p-values, verdict sentences.

:func:`compare_all` takes, per metric, the per-query values of every run (a ``query_id x run`` frame) and gives a
tidy frame of pairs (:data:`PAIR_COLUMNS`: one row per metric and pair of runs, the later run against the
earlier) and the means of the runs with their CIs (:data:`MEAN_COLUMNS`). :func:`matrix` turns one metric's pairs
into a ranx-``compare``-style square table, :func:`pair_sentence` and :func:`verdict` into words
(``dense beats bm25 on hit_rate@5 by +0.220 [+0.120, +0.310], p < 0.001``). The public
:func:`retrieval_pipeline.api.compare` and the ``retriever_pairs`` asset both compute through here.

The statistics are those of :mod:`~retrieval_pipeline.core.evaluation.statistics.stats`, on the queries where every run has
a value: one paired percentile bootstrap per metric for the means and every difference (seed
``derive_seed(seed, metric, "bootstrap")``), Fisher's randomisation test per pair (seed ``pair_seed(seed,
metric, run, other)``, the one seed of a pair everywhere: the significance table, the report, the console) or the
paired t-test, and Holm's correction over the pairs of each metric (:func:`all_pairs_p`, the family the
significance table's ▲/▼ marks use too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np
import pandas as pd

from retrieval_pipeline.core.evaluation.metrics import View, higher_is_better, metric_label, view_columns
from retrieval_pipeline.core.evaluation.statistics import stats
from retrieval_pipeline.core.evaluation.statistics.significance import all_pairs_p, check_query_results, significance_metrics, wide_values

#: The paired tests :func:`compare_all` runs.
Test = Literal["randomisation", "t-test"]

#: Columns of :attr:`Pairwise.pairs`: ``delta = mean(a) - mean(b)`` over the ``n_queries`` queries every run has.
PAIR_COLUMNS: tuple[str, ...] = (
    "metric",
    "a",
    "b",
    "n_queries",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "p",
    "p_holm",
    "significant",
    "note",
)
#: Columns of :attr:`Pairwise.means`.
MEAN_COLUMNS: tuple[str, ...] = ("metric", "run", "n_queries", "mean", "ci_low", "ci_high")


@dataclass(frozen=True)
class PairwiseSettings:
    """How :func:`compare_all` tests: the test, resample counts, CI coverage, alpha, base seed, fewest queries for a p-value."""

    test: Test = "randomisation"
    n_permutations: int = 10_000
    n_bootstrap: int = 2000
    confidence: float = 0.95
    alpha: float = 0.05
    seed: int = 13
    min_queries: int = 1

    def __post_init__(self) -> None:
        if self.test not in ("randomisation", "t-test"):
            raise ValueError(f"test must be 'randomisation' or 't-test', got {self.test!r}")

    @classmethod
    def of(cls, statistics: stats.StatisticsSettings) -> PairwiseSettings:
        """A dataset's ``statistics`` settings (randomisation test, ``min_queries_for_test``)."""
        shared = statistics.model_dump(include={"n_permutations", "n_bootstrap", "confidence", "alpha", "seed"})
        return cls(min_queries=statistics.min_queries_for_test, **shared)


@dataclass(frozen=True)
class Pairwise:
    """What :func:`compare_all` gives: the pairs (:data:`PAIR_COLUMNS`) and the runs' means (:data:`MEAN_COLUMNS`)."""

    pairs: pd.DataFrame
    means: pd.DataFrame


def too_few_note(n: int, minimum: int) -> str:
    """The note of a pair without a test: ``not enough queries for a test (n=4 < 6)``."""
    return f"not enough queries for a test (n={n} < {minimum})"


def _metric(name: str, wide: pd.DataFrame, settings: PairwiseSettings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pair rows and mean rows of one metric (queries without a value for some run left out)."""
    names = [str(c) for c in wide.columns]
    values = wide.dropna().to_numpy(dtype=float)
    n = values.shape[0]
    pair_index = [(j, i) for i, j in combinations(range(len(names)), 2)]  # later run against earlier, as all_pairs_p
    if n == 0:
        low = high = np.full(len(names) + len(pair_index), math.nan)
        deltas = np.empty((0, len(pair_index)))
    else:
        deltas = np.column_stack([values[:, a] - values[:, b] for a, b in pair_index]) if pair_index else np.empty((n, 0))
        low, high = stats.paired_bootstrap_ci(
            np.hstack([values, deltas]), settings.n_bootstrap, settings.confidence, stats.derive_seed(settings.seed, name, "bootstrap")
        )
    means = [float(values[:, i].mean()) if n else math.nan for i in range(len(names))]
    tested = n >= max(settings.min_queries, 1)
    note = "" if tested else (too_few_note(n, settings.min_queries) if n else "no query has a value for every run")
    _, raw, adjusted = all_pairs_p(
        values, names, name, seed=settings.seed, n_permutations=settings.n_permutations, test=settings.test, tested=tested
    )
    pairs = [
        {
            "metric": name,
            "a": names[a],
            "b": names[b],
            "n_queries": n,
            "mean_a": means[a],
            "mean_b": means[b],
            "delta": float(deltas[:, column].mean()) if n else math.nan,
            "ci_low": float(low[len(names) + column]),
            "ci_high": float(high[len(names) + column]),
            "p": float(p),
            "p_holm": float(p_holm),
            "significant": bool(p_holm <= settings.alpha),  # False for NaN
            "note": note,
        }
        for column, ((a, b), p, p_holm) in enumerate(zip(pair_index, raw, adjusted))
    ]
    rows = [
        {"metric": name, "run": r, "n_queries": n, "mean": means[i], "ci_low": float(low[i]), "ci_high": float(high[i])}
        for i, r in enumerate(names)
    ]
    return pairs, rows


def compare_all(values: Mapping[str, pd.DataFrame], settings: PairwiseSettings = PairwiseSettings()) -> Pairwise:
    """Every run against every other on each metric: paired delta, its bootstrap CI, raw and Holm p, significance.

    For each metric the queries where some run has no value (NaN) are left out, so every mean, delta and test
    of the metric is over the same ``n_queries`` queries. The means of the runs and the deltas of the pairs (the
    later column against the earlier) get paired percentile bootstrap CIs from one draw of queries per resample;
    each pair gets a two-sided p-value (Fisher's randomisation test, or the paired t-test); the p-values of a
    metric's pairs are Holm-corrected together, and a pair is significant when its Holm p is ``<= alpha``.
    With fewer than ``min_queries`` queries the CIs are still given, the p-values are NaN and ``note`` says why.

    Args:
        values: ``{metric: frame}``, each frame ``query_id x run`` (columns in run order; the same runs for every metric).
        settings: The test, resample counts, confidence, alpha, base seed and the fewest queries for a test.

    Returns:
        :class:`Pairwise`: ``pairs`` metric-major in the given order, then pair order (for runs ``r0, r1, r2``:
        ``r1-r0, r2-r0, r2-r1``); ``means`` one row per metric and run.
    """
    pairs: list[dict[str, Any]] = []
    means: list[dict[str, Any]] = []
    for name, wide in values.items():
        metric_pairs, metric_means = _metric(name, wide, settings)
        pairs += metric_pairs
        means += metric_means
    return Pairwise(pd.DataFrame(pairs, columns=list(PAIR_COLUMNS)), pd.DataFrame(means, columns=list(MEAN_COLUMNS)))


# --------------------------------------------------------------------------------------------------
# Matrices and words
# --------------------------------------------------------------------------------------------------

#: What a cell of :func:`matrix` may hold.
MatrixValue = Literal["delta", "p", "p_holm", "ci_low", "ci_high", "significant"]
#: How each value reads from the other run's side: the negated value of (key): the CI's ends swap; p-values stay.
_FLIPPED: dict[str, str] = {"delta": "delta", "ci_low": "ci_high", "ci_high": "ci_low"}


def flip(pair: Mapping[str, Any]) -> dict[str, Any]:
    """The same pair seen from ``b``: ``a`` and ``b`` swapped, delta and CI negated (``+ 0.0`` keeps 0 unsigned)."""
    out = dict(pair) | {"a": pair["b"], "b": pair["a"]}
    if "mean_a" in pair:
        out |= {"mean_a": pair["mean_b"], "mean_b": pair["mean_a"]}
    return out | {key: -pair[source] + 0.0 for key, source in _FLIPPED.items()}


def matrix(pairs: pd.DataFrame, metric: str, runs: Sequence[str], value: MatrixValue = "delta") -> pd.DataFrame:
    """ranx-``compare``-style square table of one metric: cell (row, column) is row's ``value`` against column.

    The diagonal, and a pair ``pairs`` lacks, is NaN; a delta or CI read from the other side is negated.
    """
    table = pd.DataFrame(np.nan, index=list(runs), columns=list(runs), dtype=object if value == "significant" else float)
    for pair in pairs[pairs["metric"] == metric].to_dict("records"):
        if pair["a"] in table.index and pair["b"] in table.index:
            table.loc[pair["a"], pair["b"]] = pair[value]
            table.loc[pair["b"], pair["a"]] = flip(pair)[value]
    return table


def p_text(p: float | None) -> str:
    """``< 0.001``, ``= 0.041``, ``= 1``, ``= n/a``."""
    if p is None or math.isnan(p):
        return "= n/a"
    return "< 0.001" if p < 0.001 else f"= {p:.2g}"


#: Beside a matrix of every pair (the report, the markdown), a verdict line spells out at most this many
#: indistinguishable pairs (more are one clause) and this many significant ones (more are counted): ten retrievers
#: make 45 pairs a metric.
TIES_SPELLED_OUT = 3
WINS_SPELLED_OUT = 6


def pair_sentence(pair: Mapping[str, Any], digits: int = 3, with_metric: bool = True, label: str | None = None, higher: bool = True) -> str:
    """``dense beats bm25 on hit_rate@5 by +0.220 [+0.120, +0.310], p < 0.001`` or ``a and b are indistinguishable (p = 0.41)``.

    The p-value is the Holm-corrected one; a pair is a win when it is significant. The winner is the run with the
    higher mean, or the lower one when ``higher`` is False (the metric's better direction, e.g. a not-found rate);
    its delta is shown from its side. A pair without a test (a ``note``) says so instead of naming a winner.

    Args:
        pair: A row of :data:`PAIR_COLUMNS` (``metric, a, b, delta, ci_low, ci_high, p_holm, significant``; ``note`` optional).
        digits: Decimals of the delta and its CI.
        with_metric: Whether to name the metric (``on hit@5``).
        label: How to name the metric (default: its ``metric`` value).
        higher: Whether higher values of the metric are better.
    """
    on = f" on {label or pair['metric']}" if with_metric else ""
    if pair.get("note"):
        return f"{pair['a']} and {pair['b']} are not tested{on} ({pair['note']})"
    if not pair["significant"]:
        return f"{pair['a']} and {pair['b']} are indistinguishable{on} (p {p_text(pair['p_holm'])})"
    winner = pair if (pair["delta"] > 0) == higher else flip(pair)
    return (
        f"{winner['a']} beats {winner['b']}{on} by {winner['delta']:+.{digits}f} "
        f"[{winner['ci_low']:+.{digits}f}, {winner['ci_high']:+.{digits}f}], p {p_text(pair['p_holm'])}"
    )


def verdict(
    pairs: Iterable[Mapping[str, Any]],
    digits: int = 3,
    label: str | None = None,
    higher: bool = True,
    limit: int | None = None,
    fold_ties: int | None = None,
) -> str:
    """One line on one metric's pairs: significant ones first (largest delta first), clauses joined by ``;``.

    The first clause names the metric. Pairs without a test (too few queries) make one clause with the note.
    With ``limit``, the clauses past the first ``limit`` become one: ``3 more pairs (1 significant)``. With
    ``fold_ties``, more than that many indistinguishable pairs become one last clause, ``32 other pairs are
    indistinguishable`` (and ``limit`` counts ``5 more significant pairs``), for a reader who has the matrix of
    every pair beside the line.
    """
    ordered = sorted(pairs, key=lambda p: (not p["significant"], -abs(p["delta"]) if not math.isnan(p["delta"]) else 0.0))
    if ordered and all(p.get("note") for p in ordered):
        return f"{label or ordered[0]['metric']}: no test ({ordered[0]['note']})"
    ties = [p for p in ordered if not p["significant"] and not p.get("note")]
    folded = fold_ties is not None and len(ties) > fold_ties
    shown = [p for p in ordered if p["significant"] or p.get("note")] if folded else ordered
    if not shown:
        return f"{label or ordered[0]['metric']}: all {len(ties)} pairs are indistinguishable"
    clauses = [pair_sentence(p, digits, i == 0, label, higher) for i, p in enumerate(shown)]
    if limit is not None and len(clauses) > limit:
        rest = shown[limit:]
        plural = "s" if len(rest) > 1 else ""
        wins = sum(bool(p["significant"]) for p in rest)
        more = f"{len(rest)} more significant pair{plural}" if folded else f"{len(rest)} more pair{plural} ({wins} significant)"
        clauses = clauses[:limit] + [more]
    if folded:
        clauses.append(f"{len(ties)} other pairs are indistinguishable")
    return "; ".join(clauses)


def matrix_cell(pair: Mapping[str, Any], digits: int = 3) -> str:
    """A cell of a pairwise matrix: ``+0.220 [+0.120, +0.310], p < 0.001`` (Holm p), or ``..., no test``."""
    if pair["delta"] is None or math.isnan(pair["delta"]):
        return "n/a"
    text = f"{pair['delta']:+.{digits}f} [{pair['ci_low']:+.{digits}f}, {pair['ci_high']:+.{digits}f}]"
    return f"{text}, no test" if pair.get("note") else f"{text}, p {p_text(pair['p_holm'])}"


# --------------------------------------------------------------------------------------------------
# The pipeline: a query_results frame -> the pairs of the dataset's headline metrics
# --------------------------------------------------------------------------------------------------

#: The metric registry's view whose metrics the pipeline compares pairwise (those that are means over queries).
PAIRWISE_VIEW: View = "summary"


def pairwise_metrics(columns: Iterable[str]) -> list[str]:
    """The :data:`PAIRWISE_VIEW` metrics that are means over queries with per-query values in ``columns``, in view order."""
    testable = set(significance_metrics(columns))
    return [name for name in view_columns(PAIRWISE_VIEW) if name in testable]


def retriever_pairs(
    query_results: pd.DataFrame, retrievers: Sequence[str], statistics: stats.StatisticsSettings, *, dataset: str | None = None
) -> pd.DataFrame:
    """Every retriever against every other on the dataset's headline metrics (:func:`pairwise_metrics`).

    The per-query values are read as the significance table reads them (``not_found_rate`` from ``found``), the
    statistics are the dataset's (:meth:`PairwiseSettings.of`: randomisation test, ``min_queries_for_test``).

    Args:
        query_results: The per-query frame: one row per (retriever, query).
        retrievers: The dataset's retrievers, in its order (each must have rows).
        statistics: The dataset's ``statistics`` settings.
        dataset: The dataset's name, for error messages.

    Returns:
        :data:`PAIR_COLUMNS`, one row per metric and pair (the later retriever against the earlier).

    Raises:
        ValueError: A missing column, a retriever without rows, a (retriever, query) twice; the message names the dataset.
    """
    label = f"dataset {dataset!r}" if dataset else None
    check_query_results(query_results, retrievers, label)
    values = {name: wide_values(query_results, name, retrievers, label) for name in pairwise_metrics(query_results.columns)}
    return compare_all(values, PairwiseSettings.of(statistics)).pairs


def metric_verdicts(
    pairs: pd.DataFrame, metrics: Iterable[str] | None = None, limit: int | None = None, digits: int = 3, fold_ties: int | None = None
) -> dict[str, str]:
    """``{metric: verdict line}`` of a :func:`retriever_pairs` frame, each metric under its registry label and direction.

    Args:
        pairs: Rows of :data:`PAIR_COLUMNS`.
        metrics: The metrics to give, in this order (default: the frame's, in its order); absent ones are skipped.
        limit: Clauses per line before the rest is counted (see :func:`verdict`).
        digits: Decimals of the deltas.
        fold_ties: More indistinguishable pairs than this become one clause (see :func:`verdict`).
    """
    present = list(dict.fromkeys(pairs["metric"])) if len(pairs) else []
    chosen = present if metrics is None else [m for m in metrics if m in present]
    return {
        name: verdict(
            pairs[pairs["metric"] == name].to_dict("records"),
            digits,
            metric_label(name),
            higher_is_better(name) is not False,
            limit,
            fold_ties,
        )
        for name in chosen
    }
