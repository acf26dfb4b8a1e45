"""SharedBatches on a fake batch runner: each thread gets its own results back, waiting files share the next batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.services.sandbox.shared_batches import SharedBatches

SETTINGS = SandboxSettings()


class FakeRunner:
    """Records each batch; its results name the file and its source. The first batch waits for ``release``."""

    def __init__(self, hold_first: bool = False, fail: bool = False) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self.hold_first, self.fail = hold_first, fail
        self.lock = threading.Lock()

    def __call__(self, tests: Sequence[tuple[str, str]], settings: SandboxSettings) -> list:
        with self.lock:
            self.batches.append(list(tests))
            first = len(self.batches) == 1
        self.started.set()
        if first and self.hold_first:
            assert self.release.wait(30)
        if self.fail:
            raise RuntimeError("the sandbox could not start")
        return [f"{name}:{source}" for source, name in tests]


def _hand_in(
    shared: SharedBatches, tests: list[tuple[str, str]], out: dict, key: str, settings: SandboxSettings = SETTINGS
) -> threading.Thread:
    def work() -> None:
        try:
            out[key] = shared.run(tests, settings)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            out[key] = exc

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def _wait_until(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_files_handed_in_while_the_slot_is_busy_share_the_next_batch_and_each_thread_gets_its_own():
    runner = FakeRunner(hold_first=True)
    shared = SharedBatches(slots=1, runner=runner)
    out: dict = {}
    first = _hand_in(shared, [("s0", "test_option_A.py")], out, "q0")
    assert runner.started.wait(30)
    waiting = [_hand_in(shared, [(f"s{q}A", "test_option_A.py"), (f"s{q}B", "test_option_B.py")], out, f"q{q}") for q in (1, 2, 3)]
    _wait_until(lambda: len(shared._pending) == 3)
    runner.release.set()
    for thread in [first, *waiting]:
        thread.join(30)
    assert len(runner.batches) == 2
    assert len(runner.batches[1]) == 6  # the three questions' files, the same names repeated, in one batch
    assert out["q0"] == ["test_option_A.py:s0"]
    for q in (1, 2, 3):
        assert out[f"q{q}"] == [f"test_option_A.py:s{q}A", f"test_option_B.py:s{q}B"]


def test_batches_hold_at_most_max_files_and_never_mix_settings():
    runner = FakeRunner(hold_first=True)
    shared = SharedBatches(slots=1, max_files=3, runner=runner)
    other = SandboxSettings(timeout_s=SETTINGS.timeout_s + 1)
    out: dict = {}
    first = _hand_in(shared, [("s0", "test_option_A.py")], out, "q0")
    assert runner.started.wait(30)
    threads = [_hand_in(shared, [(f"s{q}A", "test_option_A.py"), (f"s{q}B", "test_option_B.py")], out, f"q{q}") for q in (1, 2)]
    _wait_until(lambda: len(shared._pending) == 2)
    threads.append(_hand_in(shared, [("t", "test_option_A.py")], out, "other", other))
    _wait_until(lambda: len(shared._pending) == 3)
    runner.release.set()
    for thread in [first, *threads]:
        thread.join(30)
    assert [len(b) for b in runner.batches[1:]] in ([2, 2, 1], [2, 1, 2])  # 2 + 2 files > 3; the other settings alone
    assert out["other"] == ["test_option_A.py:t"] and out["q2"] == ["test_option_A.py:s2A", "test_option_B.py:s2B"]


def test_a_failed_batch_raises_in_every_thread_whose_files_it_held():
    runner = FakeRunner(hold_first=True, fail=True)
    shared = SharedBatches(slots=1, runner=runner)
    out: dict = {}
    first = _hand_in(shared, [("s0", "test_option_A.py")], out, "q0")
    assert runner.started.wait(30)
    threads = [_hand_in(shared, [(f"s{q}", "test_option_A.py")], out, f"q{q}") for q in (1, 2)]
    _wait_until(lambda: len(shared._pending) == 2)
    runner.release.set()
    for thread in [first, *threads]:
        thread.join(30)
    assert all(isinstance(out[k], RuntimeError) for k in ("q0", "q1", "q2")) and len(runner.batches) == 2


def test_slots_run_side_by_side_and_bad_sizes_are_refused():
    runner = FakeRunner()
    shared = SharedBatches(slots=2, runner=runner)
    assert shared.run([], SETTINGS) == [] and runner.batches == []
    assert shared.run([("s", "test_x.py")], SETTINGS) == ["test_x.py:s"]
    with pytest.raises(ValueError, match="at least 1"):
        SharedBatches(slots=0)
