"""The retriever contract as a test anyone can run against their own plug-in class.

:func:`check_contract` builds the plug-in on a small corpus (or yours), asks it questions and returns
every violation it finds; an empty list means the class satisfies the contract the pipeline enforces
on every answer (:class:`~retrieval_pipeline.core.retrieval.factory.CheckedRetriever`) plus what makes
runs reproducible:

1. ``build(doc_ids, texts)`` and ``search(queries, k)`` exist and do not raise;
2. one answer per query, each at most ``k`` ``(doc_id, score)`` hits, finite scores, sorted by score
   descending, each doc id once and every doc id from the corpus;
3. ``k = 0`` gives empty lists and no queries give no answers;
4. the same call twice gives the same answers (deterministic), and a query asked alone gets the same
   answer as in a batch;
5. with ``save``/``load``, a reloaded instance answers exactly as the original.

Command line: ``python -m retrieval_pipeline.contract package.module:factory [--param name=value ...]``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.retrieval.base import QueryError, RetrieverError
from retrieval_pipeline.core.retrieval.factory import CheckedRetriever

#: A small corpus with near-duplicates and shared words, so ties and ranking are exercised.
SAMPLE_CORPUS: dict[str, str] = {
    "json.dumps": "json.dumps(obj): serialize obj to a JSON formatted str.",
    "json.loads": "json.loads(s): deserialize s (a str containing a JSON document) to a Python object.",
    "json.JSONDecoder": "class json.JSONDecoder: simple JSON decoder.",
    "csv.reader": "csv.reader(csvfile): return a reader object that iterates over lines of a CSV file.",
    "csv.DictReader": "class csv.DictReader: read rows of a CSV file as dictionaries keyed by the header.",
    "csv.DictWriter": "class csv.DictWriter: write dictionaries as rows of a CSV file, with a header row.",
    "os.path.join": "os.path.join(path, *paths): join one or more path components intelligently.",
    "os.path.exists": "os.path.exists(path): return True if path refers to an existing path.",
    "pathlib.Path": "class pathlib.Path: a filesystem path; joins with the / operator.",
    "collections.OrderedDict": "class collections.OrderedDict: a dict that remembers insertion order.",
    "collections.Counter": "class collections.Counter: a dict subclass for counting hashable objects.",
    "duplicate.a": "identical text for a tie",
    "duplicate.b": "identical text for a tie",
}
SAMPLE_QUERIES: tuple[str, ...] = (
    "How do I turn a dict into a JSON string?",
    "read CSV rows as dictionaries",
    "join path components",
    "identical text for a tie",
    "count hashable objects",
    "zzzz no such words qqqq",
    "",
)


@dataclass
class ContractReport:
    """What :func:`check_contract` found."""

    factory: str
    violations: list[str] = field(default_factory=list)
    checks: int = 0

    @property
    def passed(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        head = f"{self.factory}: {self.checks} checks, {len(self.violations)} violation(s)"
        return "\n".join([head, *(f"  - {v}" for v in self.violations)])


def check_contract(
    factory: Callable[..., Any],
    params: Mapping[str, Any] | None = None,
    corpus: Mapping[str, str] | None = None,
    queries: Sequence[str] = SAMPLE_QUERIES,
    ks: Sequence[int] = (1, 3, 10),
    label: str | None = None,
) -> ContractReport:
    """Run the contract against ``factory(**params)``; see the module docstring for what is checked."""
    corpus = dict(corpus or SAMPLE_CORPUS)
    report = ContractReport(label or getattr(factory, "__qualname__", repr(factory)))
    try:
        plugin = factory(**dict(params or {}))
        plugin.build(list(corpus), list(corpus.values()))
    except Exception as exc:  # the contract says it must not raise: report, do not crash
        report.violations.append(f"construct/build raised {type(exc).__name__}: {exc}")
        return report
    checked = CheckedRetriever(plugin, report.factory, "contract sample", frozenset(corpus))
    for k in ks:
        _expect(report, f"search(k={k})", lambda k=k: checked.search(list(queries), k))
        _expect(
            report, f"search is deterministic (k={k})", lambda k=k: _same(plugin.search(list(queries), k), plugin.search(list(queries), k))
        )
    _expect(report, "k=0 gives empty lists", lambda: _all_empty(checked.search(list(queries), 0)))
    _expect(report, "no queries give no answers", lambda: _equal(checked.search([], 5), []))
    _expect(
        report,
        "a query alone answers as in a batch",
        lambda: _same([plugin.search([q], 5)[0] for q in queries], plugin.search(list(queries), 5)),
    )
    if callable(getattr(plugin, "save", None)) and callable(getattr(plugin, "load", None)):
        _expect(report, "save/load round trip", lambda: _round_trip(factory, params, plugin, queries))
    return report


def _expect(report: ContractReport, what: str, check: Callable[[], Any]) -> None:
    report.checks += 1
    try:
        check()
    except RetrieverError as exc:
        report.violations.append(f"{what}: {exc}")
    except AssertionError as exc:
        report.violations.append(f"{what}: {exc}")
    except Exception as exc:
        report.violations.append(f"{what}: raised {type(exc).__name__}: {exc}")


def _plain(answers: Any) -> list[Any]:
    return [a if isinstance(a, QueryError) else [(str(d), float(s)) for d, s in a] for a in answers]


def _same(first: Any, second: Any) -> None:
    if _plain(first) != _plain(second):
        raise AssertionError("answers differ between two identical calls")


def _equal(got: Any, expected: Any) -> None:
    if got != expected:
        raise AssertionError(f"expected {expected!r}, got {got!r}"[:300])


def _all_empty(answers: Sequence[Any]) -> None:
    if any(not isinstance(a, QueryError) and len(a) for a in answers):
        raise AssertionError("returned hits for k=0")


def _round_trip(factory: Callable[..., Any], params: Mapping[str, Any] | None, plugin: Any, queries: Sequence[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plugin.save(Path(tmp) / "index")
        other = factory(**dict(params or {}))
        other.load(Path(tmp) / "index")
        _same(plugin.search(list(queries), 10), other.search(list(queries), 10))
