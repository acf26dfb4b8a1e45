"""Score retrievers from Python: ``evaluate`` one run, ``compare`` several with paired statistics.

::

    from retrieval_pipeline import compare, evaluate

    evaluate(qrels, run, ["ndcg@10", "recall@100"])          # means, like pytrec_eval / ranx
    compare(qrels, {"bm25": bm25, "dense": dense}, ["hit@5"])  # deltas, 95% CIs, Holm p, verdicts

Qrels and runs may be dicts (``{qid: {docid: grade}}``, ``{qid: {docid: score}}`` as in pytrec_eval and
ranx; a run may also be ``{qid: [(docid, score), ...]}``), paths of TREC files, pandas DataFrames
(columns ``query_id``/``qid``/``q_id``, ``doc_id``/``docid``/``docno``, and ``grade``/``relevance``/``rel``
or ``score``), or ranx ``Qrels``/``Run`` objects (read by :mod:`retrieval_pipeline.api_inputs`). Metric
names take any cut-off (``ndcg@20``, ``P@3``, ``mrr@10``, ``R-prec``, ``map``, ``hit@5``): see
:mod:`retrieval_pipeline.core.evaluation.metrics.names`.

Every value equals pytrec_eval's on the queries both score: runs are ranked by score (single precision,
as trec_eval reads it), ties by doc id descending; relevance is ``grade >= 1``. Means are over every qrels
query, a query missing from the run scoring 0 (pytrec_eval leaves it out of its mean instead).

The statistics are those of :mod:`retrieval_pipeline.core.evaluation.statistics.stats`, computed by
:func:`retrieval_pipeline.core.evaluation.statistics.pairwise.compare_all` (as the pipeline's ``retriever_pairs``):
paired percentile bootstrap CIs (one draw of queries per resample for every run and difference), Fisher's
randomisation test by random sign flips (or the paired t-test), Holm-corrected over the pairs of runs of
each metric.
"""

from __future__ import annotations

import json
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from retrieval_pipeline.api_inputs import load_qrels, load_scores
from retrieval_pipeline.core.evaluation.metrics import MetricName, parse_metric, parse_metrics
from retrieval_pipeline.core.evaluation.metrics.judging import FlatScores
from retrieval_pipeline.core.evaluation.metrics.ranked import per_query_values
from retrieval_pipeline.core.evaluation.overlap import EmptyRunWarning as EmptyRunWarning  # re-exported: the API's warning categories
from retrieval_pipeline.core.evaluation.overlap import NoSharedQueryWarning as NoSharedQueryWarning
from retrieval_pipeline.core.evaluation.overlap import RunQrelsWarning as RunQrelsWarning
from retrieval_pipeline.core.evaluation.overlap import overlap_problem
from retrieval_pipeline.core.evaluation.statistics.pairwise import PairwiseSettings, compare_all, matrix, pair_sentence, verdict

if TYPE_CHECKING:
    import pandas as pd

#: The metrics when none are named.
DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "mrr@10", "recall@100", "map")
#: Most sign flips (``n_permutations``) and bootstrap resamples (``n_bootstrap``) :func:`compare` accepts:
#: a million already resolves p to 1e-6, and 10**10 would run for days without a word.
MAX_RESAMPLES = 1_000_000

Test = Literal["randomisation", "t-test"]


# --------------------------------------------------------------------------------------------------
# Per-query values and tables
# --------------------------------------------------------------------------------------------------


def _per_query(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]] | FlatScores,
    metrics: list[MetricName],
    label: str = "run",
    stacklevel: int = 3,
) -> dict[str, np.ndarray]:
    problem = overlap_problem(qrels, {q: range(n) for q, n in run.sizes().items()} if isinstance(run, FlatScores) else run, label)
    if problem is not None:
        category, message = problem
        warnings.warn(message, category, stacklevel=stacklevel)
    return per_query_values(run, qrels, metrics)


def _check_statistics(n_permutations: object, n_bootstrap: object, confidence: object, alpha: object, seed: object) -> None:
    """Refuse a parameter of :func:`compare` that the statistics cannot honour, naming it and its range."""
    for name, value in (("n_permutations", n_permutations), ("n_bootstrap", n_bootstrap)):
        if not _is_int(value) or not 1 <= value <= MAX_RESAMPLES:  # type: ignore[operator]
            raise ValueError(f"{name} must be an integer from 1 to {MAX_RESAMPLES:,}, got {value!r}")
    for name, value in (("confidence", confidence), ("alpha", alpha)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < 1:
            raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    if not _is_int(seed):
        raise ValueError(f"seed must be an integer, got {seed!r} ({type(seed).__name__})")


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _table(rows: list[list[object]], headers: list[str]) -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=headers, disable_numparse=True)


# --------------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evaluation:
    """Means over queries of each metric for one run (and the per-query values).

    ``result["ndcg@10"]`` is the mean; any spelling of the name works (``result["P@3"]``,
    ``result["precision@3"]``). ``str(result)`` is a trec_eval-like listing.

    Attributes:
        means: ``{canonical metric name: mean over the qrels queries}``.
        per_query: ``{canonical metric name: {query_id: value}}``.
        n_queries: Number of qrels queries (the denominator of every mean).
    """

    means: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(repr=False)
    n_queries: int

    def __getitem__(self, name: str) -> float:
        return self.means[parse_metric(name).name]

    def __iter__(self):
        return iter(self.means)

    def __len__(self) -> int:
        return len(self.means)

    def to_frame(self) -> pd.DataFrame:
        """Per-query values: one row per query (index ``query_id``), one column per metric."""
        import pandas as pd

        return pd.DataFrame(self.per_query).rename_axis("query_id")

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """``{"n_queries", "means"}`` and, with ``per_query``, ``{"per_query": {metric: {qid: value}}}``."""
        result: dict[str, Any] = {"n_queries": self.n_queries, "means": dict(self.means)}
        if per_query:
            result["per_query"] = {m: dict(v) for m, v in self.per_query.items()}
        return result

    def __str__(self) -> str:
        width = max(22, *(len(m) for m in self.means))  # trec_eval's layout: the measure in 22 columns, then tabs
        lines = [f"{'num_q':<{width}}\tall\t{self.n_queries}"]
        lines += [f"{name:<{width}}\tall\t{value:.4f}" for name, value in self.means.items()]
        return "\n".join(lines)


def evaluate(qrels: object, run: object, metrics: str | Iterable[str] = DEFAULT_METRICS) -> Evaluation:
    """Score one run: the mean over the qrels queries of each metric, and the per-query values.

    Args:
        qrels: ``{qid: {docid: grade}}``, a TREC qrels path, a DataFrame or a ranx ``Qrels``.
        run: ``{qid: {docid: score}}``, a TREC run path, a DataFrame or a ranx ``Run``.
        metrics: One name or several, any cut-off: ``ndcg@20``, ``recall@100``, ``mrr@10``, ``P@3``,
            ``R-prec``, ``map``, ``hit@5``, ``ndcg``.

    Returns:
        An :class:`Evaluation`; ``result["ndcg@10"]`` is a mean, ``result.per_query`` the values per query.

    Raises:
        ValueError: An unknown metric name, empty qrels, or malformed input (naming the file and line for a TREC file).

    Warns:
        EmptyRunWarning: The run holds no hit at all (every metric is 0).
        NoSharedQueryWarning: No query of the run is in the qrels (every metric is 0).
    """
    parsed = parse_metrics(metrics)
    judged = load_qrels(qrels)
    values = _per_query(judged, load_scores(run), parsed, f"run {run}" if isinstance(run, (str, Path)) else "the run")
    query_ids = list(judged)
    return Evaluation(
        means={name: float(v.mean()) for name, v in values.items()},
        per_query={name: dict(zip(query_ids, v.tolist())) for name, v in values.items()},
        n_queries=len(query_ids),
    )


# --------------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairComparison:
    """One run against another on one metric: ``delta = mean(run) - mean(other)`` over the same queries."""

    metric: str
    run: str
    other: str
    delta: float
    ci_low: float
    ci_high: float
    p: float
    p_holm: float
    significant: bool

    def flipped(self) -> PairComparison:
        """The same comparison seen from the other run (delta and CI negated; ``+ 0.0`` keeps 0 unsigned)."""
        return PairComparison(
            self.metric,
            self.other,
            self.run,
            -self.delta + 0.0,
            -self.ci_high + 0.0,
            -self.ci_low + 0.0,
            self.p,
            self.p_holm,
            self.significant,
        )

    def sentence(self, digits: int = 3, with_metric: bool = True) -> str:
        """``dense beats bm25 on hit_rate@5 by +0.220 [+0.120, +0.310], p < 0.001`` or ``a and b are indistinguishable (p = 0.41)``.

        The p-value is the Holm-corrected one; a pair is a win when it is significant (``p_holm <= alpha``).
        """

        return pair_sentence(self._row(), digits, with_metric)

    def _row(self) -> dict[str, Any]:
        """This pair as a row of :data:`~retrieval_pipeline.core.evaluation.statistics.pairwise.PAIR_COLUMNS`."""
        return {"a": self.run, "b": self.other} | {k: v for k, v in vars(self).items() if k not in ("run", "other")}


@dataclass(frozen=True)
class Comparison:
    """Every run against every other, per metric: means with CIs, paired deltas with CIs, Holm p-values.

    Attributes:
        runs: Run names, in the order given.
        metrics: Canonical metric names.
        n_queries: Number of qrels queries every mean and test is over.
        means: ``{metric: {run: mean}}``.
        cis: ``{metric: {run: (low, high)}}``, paired percentile bootstrap.
        pairs: One :class:`PairComparison` per metric and pair of runs, the later run against the earlier.
        per_query: ``{metric: {run: {query_id: value}}}``.
        settings: The test, resample counts, confidence, alpha and seed used.
    """

    runs: list[str]
    metrics: list[str]
    n_queries: int
    means: dict[str, dict[str, float]]
    cis: dict[str, dict[str, tuple[float, float]]]
    pairs: list[PairComparison]
    per_query: dict[str, dict[str, dict[str, float]]] = field(repr=False)
    settings: dict[str, Any] = field(default_factory=dict)

    def pair(self, metric: str, run: str, other: str) -> PairComparison:
        """``run`` against ``other`` on ``metric`` (any spelling of the name)."""
        name = parse_metric(metric).name
        for p in self.pairs:
            if p.metric == name and (p.run, p.other) == (run, other):
                return p
            if p.metric == name and (p.run, p.other) == (other, run):
                return p.flipped()
        raise KeyError(f"no comparison of {run!r} with {other!r} on {name!r} (runs: {self.runs}, metrics: {self.metrics})")

    def matrix(self, metric: str, value: Literal["delta", "p", "p_holm", "ci_low", "ci_high"] = "delta") -> pd.DataFrame:
        """ranx-``compare``-style square table: cell (row, column) is row's ``value`` against column (NaN on the diagonal)."""
        import pandas as pd

        return matrix(pd.DataFrame([p._row() for p in self.pairs]), parse_metric(metric).name, self.runs, value)

    def verdict(self, metric: str) -> str:
        """One line on ``metric``: every pair, significant ones first, clauses joined by ``;``."""

        name = parse_metric(metric).name
        return verdict([p._row() for p in self.pairs if p.metric == name])

    @property
    def verdicts(self) -> dict[str, str]:
        """``{metric: verdict line}``."""
        return {m: self.verdict(m) for m in self.metrics}

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """Plain JSON-able dict: settings, means with CIs, pairs, verdicts (and per-query values)."""
        result: dict[str, Any] = {
            "runs": list(self.runs),
            "metrics": list(self.metrics),
            "n_queries": self.n_queries,
            "settings": dict(self.settings),
            "means": {
                m: {r: {"mean": self.means[m][r], "ci_low": self.cis[m][r][0], "ci_high": self.cis[m][r][1]} for r in self.runs}
                for m in self.metrics
            },
            "comparisons": [{k: _plain(v) for k, v in vars(p).items()} for p in self.pairs],
            "verdicts": self.verdicts,
        }
        if per_query:
            result["per_query"] = self.per_query
        return result

    def to_json(self, path: str | Path | None = None, per_query: bool = False) -> str:
        """The :meth:`to_dict` as JSON text (NaN as null), written to ``path`` when given."""
        text = json.dumps(self.to_dict(per_query), indent=2)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    def means_table(self, digits: int = 4) -> str:
        """Runs as rows, metrics as columns: ``mean [low, high]``."""
        rows = [
            [r] + [f"{self.means[m][r]:.{digits}f} [{self.cis[m][r][0]:.{digits}f}, {self.cis[m][r][1]:.{digits}f}]" for m in self.metrics]
            for r in self.runs
        ]
        return _table(rows, ["run", *self.metrics])

    def pairs_table(self, digits: int = 4) -> str:
        """One row per metric and pair: delta, its CI, raw and Holm-corrected p."""
        rows = [
            [
                p.metric,
                f"{p.run} - {p.other}",
                f"{p.delta:+.{digits}f}",
                f"[{p.ci_low:+.{digits}f}, {p.ci_high:+.{digits}f}]",
                _fmt_p(p.p),
                _fmt_p(p.p_holm),
                "*" if p.significant else "",
            ]
            for p in self.pairs
        ]
        return _table(rows, ["metric", "pair", "delta", f"{self.settings.get('confidence', 0.95):.0%} CI", "p", "p Holm", "sig"])

    def __str__(self) -> str:
        s = self.settings
        test = f"randomisation test ({s.get('n_permutations')} sign flips)" if s.get("test") == "randomisation" else "paired t-test"
        head = f"{self.n_queries} queries; {s.get('confidence', 0.95):.0%} paired bootstrap CIs ({s.get('n_bootstrap')} resamples); {test}, Holm-corrected per metric; * p Holm <= {s.get('alpha')}"
        verdicts = "\n".join(self.verdicts.values())
        return f"{head}\n\n{self.means_table()}\n\n{self.pairs_table()}\n\n{verdicts}"


def _fmt_p(p: float) -> str:
    return "n/a" if math.isnan(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _plain(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def compare(
    qrels: object,
    runs: Mapping[str, object] | Sequence[str | Path],
    metrics: str | Iterable[str] = DEFAULT_METRICS,
    *,
    test: Test = "randomisation",
    n_permutations: int = 10_000,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    seed: int = 13,
) -> Comparison:
    """Compare every run with every other: paired deltas, bootstrap CIs, Holm-corrected p-values, verdicts.

    For each metric, each run's mean over the qrels queries gets a paired percentile bootstrap CI, and
    each pair of runs (the later in ``runs`` against the earlier) gets the mean per-query difference, its
    paired bootstrap CI, and a two-sided p-value from Fisher's randomisation test (random sign flips of
    the per-query differences, :func:`retrieval_pipeline.core.evaluation.statistics.stats.randomisation_test`) or the paired
    t-test; the p-values of a metric's pairs are Holm-corrected together, and a pair is significant when
    its Holm p is ``<= alpha``. All draws are seeded from ``seed`` and the metric and run names.

    Args:
        qrels: As :func:`evaluate`.
        runs: ``{name: run}`` (each run as :func:`evaluate` takes it), or TREC run paths (named by file stem).
        metrics: Metric names, any cut-off.
        test: ``randomisation`` (default) or ``t-test``.
        n_permutations: Sign flips of the randomisation test; p below ``1 / n_permutations`` reads as 0.
        n_bootstrap: Bootstrap resamples for the CIs.
        confidence: Coverage of the CIs.
        alpha: Significance level of the Holm-corrected p-values.
        seed: Base seed.

    Returns:
        A :class:`Comparison`; ``print()`` it, or use ``.matrix(metric)``, ``.verdicts``, ``.to_dict()``.

    Raises:
        ValueError: Fewer than two runs, an unknown metric or test, malformed input, or a parameter out of its
            range (the message names it): ``n_permutations`` and ``n_bootstrap`` integers from 1 to
            :data:`MAX_RESAMPLES`, ``confidence`` and ``alpha`` strictly between 0 and 1, ``seed`` an integer.

    Warns:
        EmptyRunWarning, NoSharedQueryWarning: As :func:`evaluate`, per run.
    """
    import pandas as pd

    _check_statistics(n_permutations, n_bootstrap, confidence, alpha, seed)
    pairwise = PairwiseSettings(test, n_permutations, n_bootstrap, confidence, alpha, seed)  # raises on an unknown test
    named = dict(runs) if isinstance(runs, Mapping) else _runs_from_paths(runs)
    if len(named) < 2:
        raise ValueError(f"compare needs at least two runs, got {list(named)}")
    parsed = parse_metrics(metrics)
    judged = load_qrels(qrels)
    query_ids = list(judged)
    values = {name: _per_query(judged, load_scores(run, f"run {name!r}"), parsed, f"run {name!r}", 4) for name, run in named.items()}
    names = list(named)
    wide = {m: pd.DataFrame({r: values[r][m] for r in names}, index=query_ids) for m in (p.name for p in parsed)}
    result = compare_all(wide, pairwise)
    means: dict[str, dict[str, float]] = {}
    cis: dict[str, dict[str, tuple[float, float]]] = {}
    for row in result.means.to_dict("records"):
        means.setdefault(row["metric"], {})[row["run"]] = row["mean"]
        cis.setdefault(row["metric"], {})[row["run"]] = (row["ci_low"], row["ci_high"])
    fields = ("metric", "a", "b", "delta", "ci_low", "ci_high", "p", "p_holm", "significant")
    pairs = [PairComparison(*(row[f] for f in fields)) for row in result.pairs.to_dict("records")]
    settings = {
        "test": test,
        "n_permutations": n_permutations,
        "n_bootstrap": n_bootstrap,
        "confidence": confidence,
        "alpha": alpha,
        "seed": seed,
    }
    per_query = {m: {r: dict(zip(query_ids, values[r][m].tolist())) for r in names} for m in (p.name for p in parsed)}
    return Comparison(names, [p.name for p in parsed], len(query_ids), means, cis, pairs, per_query, settings)


def run_name(path: str | Path) -> str:
    """A run file's name as a run's name: the file name without ``.gz`` and then its last suffix (``bm25.run.gz`` -> ``bm25``)."""
    name = Path(path).name
    return Path(name[: -len(".gz")] if name.endswith(".gz") else name).stem


def _runs_from_paths(paths: Sequence[str | Path]) -> dict[str, object]:
    """``{run_name(path): path}``; raises when two files share a name."""
    named: dict[str, object] = {}
    for path in paths:
        if not isinstance(path, (str, Path)):
            raise ValueError(f"runs must be a dict {{name: run}} or TREC run paths, got {type(path).__name__} in the list")
        stem = run_name(path)
        if stem in named:
            raise ValueError(f"two runs are named {stem!r} ({named[stem]} and {path}); pass a dict {{name: path}}")
        named[stem] = path
    return named
