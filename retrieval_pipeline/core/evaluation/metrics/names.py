"""Metric names with any cut-off, parsed once: ``ndcg@20``, ``recall@100``, ``mrr@10``, ``P@3``, ``R-prec``, ``map``.

:func:`parse_metric` turns a name a user types into a :class:`MetricName`: a family (a registry entry's
name without its pattern suffix) and an optional cut-off. Names are case-insensitive; ``@k`` and
trec_eval's ``.k`` / ``_k`` suffixes are the same (``P@3``, ``P.3``, ``P_3``, ``precision@3`` all give
``precision@3``); a persistence is written as ir_measures writes it (``RBP(p=0.9)``).

Everything here is derived from the registry's entries: a family's spellings are its entries' ``aliases``;
it needs a cut-off when only its ``@{k}`` pattern has aliases, takes none when only its plain name has
them, and takes one optionally when both do; an entry with a ``default_k`` (``rbp``) fills it in; the
trec_eval measure with the same value is the entry's ``trec_eval``. The accepted names, as
:func:`known_metrics_hint` lists them::

    hit_rate@k (hit, hits, success)    recall@k (r)       precision@k (p)    mrr, mrr@k (rr, recip_rank)
    ndcg, ndcg@k (ndcg_cut)            map, map@k (ap, map_cut)              r_prec (r-prec, rprec)
    bpref    infap    err@k    rbp(p=0.8)    judged@k
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from retrieval_pipeline.core.evaluation.metrics.entry import MetricInfo
from retrieval_pipeline.core.evaluation.metrics.registry import METRICS


@dataclass(frozen=True)
class _Family:
    """The entries a family's names resolve to: plain (no cut-off) and/or pattern (with one)."""

    plain: MetricInfo | None = None
    pattern: MetricInfo | None = None


def _families(entries: Iterable[MetricInfo]) -> tuple[dict[str, str], dict[str, _Family]]:
    """``({alias: family}, {family: its entries})`` from the entries with aliases; raises on an alias claimed twice."""
    aliases: dict[str, str] = {}
    families: dict[str, _Family] = {}
    for info in entries:
        if not info.aliases:
            continue
        family = families.get(info.base, _Family())
        families[info.base] = _Family(family.plain, info) if info.has_cutoff else _Family(info, family.pattern)
        for alias in (info.base, *info.aliases):
            if aliases.setdefault(alias, info.base) != info.base:
                raise ValueError(f"metric alias {alias!r} names both {aliases[alias]!r} and {info.base!r}")
    return aliases, families


_ALIASES, _FAMILIES = _families(METRICS)

_NAME = re.compile(r"(?P<base>[a-z][a-z_-]*?)(?:[@._](?P<k>[0-9]+)|\(p=(?P<p>[0-9.]+)\))?")


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name.

    Attributes:
        family: ``hit_rate``, ``recall``, ``precision``, ``ndcg``, ``mrr``, ``map``, ``r_prec``, ``bpref``, ...
        k: The cut-off (a persistence in (0, 1) for ``rbp``), or None for the full run or no cut-off.
    """

    family: str
    k: int | float | None = None

    @property
    def entry(self) -> MetricInfo:
        """The registry entry the name resolves to."""
        family = _FAMILIES[self.family]
        info = family.plain if self.k is None else family.pattern
        assert info is not None, self
        return info

    @property
    def name(self) -> str:
        """The canonical name: ``ndcg@20``, ``hit_rate@5``, ``precision@3``, ``map``, ``r_prec``, ``rbp(p=0.8)``."""
        return self.entry.concrete_name(self.k)

    def __str__(self) -> str:
        return self.name

    def describe(self) -> str:
        """One sentence saying what the metric measures."""
        return self.entry.describe(self.k)

    @property
    def trec_eval_measure(self) -> str | None:
        """The trec_eval / pytrec_eval measure with the same value (``ndcg_cut.20``), None when there is none (``mrr@k``).

        ``mrr@k`` equals trec_eval's ``recip_rank`` on the run cut at ``k`` documents.
        """
        template = self.entry.trec_eval
        return template.replace("{k}", str(self.k)) if template else None


#: Largest cut-off accepted: deeper than any run is ranked (metrics allocate per-rank arrays of this length).
MAX_CUTOFF = 1_000_000


def parse_metric(name: str | MetricName) -> MetricName:
    """Parse one metric name (case-insensitive, ``@k``, ``.k`` or ``_k`` cut-off, ``(p=x)`` persistence).

    Args:
        name: ``"ndcg@20"``, ``"P@3"``, ``"R-prec"``, ``"hit@5"``, ``"RBP(p=0.9)"``, ... or an already parsed name.

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
        family = _ALIASES.get(match["base"]) if match and (match["k"] or match["p"]) else None
        k = _parameter(name, match["k"], match["p"], _FAMILIES[family]) if family and match else None
    if family is None:
        raise ValueError(f"unknown metric {name!r}; {known_metrics_hint()}")
    entries = _FAMILIES[family]
    if k is None and entries.plain is None and entries.pattern is not None and entries.pattern.default_k is not None:
        k = entries.pattern.default_k
    if k is None and entries.plain is None:
        raise ValueError(f"metric {name!r} needs a cut-off, e.g. {family}@10")
    if k is not None and entries.pattern is None:
        raise ValueError(f"metric {name!r} takes no cut-off ({entries.plain.describe() if entries.plain else ''})")
    return MetricName(family, k)


def _parameter(name: str, cutoff: str | None, persistence: str | None, family: _Family) -> int | float:
    """The cut-off (an integer >= 1) or the persistence (a number in (0, 1)) of ``name``."""
    takes_fraction = family.pattern is not None and family.pattern.takes_fraction
    if (persistence is not None) != takes_fraction:
        expected = "a persistence, e.g. (p=0.8)" if takes_fraction else "a cut-off, e.g. @10"
        raise ValueError(f"metric {name!r}: it takes {expected}")
    if persistence is not None:
        try:
            value = float(persistence)
        except ValueError:
            value = -1.0
        if not 0 < value < 1:
            raise ValueError(f"metric {name!r}: the persistence p must be a number in (0, 1)")
        return value
    assert cutoff is not None
    # checked on the digits, so no 10**20-sized int is built (metrics allocate per-rank arrays of the cut-off's length)
    if len(cutoff.lstrip("0")) > len(str(MAX_CUTOFF)) or int(cutoff) > MAX_CUTOFF:
        shown = cutoff if len(cutoff) <= 30 else cutoff[:30] + "..."
        raise ValueError(f"metric {name[:60]!r}: the cut-off {shown} is over the limit of {MAX_CUTOFF:,}")
    if int(cutoff) < 1:
        raise ValueError(f"metric {name!r}: the cut-off must be an integer >= 1")
    return int(cutoff)


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


def _spellings(family: str, entries: _Family) -> str:
    """``mrr, mrr@k (rr, recip_rank)``: a family's forms and its other aliases."""
    forms = []
    if entries.plain is not None:
        forms.append(family)
    if entries.pattern is not None:
        forms.append(entries.pattern.concrete_name(entries.pattern.default_k) if entries.pattern.takes_fraction else f"{family}@k")
    others = sorted({a for e in (entries.plain, entries.pattern) if e for a in e.aliases} - {family})
    return ", ".join(forms) + (f" ({', '.join(others)})" if others else "")


def known_metrics_hint() -> str:
    """The accepted names, for error messages."""
    listed = "; ".join(_spellings(family, entries) for family, entries in _FAMILIES.items())
    return f"accepted (k is an integer >= 1, case-insensitive, '@k' or '.k'): {listed}"
