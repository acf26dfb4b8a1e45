"""benchmarks/meaning_reader_probe.py: the margin table counts picks at or above each margin, and the wrong ones."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def probe(load_benchmark):
    return load_benchmark("meaning_reader_probe.py")


def test_counts_keep_the_picks_at_or_above_each_margin_and_count_the_wrong(probe) -> None:
    picks = [(0.30, True, True), (0.144, False, True), (0.20, True, False), (0.05, False, False)]
    assert probe.counts(picks, (0.0, 0.10, 0.15, 0.20, 0.31)) == [(4, 2), (3, 1), (2, 0), (2, 0), (0, 0)]
