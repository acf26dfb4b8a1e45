"""benchmarks/peers.py at a tiny scale: every section prints both times and the ratio, or why a peer is skipped."""

from __future__ import annotations

import re

import pytest

TINY = ["--queries", "12", "--depth", "15", "--runs", "3", "--permutations", "200", "--code-docs", "150", "--code-queries", "8"]


@pytest.fixture(scope="module")
def peers(load_benchmark):
    return load_benchmark("peers.py")


def test_ratio_says_who_is_faster(peers) -> None:
    assert peers.ratio(1.0, 2.5) == "2.5x faster"
    assert peers.ratio(3.0, 1.5) == "2.0x slower"


def test_tiny_run_prints_every_peer_side_by_side(peers, capsys) -> None:
    assert peers.main([*TINY, "--skip", "known-item"]) == 0
    out = capsys.readouterr().out
    missing = peers.missing_peers()
    for peer, work in [("pytrec_eval", "in memory"), ("ir_measures", "from files"), ("ranx", "in memory"), ("ranx", "compare")]:
        if peer in missing:
            assert f"{work}: ours" in out and missing[peer] in out
        else:
            assert re.search(rf"{work}: ours [\d.]+ s \| {peer} [\d.]+ s \| ours [\d.]+x (faster|slower)", out), out
    for difference in re.findall(r"largest \|mean difference\| (\S+)\)", out):
        assert float(difference) < 1e-6  # same means as every peer (no ties in the synthetic runs)
    if "ranx" not in missing:
        assert re.search(r"verdicts equal on \d+ of 12 \(metric, pair\)", out), out
    assert "BM25, code: 150 chunks of 120 words of Python source, 8 six-token queries" in out
    if "bm25s" in missing:
        assert missing["bm25s"] in out
    else:
        assert re.search(r"8 queries batched: ours [\d.]+ s \| bm25s [\d.]+ s \| ours [\d.]+x", out), out
        # the same function as bm25s (epsilon 0 = Robertson's clipped idf): any difference is a tie at the cut
        assert re.search(
            r"top-10 agreement with bm25s: the same set on [\d.]+% of queries, the same up to ties at the cut on 100\.0%", out
        ), out
        assert "postings per query" in out
    assert "from gzip files" in out  # timed, or skipped with the reader's error while it cannot read gzip


def test_a_peer_that_is_not_installed_is_skipped_with_its_reason(peers, capsys, monkeypatch) -> None:
    monkeypatch.setattr(peers, "missing_peers", lambda: {name: f"skipped: {name} is not installed" for name in peers.PEERS})
    assert peers.main([*TINY, "--skip", "known-item,code"]) == 0
    out = capsys.readouterr().out
    assert "peers: none installed" in out
    assert "in memory: ours" in out and "| pytrec_eval: skipped: pytrec_eval is not installed" in out
    assert "| ranx: skipped: ranx is not installed" in out


def test_a_workdir_that_does_not_exist_yet_is_made(peers, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(peers, "missing_peers", lambda: {name: f"skipped: {name} is not installed" for name in peers.PEERS})
    workdir = tmp_path / "not" / "there"
    assert peers.main([*TINY, "--skip", "known-item,code,compare", "--workdir", str(workdir)]) == 0
    assert workdir.is_dir() and not any(workdir.iterdir())  # made, and the temporary folder inside it removed again
    assert "in memory: ours" in capsys.readouterr().out
