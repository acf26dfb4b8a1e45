"""Sharded, resumable embedding and progress in the dense retriever.

A shard is one chunk the embedding cache commits (``batch_size x BATCHES_PER_COMMIT`` texts). A
SIGKILLed :meth:`DenseRetriever.build` loses at most the shard in progress; the re-run embeds only the
missing shards and builds the same index a clean build does. Progress reaches the caller once per
committed shard, and :class:`~retrieval_pipeline.core.common.progress.Progress` turns it into throttled log lines (``pytest -s`` prints the
kill/resume figures).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from retrieval_pipeline.core.common.progress import Progress, progress_line
from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.kinds.dense import DenseSpec
from retrieval_pipeline.core.retrieval.models.embed_cache import BATCHES_PER_COMMIT, EmbeddingCache
from retrieval_pipeline_tests.core.retrieval.kit import build, committed_vectors, fake_model_folder, parse_as
from retrieval_pipeline_tests.fakes.encoders import CountingEncoder, KeywordEncoder

PROJECT_ROOT = Path(__file__).resolve().parents[4]
VOCAB = ["cat", "dog", "fish", "bird"]
#: The child's encoder batch size; the cache commits a shard every ``BATCH * BATCHES_PER_COMMIT`` texts.
BATCH = 10
SHARD = BATCH * BATCHES_PER_COMMIT


def corpus(n: int) -> tuple[list[str], list[str]]:
    """``n`` distinct texts with varied keyword counts (so varied vectors, and some exact ties)."""
    texts = [f"text {i}: " + " ".join([VOCAB[i % 4]] * (1 + i % 3) + [VOCAB[(i // 4) % 4]]) for i in range(n)]
    return [f"doc{i}" for i in range(n)], texts


class Recorder:
    """A progress callback that keeps every ``(done, total)`` it is given."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))


# -- 1. kill and resume at the retriever level ------------------------------------------------------

#: Builds a DenseRetriever over ``n`` texts through the cache at ``path`` with a slow keyword encoder;
#: prints ``t`` per text encoded and ``p <done> <total>`` per committed shard.
_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
    from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
    from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder
    from retrieval_pipeline_tests.core.retrieval.models.test_dense_shards import BATCH, VOCAB, corpus

    path, n, delay = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

    class Slow:
        def __init__(self):
            self.inner = KeywordEncoder(VOCAB)
            self.model_id, self.dim, self.batch_size = self.inner.model_id, self.inner.dim, BATCH

        def encode(self, texts):
            for _ in texts:
                time.sleep(delay)
                print("t", flush=True)
            return self.inner.encode(texts)

    doc_ids, texts = corpus(n)
    with EmbeddingCache(path) as cache:
        DenseRetriever("dense_kill").build(doc_ids, texts, Slow(), cache, lambda done, total: print(f"p {done} {total}", flush=True))
    print("done", flush=True)
    """
)


def _kill_after_shards(path: Path, n: int, shards: int, delay: float) -> str:
    """Start the child, SIGKILL it a third of the way into shard ``shards + 1``; return its output.

    The kill is written out again in core/test_faults.py (the embedding cache's SIGKILL test) on purpose: the
    kill-and-resume tests stay as they were proven, each reading as one piece."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), str(n), str(delay)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    try:
        while committed_vectors(path) < shards * SHARD:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child committed nothing in 60 s"
            time.sleep(0.02)
        time.sleep(0.3 * SHARD * delay)  # into the next shard
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return out


def test_a_killed_build_loses_at_most_one_shard_and_the_rerun_embeds_only_the_missing_ones(tmp_path: Path) -> None:
    path, n = tmp_path / "embeddings.sqlite", 600
    out = _kill_after_shards(path, n, shards=3, delay=0.005)  # one shard = 40 texts = 0.2 s; all = 3 s
    committed = committed_vectors(path)
    encoded_by_child = out.count("t\n")
    reported = [tuple(map(int, line.split()[1:])) for line in out.splitlines() if line.startswith("p ")]
    assert committed % SHARD == 0 and 3 * SHARD <= committed < n  # whole shards only, and not finished
    assert 0 <= encoded_by_child - committed <= SHARD  # lost work: at most the shard in progress
    assert reported == [(SHARD * (i + 1), n) for i in range(len(reported))] and len(reported) >= committed // SHARD - 1

    doc_ids, texts = corpus(n)
    counting, progress = CountingEncoder(KeywordEncoder(VOCAB)), Recorder()
    with EmbeddingCache(path) as cache:
        resumed = DenseRetriever("dense_kill").build(doc_ids, texts, counting, cache, progress)
        stats = resumed.build_stats
        assert stats is not None and (stats.embedded_now, stats.from_cache) == (n - committed, committed)
        assert counting.texts_encoded == n - committed  # only the missing shards are embedded again
        assert progress.calls[-1] == (n - committed, n - committed)

        clean = DenseRetriever("dense_kill").build(doc_ids, texts, KeywordEncoder(VOCAB))
        np.testing.assert_array_equal(resumed.faiss_index.reconstruct_n(0, n), clean.faiss_index.reconstruct_n(0, n))
        queries = ["cat", "dog dog fish", "bird cat", "nothing"]
        assert resumed.search(queries, 25) == clean.search(queries, 25)
    print(
        f"\n[dense kill/resume] N={n} shard={SHARD}: killed after {committed} committed ({committed // SHARD} shards), "
        f"{encoded_by_child} encoded by the killed run, lost {encoded_by_child - committed}, re-embedded {counting.texts_encoded}"
    )


# -- 2. progress callbacks ----------------------------------------------------------------------------


def test_progress_is_called_once_per_committed_shard_over_the_missing_texts(tmp_path: Path) -> None:
    doc_ids, texts = corpus(30)
    with EmbeddingCache(tmp_path / "e.sqlite", commit_every=7) as cache:
        first = Recorder()
        DenseRetriever().build(doc_ids[:10], texts[:10], KeywordEncoder(VOCAB), cache, first)
        assert first.calls == [(7, 10), (10, 10)]
        rest = Recorder()
        DenseRetriever().build(doc_ids, texts, KeywordEncoder(VOCAB), cache, rest)
        assert rest.calls == [(7, 20), (14, 20), (20, 20)]  # the 10 cached texts are not counted
        again = Recorder()
        DenseRetriever().build(doc_ids, texts, KeywordEncoder(VOCAB), cache, again)
        assert again.calls == []  # nothing to embed
    no_cache = Recorder()
    DenseRetriever().build(doc_ids, texts, KeywordEncoder(VOCAB), None, no_cache)
    assert no_cache.calls == [(30, 30)]  # one shard: everything at once


def test_progress_lines_by_hand() -> None:
    # 12,800 in 71.1 s = 180.03/s; 87,200 left / 180.03 = 484.4 s -> 9 min (rounded up)
    assert progress_line("dense_minilm", 12_800, 100_000, 71.1) == (
        "dense_minilm: embedded 12,800 / 100,000 new texts (12.8%), 180 texts/s, ETA 9 min"
    )
    assert progress_line("x", 500, 500, 42.2) == "x: embedded 500 / 500 new texts (100.0%), 12 texts/s, done in 43 s"
    assert progress_line("x", 10, 100_000, 10.0).endswith("1 texts/s, ETA 27.8 h")  # 99,990 s left
    assert progress_line("x", 0, 10, 5.0).endswith("0 texts/s, ETA unknown")


def test_progress_log_writes_at_most_one_line_per_interval_plus_the_last() -> None:
    ticks = iter([0.0, 1.0, 3.0, 6.5, 8.0, 9.0, 9.5])  # the first tick is the start
    lines: list[str] = []
    log = Progress("dense_t", emit=lines.append, every_seconds=5.0, clock=lambda: next(ticks))
    for done in (10, 20, 30, 40, 50, 60):
        log(done, 60)
    # 10 at 1.0: the first line; 20 at 3.0: 2 s after it, skipped; 30 at 6.5: 5.5 s after, written;
    # 40 at 8.0 and 50 at 9.0: 1.5 and 2.5 s after, skipped; 60 at 9.5: the last, always written
    assert [line.split(" new texts")[0] for line in lines] == [
        "dense_t: embedded 10 / 60",
        "dense_t: embedded 30 / 60",
        "dense_t: embedded 60 / 60",
    ]


def test_the_dense_kind_writes_progress_to_the_context_log(tmp_path: Path) -> None:
    spec = parse_as(DenseSpec, "dense_toy", {"kind": "dense", "model": {"path": str(fake_model_folder(tmp_path / "model"))}})
    lines: list[str] = []
    build(spec, tmp_path, lambda _spec: KeywordEncoder(VOCAB), log=lines.append)
    assert lines[0].startswith("dense_toy: embedded 5 / 5 new texts (100.0%)")
    assert "0 texts from the embedding cache, 5 embedded now; IndexFlatIP over 5 documents" in lines[1] and len(lines) == 2
    build(spec, tmp_path / "again", lambda _spec: KeywordEncoder(VOCAB))  # no log: silent, no error


# -- 3. the Dagster asset ----------------------------------------------------------------------------


def test_the_index_asset_logs_progress(tmp_path: Path) -> None:
    import dagster as dg  # here, not at the top: the kill test's child imports this module

    from retrieval_pipeline.definitions import defs
    from retrieval_pipeline_tests.defs.assets.test_retriever_assets import PARTITION, registry
    from retrieval_pipeline_tests.defs.conftest import VOCAB as DEFS_VOCAB
    from retrieval_pipeline_tests.defs.support import resources_in
    from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=DEFS_VOCAB), registry(tmp_path / "in", ["dense_minilm"]))
    instance = dg.DagsterInstance.ephemeral()
    selection = dg.AssetSelection.assets(["retrievers", "dense_minilm_index"]).upstream() | dg.AssetSelection.assets("corpus_rejects")
    result = dg.materialize(list(defs().assets), selection=selection, partition_key=PARTITION, resources=resources, instance=instance)
    assert result.success
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    progress = [m for m in messages if m.startswith("dense_minilm: embedded ")]
    assert progress and "(100.0%)" in progress[-1] and "done in" in progress[-1]
    assert any("IndexFlatIP over" in m for m in messages)
