"""``benchmarks/verify_adk_mc.py``: the fixed design/check split, the scorecard per half, and the timing line."""

from __future__ import annotations

import hashlib
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark) -> ModuleType:
    return load_benchmark("verify_adk_mc.py")


def test_the_halves_are_a_fixed_hash_of_the_id(bench) -> None:
    ids = [f"suite:question_{i}" for i in range(200)]
    halves = [bench.half_of(i) for i in ids]
    assert halves == [bench.half_of(i) for i in ids]  # fixed, not random
    assert all(h == ("design" if int(hashlib.sha256(i.encode()).hexdigest()[0], 16) % 2 == 0 else "check") for i, h in zip(ids, halves))
    assert 60 < halves.count("design") < 140  # about half each


def test_the_scorecard_counts_per_half_and_a_valid_mutant_as_false_valid(bench) -> None:
    design = next(i for i in (f"q{n}" for n in range(100)) if bench.half_of(i) == "design")
    check, drifted = [i for i in (f"q{n}" for n in range(100)) if bench.half_of(i) == "check"][:2]
    unmodified = [{"case_id": design, "verdict": "Valid"}, {"case_id": check, "verdict": "Unverifiable"},
                  {"case_id": drifted, "verdict": "Incorrect"}]  # fmt: skip
    mutants = [
        {"case_id": design, "mark": "B", "next": True, "verdict": "Incorrect"},
        {"case_id": design, "mark": "C", "next": False, "verdict": "Valid"},  # a wrong mark certified: false Valid
        {"case_id": check, "mark": "A", "next": True, "verdict": "Unverifiable"},
        {"case_id": drifted, "mark": "B", "next": True, "verdict": "Valid"},  # the key drifted: counted apart
    ]
    card = bench.scorecard(unmodified, mutants)
    assert (card["design"]["Valid"], card["design"]["moved_flagged"], card["design"]["every_flagged"]) == (1, 1, 1)
    assert card["design"]["false_valid"] == [f"{design}:C"] and card["check"]["false_valid"] == []
    assert card["check"]["valid_after_drift"] == [f"{drifted}:B"] and card["check"]["incorrect"] == [drifted]
    assert (card["all"]["questions"], card["all"]["moved_total"], card["all"]["every_total"]) == (3, 3, 4)
    assert bench.next_letter(["A", "B", "C"], "C") == "A"


def test_the_timing_line_reads_the_seconds_the_report_records(bench) -> None:
    """The report's meta has ``total_seconds``; the line read ``seconds`` and printed "verification None s"."""
    assert bench.timing_line({"total_seconds": 52.1}, 61.04, 3) == "proposals 3; verification 52.1 s; wall 61.0 s"
    assert "None" not in bench.timing_line({}, 1.0, 0) and "not recorded" in bench.timing_line({}, 1.0, 0)
    assert "(remediation 9.8 s)" in bench.timing_line({"total_seconds": 5, "remediation_seconds": 9.8}, 20.0, 1)
