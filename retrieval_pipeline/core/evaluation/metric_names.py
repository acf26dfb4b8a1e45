"""Metric names with any cut-off, parsed once: ``ndcg@20``, ``recall@100``, ``mrr@10``, ``P@3``, ``R-prec``, ``map``.

:func:`parse_metric` turns a name a user types into a :class:`MetricName`: a canonical name, a family and
an optional cut-off. Names are case-insensitive; ``@k`` and trec_eval's ``.k`` / ``_k`` suffixes are the
same (``P@3``, ``P.3``, ``P_3``, ``precision@3`` all give ``precision@3``).

=================  ==========================================  ==============================
family             accepted names (``k`` is an integer >= 1)     trec_eval / pytrec_eval measure
=================  ==========================================  ==============================
``hit_rate``       ``hit_rate@k``, ``hit@k``, ``success@k``     ``success.k``
``recall``         ``recall@k``, ``r@k``                       ``recall.k``
``precision``      ``precision@k``, ``p@k``                    ``P.k``
``ndcg``           ``ndcg``, ``ndcg@k``, ``ndcg_cut@k``         ``ndcg``, ``ndcg_cut.k``
``mrr``            ``mrr``, ``mrr@k``, ``rr``, ``recip_rank``  ``recip_rank`` (``@k``: run cut at k)
``map``            ``map``, ``map@k``, ``ap``, ``map_cut@k``    ``map``, ``map_cut.k``
``r_prec``         ``r-prec``, ``rprec``, ``r_prec``           ``Rprec``
=================  ==========================================  ==============================

``hit_rate``, ``recall`` and ``precision`` need a cut-off; ``r_prec`` takes none (its cut-off is each
query's number of relevant documents). Each canonical name is a metric of
:mod:`retrieval_pipeline.core.metric_registry`; the formulas are in :mod:`retrieval_pipeline.core.metric_formulas`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: ``alias -> family``; aliases are lower case, without the cut-off.
_ALIASES: dict[str, str] = {
    "hit_rate": "hit_rate",
    "hit": "hit_rate",
    "hits": "hit_rate",
    "success": "hit_rate",
    "recall": "recall",
    "r": "recall",
    "precision": "precision",
    "p": "precision",
    "ndcg": "ndcg",
    "ndcg_cut": "ndcg",
    "mrr": "mrr",
    "rr": "mrr",
    "recip_rank": "mrr",
    "map": "map",
    "ap": "map",
    "map_cut": "map",
    "r_prec": "r_prec",
    "r-prec": "r_prec",
    "rprec": "r_prec",
}

#: Largest cut-off accepted: deeper than any run is ranked (metrics allocate per-rank arrays of this length).
MAX_CUTOFF = 1_000_000

#: Families that must have a cut-off, and the one that must not.
_NEEDS_CUTOFF = frozenset({"hit_rate", "recall", "precision"})
_NO_CUTOFF = frozenset({"r_prec"})

#: One sentence per family; ``{at}`` becomes ``" in the top k"`` or ``""``.
_DESCRIPTIONS: dict[str, str] = {
    "hit_rate": "1 when a relevant document is in the top {k}, else 0 (trec_eval success_{k})",
    "recall": "share of the query's relevant documents in the top {k} (trec_eval recall_{k})",
    "precision": "share of the top {k} that is relevant, always divided by {k} (trec_eval P_{k})",
    "ndcg": "nDCG{at}: the grade as gain, discounted by log2(rank + 1), over the ideal from the qrels",
    "mrr": "reciprocal rank of the first relevant document{at}, 0 when there is none",
    "map": "average precision{at}: mean precision at each relevant rank, over all relevant documents",
    "r_prec": "precision at R, the query's number of relevant documents (trec_eval Rprec)",
}

_NAME = re.compile(r"(?P<base>[a-z][a-z_-]*?)(?:[@._](?P<k>[0-9]+))?")


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name.

    Attributes:
        family: ``hit_rate``, ``recall``, ``precision``, ``ndcg``, ``mrr``, ``map`` or ``r_prec``.
        k: The cut-off, or None for the full run (``ndcg``, ``mrr``, ``map``) or ``r_prec``.
    """

    family: str
    k: int | None = None

    @property
    def name(self) -> str:
        """The canonical name: ``ndcg@20``, ``hit_rate@5``, ``precision@3``, ``map``, ``r_prec``."""
        return self.family if self.k is None else f"{self.family}@{self.k}"

    def __str__(self) -> str:
        return self.name

    def describe(self) -> str:
        """One phrase saying what the metric measures for one query."""
        at = f" in the top {self.k}" if self.k is not None else ""
        return _DESCRIPTIONS[self.family].format(k=self.k, at=at)

    @property
    def trec_eval_measure(self) -> str | None:
        """The trec_eval / pytrec_eval measure with the same value (``ndcg_cut.20``), None for ``mrr@k``.

        ``mrr@k`` equals trec_eval's ``recip_rank`` on the run cut at ``k`` documents.
        """
        plain = {"ndcg": "ndcg", "mrr": "recip_rank", "map": "map", "r_prec": "Rprec"}
        cut = {"hit_rate": "success", "recall": "recall", "precision": "P", "ndcg": "ndcg_cut", "map": "map_cut"}
        if self.k is None:
            return plain[self.family]
        return f"{cut[self.family]}.{self.k}" if self.family in cut else None


def parse_metric(name: str | MetricName) -> MetricName:
    """Parse one metric name (case-insensitive, ``@k``, ``.k`` or ``_k`` cut-off).

    Args:
        name: ``"ndcg@20"``, ``"P@3"``, ``"R-prec"``, ``"hit@5"``, ... or an already parsed name.

    Returns:
        The :class:`MetricName`.

    Raises:
        ValueError: An unknown name, a cut-off that is missing, 0 or not allowed; the message lists the
            accepted names.
    """
    if isinstance(name, MetricName):
        return name
    if not isinstance(name, str):
        raise ValueError(f"metric names are strings, got {name!r}")
    text = name.strip().lower()
    family, k = _ALIASES.get(text), None
    if family is None:
        match = _NAME.fullmatch(text)
        family = _ALIASES.get(match["base"]) if match and match["k"] else None
        k = _cutoff(name, match["k"]) if family else None
    if family is None:
        raise ValueError(f"unknown metric {name!r}; {known_metrics_hint()}")
    if k is not None and k < 1:
        raise ValueError(f"metric {name!r}: the cut-off must be an integer >= 1")
    if k is None and family in _NEEDS_CUTOFF:
        raise ValueError(f"metric {name!r} needs a cut-off, e.g. {family}@10")
    if k is not None and family in _NO_CUTOFF:
        raise ValueError(f"metric {name!r} takes no cut-off (R-prec cuts each query at its number of relevant documents)")
    return MetricName(family, k)


def _cutoff(name: str, digits: str) -> int:
    """The cut-off of ``name``, refused past :data:`MAX_CUTOFF` (checked on the digits: no 10**20-sized int is built)."""
    if len(digits.lstrip("0")) > len(str(MAX_CUTOFF)) or int(digits) > MAX_CUTOFF:
        shown = digits if len(digits) <= 30 else digits[:30] + "..."
        raise ValueError(f"metric {name[:60]!r}: the cut-off {shown} is over the limit of {MAX_CUTOFF:,}")
    return int(digits)


def parse_metrics(names: str | MetricName | Iterable[str | MetricName]) -> list[MetricName]:
    """Parse one name or several, dropping repeats (``P@3`` and ``precision@3`` are one metric).

    Raises:
        ValueError: As :func:`parse_metric`, or when no name is given.
    """
    if isinstance(names, (str, MetricName)):
        names = [names]
    parsed = list(dict.fromkeys(parse_metric(n) for n in names))
    if not parsed:
        raise ValueError(f"no metric given; {known_metrics_hint()}")
    return parsed


def known_metrics_hint() -> str:
    """The accepted names, for error messages."""
    return (
        "accepted (k is an integer >= 1, case-insensitive, '@k' or '.k'): hit_rate@k (hit@k, success@k), recall@k (r@k), "
        "precision@k (P@k), ndcg, ndcg@k, mrr, mrr@k, map, map@k, R-prec (rprec)"
    )
