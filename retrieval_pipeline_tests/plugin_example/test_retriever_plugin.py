"""The worked plug-in example passes the retriever contract, and the contract catches broken plug-ins.

This is the test to copy for your own class: ``check_contract(YourFactory, {...params}).passed``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from examples.retriever_plugin.tfidf import TfidfRetriever
from retrieval_pipeline.contract import main
from retrieval_pipeline.core.retrieval.contract import check_contract


@pytest.mark.parametrize("char_ngrams", [0, 3])
def test_the_example_plugin_satisfies_the_contract(char_ngrams: int) -> None:
    report = check_contract(TfidfRetriever, {"char_ngrams": char_ngrams})
    assert report.passed, report.summary()
    assert report.checks == 10  # 3 ks x (contract + determinism), k=0, empty, alone-vs-batch, save/load


def test_the_command_line_runs_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["examples.retriever_plugin.tfidf:TfidfRetriever", "--param", "char_ngrams=3"]) == 0
    assert "10 checks, 0 violation(s)" in capsys.readouterr().out
    assert main(["examples.retriever_plugin.nope:Missing"]) == 2


class Unsorted(TfidfRetriever):
    def search(self, queries, k):
        return [list(reversed(hits)) for hits in super().search(queries, k)]


class TooMany(TfidfRetriever):
    def search(self, queries, k):
        return [[(d, 1.0 - i / 100) for i, d in enumerate(self.doc_ids)] for _ in queries]


class Random(TfidfRetriever):
    calls = 0

    def search(self, queries, k):
        Random.calls += 1
        hits = super().search(queries, k)
        return [h[:1] if Random.calls % 2 else h for h in hits]


class Raises(TfidfRetriever):
    def build(self, doc_ids, texts):
        raise RuntimeError("index server down")


@pytest.mark.parametrize(
    ("plugin", "violation"),
    [
        (Unsorted, "not sorted by score descending"),
        (TooMany, "hits for k=1"),
        (Random, "answers differ between two identical calls"),
        (Raises, "construct/build raised RuntimeError: index server down"),
    ],
)
def test_the_contract_reports_what_a_broken_plugin_does(plugin: type, violation: str) -> None:
    report = check_contract(plugin)
    assert not report.passed and any(violation in v for v in report.violations), report.summary()


def test_the_example_scores_by_the_formula_of_its_docstring() -> None:
    """Sublinear tf x smoothed idf, rows L2-normalised, cosine: worked by hand on two documents (words only)."""
    retriever = TfidfRetriever(char_ngrams=0)
    retriever.build(["a", "b"], ["cat cat dog", "dog fish"])
    idf = {"cat": math.log(3 / 2) + 1, "dog": math.log(3 / 3) + 1, "fish": math.log(3 / 2) + 1}
    doc_a = np.array([(1 + math.log(2)) * idf["cat"], idf["dog"], 0.0])
    query = np.array([idf["cat"], 0.0, 0.0])  # "cat"
    expected = float(doc_a @ query / np.linalg.norm(doc_a) / np.linalg.norm(query))
    (hit,) = retriever.search(["cat"], 5)[0]
    assert hit[0] == "a" and hit[1] == pytest.approx(expected, abs=1e-12)
    assert retriever.features("Read_File x") == ["w:read_file", "w:x"]
    assert TfidfRetriever(char_ngrams=3).features("ab") == ["w:ab", "c: ab", "c:ab "]
