"""Faults: a SIGKILL mid-embedding, corrupt caches, two runs at once, torn temp files.

The figures behind each claim are printed (``pytest -s`` shows them):

* kill and resume: a child process embeds N texts through the cache with a slow fake encoder and is
  SIGKILLed after some chunks were committed; the re-run embeds only what is missing, and the work
  lost is at most the one chunk in progress;
* corrupt files: a cache SQLite rejects is moved to ``<file>.corrupt-<timestamp>`` with a warning
  naming both paths, and a fresh cache is used;
* concurrency: two processes (and two threads) filling one cache with the same texts embed each text
  once in total (bound asserted: N + one chunk);
* atomic files: two writers rewriting one Parquet / JSONL file in a loop while a reader reads it: the
  reader only ever sees whole files, and no temp file is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.common.atomic import CorruptFileWarning, atomic_write, atomic_write_text
from retrieval_pipeline.core.common.cache.sqlite_store import is_corrupt_sqlite_error
from retrieval_pipeline.core.filtering.retrieval_dataset import write_jsonl
from retrieval_pipeline.core.retrieval.models.embed_cache import BATCHES_PER_COMMIT, CacheStats, EmbeddingCache
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline_tests.core.retrieval.kit import committed_vectors
from retrieval_pipeline_tests.fakes.encoders import CountingEncoder, KeywordEncoder

PROJECT_ROOT = Path(__file__).resolve().parents[2]
VOCAB = ["cat", "dog", "fish", "bird"]
#: The fake encoders' ``batch_size``; the cache commits every ``BATCH * BATCHES_PER_COMMIT`` texts.
BATCH = 10
CHUNK = BATCH * BATCHES_PER_COMMIT


def _texts(n: int) -> list[str]:
    return [f"text {i}: a cat and a dog {i % 7}" for i in range(n)]


class SlowCountingEncoder(CountingEncoder):
    """A counting keyword encoder with a ``batch_size`` that takes ``delay`` seconds per text."""

    def __init__(self, delay: float) -> None:
        super().__init__(KeywordEncoder(VOCAB))
        self.batch_size = BATCH
        self.delay = delay

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(self.delay * len(texts))
        return super().encode(texts)


# -- 1. kill and resume --------------------------------------------------------------------------

#: Embeds ``n`` texts into the cache at ``path``, printing one line per text as it is encoded.
_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
    from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder

    path, n, delay = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

    class Slow:
        def __init__(self):
            self.inner = KeywordEncoder(["cat", "dog", "fish", "bird"])
            self.model_id, self.dim, self.batch_size = self.inner.model_id, self.inner.dim, 10

        def encode(self, texts):
            for _ in texts:
                time.sleep(delay)
                print("t", flush=True)
            return self.inner.encode(texts)

    texts = [f"text {i}: a cat and a dog {i % 7}" for i in range(n)]
    with EmbeddingCache(path) as cache:
        _, stats = cache.get_or_encode(Slow(), texts)
    print(f"done {stats.misses}", flush=True)
    """
)


def _start_child(path: Path, n: int, delay: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), str(n), str(delay)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_embedding_loses_at_most_one_chunk_and_the_rerun_embeds_only_the_rest(tmp_path: Path) -> None:
    path, n = tmp_path / "embeddings.sqlite", 1000
    child = _start_child(path, n, delay=0.005)  # 40 texts = one chunk = 0.2 s; all of them 5 s
    deadline = time.monotonic() + 90
    try:
        while committed_vectors(path) < 5 * CHUNK:  # five chunks committed
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child committed nothing in 90 s"
            time.sleep(0.02)
        time.sleep(0.3 * CHUNK * 0.005)  # into the next chunk
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    encoded_by_child = out.count("t\n")
    committed = committed_vectors(path)
    lost = encoded_by_child - committed
    assert committed % CHUNK == 0 and 5 * CHUNK <= committed < n  # whole chunks only, and not finished
    assert 0 <= lost <= CHUNK

    counting = CountingEncoder(KeywordEncoder(VOCAB))
    with EmbeddingCache(path) as cache:
        vectors, stats = cache.get_or_encode(counting, _texts(n))
    assert stats == CacheStats(hits=committed, misses=n - committed)
    assert counting.texts_encoded == n - committed  # only the missing ones re-embedded
    np.testing.assert_array_equal(vectors, KeywordEncoder(VOCAB).encode(_texts(n)))
    print(
        f"\n[kill/resume] N={n} batch={BATCH} chunk={CHUNK}: killed after {committed} committed "
        f"({committed // CHUNK} chunks), {encoded_by_child} encoded by the killed run, lost {lost}, "
        f"re-embedded {counting.texts_encoded} on re-run"
    )


def test_an_encoder_failing_mid_way_keeps_the_committed_chunks(tmp_path: Path) -> None:
    class FailsOnThirdCall(SlowCountingEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            if self.calls == 2:
                raise RuntimeError("model crashed")
            return super().encode(texts)

    texts, progress = _texts(200), []
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        with pytest.raises(RuntimeError, match="model crashed"):
            cache.get_or_encode(FailsOnThirdCall(0.0), texts, progress=lambda done, total: progress.append((done, total)))
        assert cache.count() == 2 * CHUNK and progress == [(CHUNK, 200), (2 * CHUNK, 200)]
        again = SlowCountingEncoder(0.0)
        _, stats = cache.get_or_encode(again, texts)
    assert stats == CacheStats(hits=2 * CHUNK, misses=200 - 2 * CHUNK)
    assert again.texts_encoded == 200 - 2 * CHUNK and again.calls == -(-(200 - 2 * CHUNK) // CHUNK)


def test_commit_every_overrides_the_chunk_size(tmp_path: Path) -> None:
    encoder = SlowCountingEncoder(0.0)
    with EmbeddingCache(tmp_path / "e.sqlite", commit_every=7) as cache:
        cache.get_or_encode(encoder, _texts(20))
    assert [len(b) for b in encoder.batches] == [7, 7, 6]
    with pytest.raises(ValueError, match="commit_every"):
        EmbeddingCache(tmp_path / "f.sqlite", commit_every=0)


# -- 2. corrupt caches ---------------------------------------------------------------------------


def _aside(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".corrupt-*"))


def test_a_file_that_is_not_a_database_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(b"this is not SQLite at all\n" * 200)
    with pytest.warns(CorruptFileWarning) as caught:
        cache = EmbeddingCache(path)
    (moved,) = _aside(path)
    message = str(caught[0].message)
    assert str(path) in message and str(moved) in message and "not a database" in message
    assert moved.read_bytes().startswith(b"this is not SQLite")
    encoder = CountingEncoder(KeywordEncoder(VOCAB))
    with cache:
        _, stats = cache.get_or_encode(encoder, ["a cat", "a dog"])
        assert stats == CacheStats(hits=0, misses=2) and cache.count() == 2


def _corrupt_pages(path: Path, first_page: int) -> None:
    """Overwrite every page from ``first_page`` (0-based) on with garbage, keeping the header and schema."""
    page = 4096
    data = bytearray(path.read_bytes())
    assert len(data) > (first_page + 2) * page, "the database is too small to corrupt its later pages"
    rng = np.random.default_rng(0)
    data[first_page * page :] = rng.integers(0, 256, len(data) - first_page * page, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))


def test_a_malformed_cache_found_while_in_use_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    path, texts = tmp_path / "embeddings.sqlite", _texts(3000)
    encoder = CountingEncoder(KeywordEncoder(VOCAB))
    with EmbeddingCache(path) as cache:
        cache.get_or_encode(encoder, texts)
    assert not Path(str(path) + "-wal").exists()  # checkpointed on close
    _corrupt_pages(path, first_page=4)
    with pytest.raises(sqlite3.DatabaseError) as probe, contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("SELECT COUNT(*), SUM(LENGTH(vector)) FROM embeddings").fetchone()
    assert is_corrupt_sqlite_error(probe.value)

    again = CountingEncoder(KeywordEncoder(VOCAB))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with EmbeddingCache(path) as cache:
            vectors, stats = cache.get_or_encode(again, texts)
            assert cache.count() == len(texts)
    (moved,) = _aside(path)
    assert [str(path) in str(w.message) and str(moved) in str(w.message) for w in caught] == [True]
    assert stats.misses == again.texts_encoded and stats.distinct == len(texts)
    np.testing.assert_array_equal(vectors, KeywordEncoder(VOCAB).encode(texts))


@dataclass
class _Call:
    value: dict[str, Any] | None
    model: str = "fake-model"
    prompt_tokens: int = 3
    completion_tokens: int = 2


def test_a_corrupt_llm_cache_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "llm_cache.sqlite"
    path.write_bytes(b"\x00garbage" * 1000)
    with pytest.warns(CorruptFileWarning, match="LLM cache") as caught:
        cache = LLMCache(path)
    (moved,) = _aside(path)
    assert str(path) in str(caught[0].message) and str(moved) in str(caught[0].message)
    with cache:
        assert cache.get("k") is None
        cache.put("k", _Call({"answer": 1}))
        entry = cache.get("k")
        assert entry is not None and entry.value == {"answer": 1} and cache.count() == 1


def test_a_malformed_llm_cache_found_while_in_use_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "llm_cache.sqlite"
    with LLMCache(path) as cache:
        for i in range(3000):
            cache.put(f"key {i}", _Call({"answer": "x" * 50, "i": i}))
    _corrupt_pages(path, first_page=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with LLMCache(path) as cache:
            assert cache.count() == 0  # the damaged table was found, moved aside, and a fresh one started
            cache.put("key 1", _Call({"answer": "y"}))
            entry = cache.get("key 1")
            assert entry is not None and entry.value == {"answer": "y"}
    assert len(_aside(path)) == 1 and [CorruptFileWarning] == [w.category for w in caught]


def test_locks_and_bad_queries_are_not_mistaken_for_corruption() -> None:
    assert not is_corrupt_sqlite_error(sqlite3.OperationalError("database is locked"))
    assert not is_corrupt_sqlite_error(sqlite3.OperationalError("no such table: x"))
    assert not is_corrupt_sqlite_error(ValueError("file is not a database"))
    assert is_corrupt_sqlite_error(sqlite3.DatabaseError("file is not a database"))


# -- 3. concurrency ------------------------------------------------------------------------------


def test_two_processes_embedding_the_same_texts_embed_each_text_once(tmp_path: Path) -> None:
    path, n = tmp_path / "embeddings.sqlite", 400
    children = [_start_child(path, n, delay=0.003) for _ in range(2)]
    outputs = [c.communicate(timeout=120) for c in children]
    assert [c.returncode for c in children] == [0, 0], outputs
    encoded = [out.count("t\n") for out, _ in outputs]
    misses = [int(out.strip().splitlines()[-1].split()[1]) for out, _ in outputs]
    assert encoded == misses
    assert n <= sum(encoded) <= n + CHUNK
    assert committed_vectors(path) == n
    print(f"\n[concurrency/processes] N={n} chunk={CHUNK}: embedded {encoded[0]} + {encoded[1]} = {sum(encoded)}")


def test_two_threads_embedding_the_same_texts_embed_each_text_once(tmp_path: Path) -> None:
    path, n = tmp_path / "embeddings.sqlite", 400
    texts, start = _texts(n), threading.Barrier(2)
    encoders = [SlowCountingEncoder(0.001) for _ in range(2)]
    results: list[tuple[np.ndarray, CacheStats]] = []
    errors: list[BaseException] = []

    def fill(encoder: SlowCountingEncoder) -> None:
        try:
            with EmbeddingCache(path) as cache:
                start.wait(timeout=30)
                results.append(cache.get_or_encode(encoder, texts))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=fill, args=(e,)) for e in encoders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 2
    total = sum(e.texts_encoded for e in encoders)
    assert n <= total <= n + CHUNK
    assert sum(stats.misses for _, stats in results) == total
    expected = KeywordEncoder(VOCAB).encode(texts)
    for vectors, _ in results:
        np.testing.assert_array_equal(vectors, expected)
    print(f"\n[concurrency/threads] N={n} chunk={CHUNK}: embedded {encoders[0].texts_encoded} + {encoders[1].texts_encoded} = {total}")


def test_two_threads_sharing_one_cache_object_embed_each_text_once(tmp_path: Path) -> None:
    n, texts = 200, _texts(200)
    encoders = [SlowCountingEncoder(0.001) for _ in range(2)]
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        threads = [threading.Thread(target=cache.get_or_encode, args=(e, texts)) for e in encoders]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert cache.count() == n
    assert n <= sum(e.texts_encoded for e in encoders) <= n + CHUNK


# -- 4. atomic files -----------------------------------------------------------------------------


def _race(write: Callable[[int, int], None], read: Callable[[], None], rounds: int = 25) -> int:
    """Two writers call ``write(writer, round)`` while a reader calls ``read()``; returns the reads done."""
    errors: list[BaseException] = []
    done = threading.Event()
    reads = 0

    def writer(w: int) -> None:
        try:
            for r in range(rounds):
                write(w, r)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        nonlocal reads
        try:
            while not done.is_set():
                read()
                reads += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    write(0, -1)  # the file exists before the reader starts
    writers = [threading.Thread(target=writer, args=(w,)) for w in (1, 2)]
    reading = threading.Thread(target=reader)
    for t in (*writers, reading):
        t.start()
    for t in writers:
        t.join(timeout=120)
    done.set()
    reading.join(timeout=60)
    assert not errors, errors[:3]
    return reads


def _frame(writer: int, round_: int) -> pd.DataFrame:
    rows = 3000 + 997 * ((writer * 31 + round_) % 11)
    return pd.DataFrame({"writer": writer, "rows": rows, "text": [f"row {i} " * 5 for i in range(rows)]})


def test_parquet_io_manager_never_shows_a_torn_file_to_a_reader(tmp_path: Path) -> None:
    import dagster as dg
    from upath import UPath

    from retrieval_pipeline.defs.io_manager import ParquetIOManager

    manager = ParquetIOManager(base_path=UPath(tmp_path))
    target = UPath(tmp_path / "asset" / "part.parquet")

    def write(writer: int, round_: int) -> None:
        manager.dump_to_path(dg.build_output_context(asset_key=dg.AssetKey("asset")), _frame(writer, round_), target)

    def read() -> None:
        frame = manager.load_from_path(dg.build_input_context(asset_key=dg.AssetKey("asset")), target)
        assert frame["writer"].nunique() == 1 and len(frame) == int(frame["rows"].iloc[0])

    reads = _race(write, read)
    assert reads > 0
    assert [p.name for p in (tmp_path / "asset").iterdir()] == ["part.parquet"]  # no temp file left
    assert (os.stat(tmp_path / "asset" / "part.parquet").st_mode & 0o777) == 0o666 & ~_umask()


def test_write_jsonl_never_shows_a_torn_file_to_a_reader(tmp_path: Path) -> None:
    target = tmp_path / "out" / "retrieval_dataset.jsonl"

    def write(writer: int, round_: int) -> None:
        rows = 2000 + 331 * ((writer * 17 + round_) % 13)
        assert write_jsonl(({"writer": writer, "rows": rows, "i": i, "pad": "x" * 40} for i in range(rows)), target) == rows

    def read() -> None:
        records = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
        assert len({r["writer"] for r in records}) == 1 and len(records) == records[0]["rows"]
        assert [r["i"] for r in records] == list(range(len(records)))

    assert _race(write, read) > 0
    assert [p.name for p in target.parent.iterdir()] == ["retrieval_dataset.jsonl"]


def test_a_failing_writer_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = atomic_write_text(tmp_path / "sub" / "report.json", "old\n")

    def fail(temp: Path) -> None:
        temp.write_text("half a fi", encoding="utf-8")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail)
    assert target.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]
    atomic_write_text(target, "new\n", fsync=True)
    assert target.read_text(encoding="utf-8") == "new\n"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- 5. killed runs: the instance config the Makefile writes --------------------------------------


def test_the_makefile_writes_a_dagster_instance_config_with_run_retries_and_monitoring(tmp_path: Path) -> None:
    import shutil

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    home = tmp_path / "dagster_home"
    subprocess.run(["make", "-s", f"DAGSTER_HOME={home}", f"{home}/dagster.yaml"], cwd=PROJECT_ROOT, check=True, timeout=60)
    probe = (
        "import dagster as dg; i = dg.DagsterInstance.get(); "
        "print(i.run_retries_enabled, i.run_retries_max_retries, i.run_monitoring_enabled, i.run_monitoring_max_runtime_seconds)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, "DAGSTER_HOME": str(home)}, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "1", "True", "43200"]
