"""``benchmarks/metrics_speed.py``: the synthetic set has the promised shape, and a tiny run prints every line with both tools."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def speed(load_benchmark) -> ModuleType:
    return load_benchmark("metrics_speed.py")


def test_synthetic_set_shape(speed: ModuleType) -> None:
    corpus = [f"d{i}" for i in range(400)]
    qrels = speed.synthetic_qrels(30, corpus)
    run = speed.synthetic_run(qrels, corpus, 50, seed=1)
    assert len(qrels) == 30 and all(1 <= len(j) <= 8 and max(j.values()) >= 1 for j in qrels.values())
    assert set(run) == set(qrels) and all(len(hits) == 50 for hits in run.values())
    assert any(len(set(hits.values())) < len(hits) for hits in run.values())  # ties
    assert any(d in run[q] for q, judged in qrels.items() for d in judged)


def test_tiny_run_prints_both_tools_and_compare(
    speed: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ir_measures")
    pytest.importorskip("pytrec_eval")
    monkeypatch.setattr(sys, "argv", ["metrics_speed.py", "--queries", "20", "--docs", "30", "--runs", "2", "--permutations", "100"])
    speed.main()
    out = capsys.readouterr().out
    assert "pytrec_eval" in out and "ir_measures" in out and "compare from files: 2 runs, 4 pair tests" in out
