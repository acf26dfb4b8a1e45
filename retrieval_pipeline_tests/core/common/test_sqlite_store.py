"""The one SQLite store under every cache: its corrupt-file recovery honours a file lock this thread already holds."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from retrieval_pipeline.core.common.cache.sqlite_store import SQLiteStore

SCHEMA = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT NOT NULL)"


def _store(path: Path) -> SQLiteStore:
    return SQLiteStore(path, schema=SCHEMA, table="t", what="test store", timeout=5.0)


def _damaged_file(path: Path) -> None:
    """Header and schema intact, so the file opens; the damage shows only when a query reads a later page."""
    with _store(path) as store:
        store.write_many("INSERT INTO t VALUES (?, ?)", [(f"k{i}", "x" * 200) for i in range(2000)])
    data = bytearray(path.read_bytes())
    assert len(data) > 8 * 4096 and not Path(str(path) + "-wal").exists()  # checkpointed on close
    data[4 * 4096 :] = random.Random(0).randbytes(len(data) - 4 * 4096)
    path.write_bytes(bytes(data))


def test_corruption_found_while_this_thread_holds_the_file_lock_is_repaired_without_waiting_for_itself(tmp_path: Path) -> None:
    """The LLM cache used to take the file lock again here (the other two caches did not): a thread holding it waited forever."""
    path = tmp_path / "store.sqlite"
    _damaged_file(path)
    store = _store(path)
    counts: list[int] = []

    def count_under_the_lock() -> None:
        with store.file_locked():
            counts.append(store.run(lambda conn: conn.execute("SELECT COUNT(*) FROM t").fetchone()[0]))

    worker = threading.Thread(target=count_under_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the recovery waited for the file lock its own thread holds"
    assert counts == [0]  # the damaged file was moved aside and the count ran again on a fresh one
    assert len(list(tmp_path.glob("store.sqlite.corrupt-*"))) == 1
    store.close()


def test_a_store_opened_lazily_creates_no_file_until_used(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "lazy.sqlite"
    store = SQLiteStore(path, schema=SCHEMA, table="t", what="test store", timeout=5.0, open_now=False)
    assert not path.exists()
    store.write_many("INSERT INTO t VALUES (?, ?)", [("a", "1"), ("b", "2")])
    assert store.run(lambda conn: conn.execute("SELECT COUNT(*) FROM t").fetchone()[0]) == 2
    store.close()
    assert path.exists()
