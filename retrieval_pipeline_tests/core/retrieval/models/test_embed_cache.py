"""EmbeddingCache: one batched encode for missing texts only, never a re-embed, safe across processes."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.retrieval.models.embed_cache import CacheStats, EmbeddingCache, text_key
from retrieval_pipeline_tests.fakes.encoders import CountingEncoder, KeywordEncoder

VOCAB = ["cat", "dog", "fish", "bird"]
PROJECT_ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def encoder() -> CountingEncoder:
    return CountingEncoder(KeywordEncoder(VOCAB))


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[EmbeddingCache]:
    with EmbeddingCache(tmp_path / "emb.sqlite") as c:
        yield c


def test_text_key_is_sha256_of_utf8() -> None:
    assert text_key("café") == hashlib.sha256("café".encode()).hexdigest()


def test_first_call_encodes_distinct_missing_texts_in_one_batch(cache: EmbeddingCache, encoder: CountingEncoder) -> None:
    texts = ["a cat", "a dog", "a cat", "no keyword"]
    vectors, stats = cache.get_or_encode(encoder, texts)
    assert stats == CacheStats(hits=0, misses=3)
    assert encoder.calls == 1
    assert encoder.batches == [["a cat", "a dog", "no keyword"]]
    assert vectors.dtype == np.float32 and vectors.shape == (4, len(VOCAB) + 1)
    np.testing.assert_array_equal(vectors, encoder.inner.encode(texts))
    assert cache.count(encoder.model_id) == 3


def test_second_call_makes_zero_encoder_calls_and_returns_identical_bits(cache: EmbeddingCache, encoder: CountingEncoder) -> None:
    texts = ["a cat", "a dog", "fish and bird"]
    first, _ = cache.get_or_encode(encoder, texts)
    second, stats = cache.get_or_encode(encoder, texts)
    assert stats == CacheStats(hits=3, misses=0)
    assert encoder.calls == 1
    assert first.tobytes() == second.tobytes()


def test_only_new_or_changed_texts_are_embedded(cache: EmbeddingCache, encoder: CountingEncoder) -> None:
    cache.get_or_encode(encoder, ["a cat", "a dog", "a fish"])
    vectors, stats = cache.get_or_encode(encoder, ["a cat", "a dog!", "a fish", "a bird"])
    assert stats == CacheStats(hits=2, misses=2)
    assert encoder.batches[-1] == ["a dog!", "a bird"]
    assert encoder.texts_encoded == 5
    np.testing.assert_array_equal(vectors, encoder.inner.encode(["a cat", "a dog!", "a fish", "a bird"]))


def test_entries_survive_reopening(tmp_path: Path, encoder: CountingEncoder) -> None:
    path = tmp_path / "emb.sqlite"
    with EmbeddingCache(path) as first:
        expected, _ = first.get_or_encode(encoder, ["a cat", "a dog"])
    with EmbeddingCache(path) as second:
        got, stats = second.get_or_encode(encoder, ["a dog", "a cat"])
    assert stats == CacheStats(hits=2, misses=0) and encoder.calls == 1
    np.testing.assert_array_equal(got, expected[::-1])


def test_entries_are_keyed_by_model_id(cache: EmbeddingCache) -> None:
    small = CountingEncoder(KeywordEncoder(["cat"]))
    large = CountingEncoder(KeywordEncoder(VOCAB))
    cache.get_or_encode(small, ["a cat"])
    _, stats = cache.get_or_encode(large, ["a cat"])
    assert stats.misses == 1 and large.calls == 1
    assert cache.count() == 2 and cache.count(small.model_id) == 1


def test_dim_disagreeing_with_cached_vectors_raises(cache: EmbeddingCache) -> None:
    cache.get_or_encode(KeywordEncoder(["cat"], model_id="same-id"), ["a cat"])
    with pytest.raises(ValueError, match="dim"):
        cache.get_or_encode(KeywordEncoder(VOCAB, model_id="same-id"), ["a dog"])


def test_empty_input(cache: EmbeddingCache, encoder: CountingEncoder) -> None:
    vectors, stats = cache.get_or_encode(encoder, [])
    assert vectors.shape == (0, len(VOCAB) + 1) and stats == CacheStats(0, 0) and encoder.calls == 0


def test_file_uses_wal(cache: EmbeddingCache) -> None:
    with sqlite3.connect(cache.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
    from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder

    path, start = Path(sys.argv[1]), int(sys.argv[2])
    encoder = KeywordEncoder(["cat", "dog", "fish", "bird"])
    with EmbeddingCache(path, timeout=30) as cache:
        for round_ in range(20):
            texts = [f"cat {i} dog {round_ % 3}" for i in range(start, start + 200)]
            cache.get_or_encode(encoder, texts)
    print("ok")
    """
)


def test_two_processes_fill_one_cache_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), str(start)],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for start in (0, 100)  # overlapping texts 100..199
    ]
    outputs = [w.communicate(timeout=120) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    encoder = CountingEncoder(KeywordEncoder(VOCAB))
    with EmbeddingCache(path) as cache:
        assert cache.count() == 300 * 3
        texts = [f"cat {i} dog {r}" for r in range(3) for i in range(300)]
        _, stats = cache.get_or_encode(encoder, texts)
    assert stats == CacheStats(hits=900, misses=0) and encoder.calls == 0


def test_10k_cached_lookup_is_fast(cache: EmbeddingCache) -> None:
    encoder = CountingEncoder(KeywordEncoder(VOCAB))
    texts = [f"passage {i} about a cat and a dog" for i in range(10_000)]
    cache.get_or_encode(encoder, texts)
    calls_to_fill = encoder.calls  # the fill commits chunk by chunk (several calls)
    start = time.perf_counter()
    vectors, stats = cache.get_or_encode(encoder, texts)
    seconds = time.perf_counter() - start
    assert stats == CacheStats(hits=10_000, misses=0) and encoder.calls == calls_to_fill
    assert vectors.shape == (10_000, len(VOCAB) + 1)
    assert seconds < 10.0, f"10k cached lookups took {seconds:.2f} s"
