"""Tests for the content-keyed result cache: exact hits, misses on any change, corrupt entries and files, concurrency."""

from __future__ import annotations

import hashlib
import json
import math
import random
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.common.atomic import CorruptFileWarning
from retrieval_pipeline.core.common.cache.result_cache import (
    RESULTS_FILE,
    ResultCache,
    active_result_cache,
    canonical_json,
    content_key,
    using_result_cache,
)


class Counting:
    """A compute function that counts its calls."""

    def __init__(self, value: Any) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.value


@pytest.fixture
def cache(tmp_path: Path):
    with ResultCache(tmp_path / "cache" / RESULTS_FILE) as opened:
        yield opened


def tamper(path: Path, sql: str, *args: Any) -> None:
    """Change the file behind the cache's back, as a crash, a disk error or a bug elsewhere might."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, args)
    conn.close()


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


def test_content_key_is_sha256_of_canonical_json() -> None:
    expected = hashlib.sha256(b'["v1",{"a":1,"b":[2,3]},"text \xc3\xa9"]').hexdigest()  # written out by hand
    assert content_key("v1", {"b": [2, 3], "a": 1}, "text é") == expected
    assert canonical_json({"b": 1, "a": 0.1}) == '{"a":0.1,"b":1}'


@pytest.mark.parametrize(
    "changed",
    [
        ("v2", {"a": 1}, ["x", "y"]),
        ("v1", {"a": 2}, ["x", "y"]),
        ("v1", {"a": 1}, ["x", "y "]),
        ("v1", {"a": 1}, ["y", "x"]),
        ("v1", {"a": 1.0000001}, ["x", "y"]),
    ],
)
def test_content_key_changes_with_any_part(changed: tuple[Any, ...]) -> None:
    assert content_key(*changed) != content_key("v1", {"a": 1}, ["x", "y"])


def test_content_key_refuses_nan_and_unserialisable_values() -> None:
    with pytest.raises(ValueError):
        content_key(math.nan)
    with pytest.raises(TypeError):
        content_key(object())


# --------------------------------------------------------------------------------------------------
# Hits and misses
# --------------------------------------------------------------------------------------------------


def test_miss_computes_and_stores_then_hit_returns_the_same_without_computing(cache: ResultCache) -> None:
    compute = Counting({"rows": [["d1", 0.5], ["d2", 1.0]], "best": None})
    assert cache.get_or_compute("ns", "k", compute) == (compute.value, False)
    assert cache.get_or_compute("ns", "k", compute) == (compute.value, True)
    assert compute.calls == 1 and cache.count("ns") == 1


def test_floats_and_text_come_back_bit_for_bit(cache: ResultCache) -> None:
    rng = random.Random(7)
    value = {"ratios": [rng.random() for _ in range(200)] + [1 / 3, 2.0 * 157 / 401, 5e-324], "text": "Ünïcode \U0001f600 \x00"}
    cache.put("ns", "k", value)
    (stored,) = cache.get("ns", "k")
    assert stored == value
    assert [x.hex() for x in stored["ratios"]] == [x.hex() for x in value["ratios"]]


def test_namespaces_and_keys_are_separate_and_none_is_a_value(cache: ResultCache) -> None:
    cache.put("a", "k", 1)
    cache.put("b", "k", None)
    assert (cache.get("a", "k"), cache.get("b", "k"), cache.get("a", "other")) == ((1,), (None,), None)


def test_a_new_process_reads_what_an_earlier_one_stored(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    with ResultCache(path) as first:
        first.get_or_compute("ns", "k", Counting([1, 2]))
    with ResultCache(path) as second:
        compute = Counting("never used")
        assert second.get_or_compute("ns", "k", compute) == ([1, 2], True) and compute.calls == 0


def test_encode_and_decode_wrap_the_stored_data(cache: ResultCache) -> None:
    compute = Counting((1, 2))
    for hit in (False, True):
        assert cache.get_or_compute("ns", "k", compute, encode=list, decode=tuple) == ((1, 2), hit)
    assert cache.get("ns", "k") == ([1, 2],)


def test_many_at_once_reads_the_sound_entries_and_writes_all_or_nothing(cache: ResultCache) -> None:
    cache.put_many("ns", {f"k{i}": i / 7 for i in range(2000)})  # more keys than one IN (...) lookup takes
    found = cache.get_many("ns", [f"k{i}" for i in range(0, 2000, 3)] + ["absent", "k0"])
    assert found == {f"k{i}": i / 7 for i in range(0, 2000, 3)}
    tamper(cache.path, "UPDATE results SET payload = '0.5' WHERE key = 'k3'")
    with pytest.warns(CorruptFileWarning, match="ns/k3 is corrupt"):
        assert cache.get_many("ns", ["k3", "k6"]) == {"k6": 6 / 7}
    with pytest.raises(ValueError):
        cache.put_many("ns", {"new": 1.0, "bad": math.inf})
    assert cache.get("ns", "new") is None and cache.count("ns") == 1999  # k3 deleted, nothing of the failed batch stored


def test_unused_cache_creates_no_file(tmp_path: Path) -> None:
    with using_result_cache(tmp_path / "cache"):
        pass
    assert not (tmp_path / "cache").exists()


def test_using_result_cache_scopes_the_active_cache(tmp_path: Path) -> None:
    assert active_result_cache() is None
    with using_result_cache(tmp_path) as cache:
        assert active_result_cache() is cache and cache.path == tmp_path / RESULTS_FILE
        with using_result_cache(tmp_path / "inner") as inner:
            assert active_result_cache() is inner
        assert active_result_cache() is cache
    assert active_result_cache() is None


# --------------------------------------------------------------------------------------------------
# Corruption
# --------------------------------------------------------------------------------------------------


def test_entry_with_a_wrong_checksum_is_recomputed_not_trusted(cache: ResultCache) -> None:
    cache.put("ns", "k", {"ratio": 0.5})
    tamper(cache.path, "UPDATE results SET payload = ? WHERE key = 'k'", json.dumps({"ratio": 0.9}))
    compute = Counting({"ratio": 0.5})
    with pytest.warns(CorruptFileWarning, match="ns/k is corrupt.*checksum"):
        assert cache.get_or_compute("ns", "k", compute) == ({"ratio": 0.5}, False)
    assert compute.calls == 1 and cache.get("ns", "k") == ({"ratio": 0.5},)


def test_entry_that_is_not_json_is_recomputed(cache: ResultCache) -> None:
    payload = '{"ratio": 0.'
    cache.count()  # creates the file and its table
    tamper(cache.path, "INSERT INTO results VALUES ('ns', 'k', ?, ?)", payload, _sha(payload))
    with pytest.warns(CorruptFileWarning, match="JSONDecodeError"):
        assert cache.get_or_compute("ns", "k", Counting(1)) == (1, False)


def test_entry_the_decoder_rejects_is_recomputed(cache: ResultCache) -> None:
    cache.put("ns", "k", {"unexpected": "shape"})
    compute = Counting({"ratio": 0.5})

    def decode(data: Any) -> float:
        return float(data["ratio"])

    with pytest.warns(CorruptFileWarning, match="KeyError"):
        assert cache.get_or_compute("ns", "k", compute, encode=lambda r: {"ratio": r}, decode=decode) == ({"ratio": 0.5}, False)
    assert cache.get("ns", "k") == ({"ratio": {"ratio": 0.5}},)  # what encode made of the computed value


def test_corrupt_file_is_moved_aside_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_bytes(b"this is not a SQLite database, just garbage bytes" * 100)
    with pytest.warns(CorruptFileWarning, match="moved it to"), ResultCache(path) as cache:
        assert cache.get_or_compute("ns", "k", Counting(3)) == (3, False)
    assert [p.name.split("-")[0] for p in tmp_path.glob(f"{RESULTS_FILE}.corrupt-*")] == [f"{RESULTS_FILE}.corrupt"]
    with ResultCache(path) as cache:
        assert cache.get("ns", "k") == (3,)


def test_file_found_malformed_while_in_use_is_moved_aside_and_replaced(tmp_path: Path) -> None:
    """Header and schema intact, so the file opens; the damage shows only when a query reads a later page."""
    path = tmp_path / RESULTS_FILE
    with ResultCache(path) as cache:
        for i in range(2000):
            cache.put("ns", f"k{i}", {"text": "x" * 200, "i": i})
    data = bytearray(path.read_bytes())
    assert len(data) > 8 * 4096 and not Path(str(path) + "-wal").exists()  # checkpointed on close
    data[4 * 4096 :] = random.Random(0).randbytes(len(data) - 4 * 4096)
    path.write_bytes(bytes(data))
    with ResultCache(path) as cache:
        with pytest.warns(CorruptFileWarning, match="moved it to"):
            assert cache.count() == 0  # the scan hits a damaged page: the file is replaced, the count retried
        assert cache.get_or_compute("ns", "k1", Counting(5)) == (5, False)
    assert len(list(tmp_path.glob(f"{RESULTS_FILE}.corrupt-*"))) == 1


# --------------------------------------------------------------------------------------------------
# Concurrency
# --------------------------------------------------------------------------------------------------


def test_two_caches_on_one_file_compute_an_entry_once(tmp_path: Path) -> None:
    """Two openers (as two processes would be), racing on one key: the file lock makes the second read, not compute."""
    path = tmp_path / RESULTS_FILE
    caches = [ResultCache(path), ResultCache(path)]
    for c in caches:
        c.count()  # open both before the race
    calls: list[int] = []
    start = threading.Barrier(2)
    results: list[tuple[Any, bool]] = []

    def slow_compute() -> int:
        calls.append(1)
        threading.Event().wait(0.2)  # long enough for the other thread to reach the lock
        return 42

    def run(c: ResultCache) -> None:
        start.wait()
        results.append(c.get_or_compute("ns", "k", slow_compute))

    threads = [threading.Thread(target=run, args=(c,)) for c in caches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for c in caches:
        c.close()
    assert len(calls) == 1
    assert sorted(results, key=lambda r: r[1]) == [(42, False), (42, True)]


def _sha(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
