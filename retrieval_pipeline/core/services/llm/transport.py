"""Transport and retries for OpenAI-compatible endpoints: a deadline per request, which failures to retry, how long to wait.

* **transport retries**: :func:`classify_error` says which failures are worth another try (timeouts,
  connection errors, HTTP 429 with its ``Retry-After``, 5xx; any other 4xx is final),
  :func:`backoff_delay` how long to wait (the server's ``Retry-After``, capped, else capped exponential
  backoff with full jitter), and :func:`retrying` runs the attempts (a ``tenacity.Retrying``; the remote
  retriever kinds use it with their own classifier);
* **deadlines**: :class:`DeadlineTransport` makes ``timeout_s`` bound each request as a whole
  (connecting, sending, the headers and the body), not each read: a server trickling a byte every 2 s
  is cut off at the deadline, and the timeout is retried like any other.
"""

from __future__ import annotations

import contextvars
import importlib
import logging
import random
import time
from collections.abc import Callable
from importlib.metadata import requires
from typing import TYPE_CHECKING, Any, Protocol

import tenacity
from packaging.requirements import Requirement

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)


def openai_httpx_name() -> str:
    """The httpx the installed openai builds its client on: openai 3 requires the ``httpx2`` fork, earlier ones ``httpx``.

    Read from openai's declared requirements, not its classes: importing openai takes about 1 s, and every
    Dagster process imports this module when it loads the definitions (openai is imported where a client is built).
    """
    names = [Requirement(line).name for line in requires("openai") or ()]
    return next((name for name in names if name.startswith("httpx")), "httpx")


# the httpx of the installed openai, and its httpcore
_HTTPX_NAME = openai_httpx_name()
httpx: Any = importlib.import_module(_HTTPX_NAME)
httpcore: Any = importlib.import_module(_HTTPX_NAME.replace("httpx", "httpcore", 1))


class BackoffPolicy(Protocol):
    """What :func:`backoff_delay` reads: ``LLMSettings`` or any other retry policy (e.g. a remote retriever's)."""

    @property
    def backoff_base_s(self) -> float: ...

    @property
    def backoff_max_s(self) -> float: ...


def backoff_delay(attempt: int, retry_after_s: float | None, settings: BackoffPolicy, rng: random.Random) -> float:
    """Return the wait before re-send number ``attempt + 1``.

    A server's ``Retry-After`` wins (capped at ``backoff_max_s``); otherwise full jitter over
    ``min(backoff_max_s, backoff_base_s * 2**attempt)``.
    """
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), settings.backoff_max_s)
    cap = min(settings.backoff_max_s, settings.backoff_base_s * (2.0**attempt))
    return rng.uniform(0.0, cap)


class RetryBudget(BackoffPolicy, Protocol):
    """What :func:`retrying` reads: the backoff and ``max_retries``, the re-sends after the first attempt."""

    @property
    def max_retries(self) -> int: ...


#: ``classify(exc) -> (retryable, retry_after_s)``, e.g. :func:`classify_error`.
Classifier = Callable[[BaseException], tuple[bool, float | None]]


def retrying(
    budget: RetryBudget,
    classify: Classifier,
    *,
    sleep: Callable[[float], None],
    rng: random.Random,
    before_retry: Callable[[int, float, BaseException], None],
) -> tenacity.Retrying:
    """A ``tenacity.Retrying`` that re-sends what ``classify`` calls retryable, at most ``budget.max_retries`` times.

    The wait before re-send ``n + 1`` is :func:`backoff_delay` of attempt ``n`` (0-based), drawn only when a
    re-send follows; ``before_retry(attempt, delay, exc)`` runs before each wait. The final failure (not
    retryable, or the budget spent) is raised as it is, and ``statistics["attempt_number"]`` of the returned
    object counts the attempts made. One object per request: its statistics are its own.
    """

    def again(state: tenacity.RetryCallState) -> bool:
        return _failure(state) is not None and state.attempt_number <= budget.max_retries and classify(_failure(state))[0]

    return tenacity.Retrying(
        retry=again,
        wait=lambda state: backoff_delay(state.attempt_number - 1, classify(_failure(state))[1], budget, rng),
        sleep=sleep,
        before_sleep=lambda state: before_retry(state.attempt_number - 1, state.upcoming_sleep, _failure(state)),
    )


def _failure(state: tenacity.RetryCallState) -> Any:
    """The exception of the attempt just made (None when it succeeded): ``wait`` and ``before_sleep`` see only failures."""
    return state.outcome.exception() if state.outcome is not None else None


def _retry_after_s(exc: openai.APIStatusError) -> float | None:
    """Return the ``Retry-After`` header in seconds, or None when absent or not a number."""
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def classify_error(exc: BaseException) -> tuple[bool, float | None]:
    """Return ``(retryable, retry_after_s)`` for a failed ``openai`` request (429, 5xx, timeouts, connection errors)."""
    import openai  # noqa: PLC0415  (loaded already: the request was openai's)

    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429:
            return True, _retry_after_s(exc)
        return exc.status_code >= 500, None
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True, None
    return False, None


def describe_error(exc: BaseException) -> str:
    """Return a one-line description of a failed request."""
    status = getattr(exc, "status_code", None)
    prefix = f"{type(exc).__name__}" + (f" (HTTP {status})" if status is not None else "")
    cause = exc.__cause__
    detail = f"{exc} ({cause})" if isinstance(cause, httpx.TimeoutException) and _DEADLINE_WORDS in str(cause) else exc
    return " ".join(f"{prefix}: {detail}".split())


# -- a deadline per request ------------------------------------------------------------------------

#: The monotonic time the current thread's request must be done by, and its length in seconds.
_REQUEST_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("llm_request_deadline", default=None)
_DEADLINE_WORDS = "a deadline for the whole request"


def _remaining(timeout: float | None, exc_class: type[Exception]) -> float | None:
    """``timeout`` capped by what is left of the current request's deadline (raises ``exc_class`` when none is left)."""
    deadline = _REQUEST_DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline[0] - time.monotonic()
    if left <= 0:
        raise exc_class(f"no complete answer within {deadline[1]:g} s ({_DEADLINE_WORDS})")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read and write waits at most what is left of the request's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._inner.read(max_bytes, _remaining(timeout, httpcore.ReadTimeout))
        except httpcore.ReadTimeout:
            _remaining(None, httpcore.ReadTimeout)  # say so when it was the deadline
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, _remaining(timeout, httpcore.WriteTimeout))
        except httpcore.WriteTimeout:
            _remaining(None, httpcore.WriteTimeout)
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _remaining(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """Connections whose streams keep to the request's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _remaining(timeout, httpcore.ConnectTimeout), local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _remaining(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """An httpx transport whose ``timeout_s`` bounds each request as a whole, body included.

    httpx's timeouts bound each read; here every read and write of a request waits at most what is left
    of ``timeout_s`` from the moment the request is handed over, so a server that trickles its headers or
    its body cannot hold a call past the deadline (``httpx.ReadTimeout``, an ``APITimeoutError`` for openai).
    """

    def __init__(self, timeout_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeout_s = timeout_s
        pool = getattr(self, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:  # pragma: no cover - an httpcore without the attribute: per-read timeouts only
            logger.warning("httpcore %s: the LLM request deadline falls back to per-read timeouts", httpcore.__version__)
        else:
            pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        # the deadline stays set after the call: httpx reads the body right after, in this thread
        _REQUEST_DEADLINE.set((time.monotonic() + self.timeout_s, self.timeout_s))
        return super().handle_request(request)
