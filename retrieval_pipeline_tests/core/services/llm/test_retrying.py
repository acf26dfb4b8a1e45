"""The tenacity loop behind the LLM client's and the remote kinds' retries: budget, classifier, waits, jitter draws."""

from __future__ import annotations

import random

import pytest

from retrieval_pipeline.core.retrieval.engines.remote import GaveUp, RetryPolicy, call_with_retries
from retrieval_pipeline.core.services.llm.transport import backoff_delay, retrying


class Flaky:
    """Raises the given exceptions in turn, then returns ``"ok"``; counts the calls."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def by_type(exc: BaseException) -> tuple[bool, float | None]:
    """Retry ``TimeoutError`` (``Retry-After``: none), and ``ConnectionError`` with a server wait of 0.25 s; nothing else."""
    if isinstance(exc, ConnectionError):
        return True, 0.25
    return isinstance(exc, TimeoutError), None


def test_waits_are_the_backoff_draws_and_the_last_failure_draws_none() -> None:
    policy = RetryPolicy(max_retries=3, backoff_base_s=1.0, backoff_max_s=8.0)
    sleeps: list[float] = []
    retries: list[tuple[int, float, str]] = []
    rng = random.Random(11)
    attempts = retrying(policy, by_type, sleep=sleeps.append, rng=rng,
                        before_retry=lambda n, delay, exc: retries.append((n, delay, type(exc).__name__)))  # fmt: skip
    send = Flaky(TimeoutError(), ConnectionError(), TimeoutError(), TimeoutError())
    with pytest.raises(TimeoutError):
        attempts(send)
    twin = random.Random(11)
    expected = [backoff_delay(0, None, policy, twin), backoff_delay(1, 0.25, policy, twin), backoff_delay(2, None, policy, twin)]
    assert sleeps == expected and expected[1] == 0.25
    assert retries == [(0, expected[0], "TimeoutError"), (1, 0.25, "ConnectionError"), (2, expected[2], "TimeoutError")]
    assert send.calls == 4 and attempts.statistics["attempt_number"] == 4
    assert rng.random() == twin.random()  # the 4th, final failure drew no jitter: a shared rng stays in step


def test_a_final_error_is_raised_at_once_and_a_success_ends_the_loop() -> None:
    sleeps: list[float] = []
    with pytest.raises(GaveUp, match=r"ValueError: bad \(after 1 attempt\(s\)\)") as caught:
        call_with_retries(
            Flaky(ValueError("bad")), RetryPolicy(max_retries=5), by_type, lambda e: f"{type(e).__name__}: {e}", sleep=sleeps.append
        )
    assert caught.value.attempts == 1 and sleeps == [] and isinstance(caught.value.__cause__, ValueError)
    send = Flaky(TimeoutError())
    assert call_with_retries(send, RetryPolicy(max_retries=1, backoff_base_s=0.0), by_type, str, sleep=sleeps.append) == "ok"
    assert send.calls == 2 and sleeps == [0.0]
    with pytest.raises(GaveUp) as out_of_budget:
        call_with_retries(Flaky(TimeoutError(), TimeoutError()), RetryPolicy(max_retries=1), by_type, str, sleep=sleeps.append)
    assert out_of_budget.value.attempts == 2
