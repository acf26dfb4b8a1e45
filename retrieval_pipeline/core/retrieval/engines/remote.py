"""Shared plumbing of the remote retriever kinds (``openai_embeddings``, ``http``): retries, secrets, JSON POSTs.

* :class:`RetryPolicy` + :func:`call_with_retries`: the LLM client's policy and its ``tenacity`` loop
  (:func:`~retrieval_pipeline.core.services.llm.transport.retrying`): a failure the classifier calls retryable (a timeout, a
  connection error, HTTP 429 with its ``Retry-After`` honoured and capped, HTTP 5xx) is re-sent up to
  ``max_retries`` times after capped exponential backoff with full jitter; anything else is final.
  A request that still fails raises :class:`GaveUp` with a one-line reason and the attempt count.
* :func:`secret_from_env`: secrets are named by environment variable in the specs; only the name is
  ever stored, and :func:`scrub` removes the values (and any bearer token) from error texts.
* :func:`post_json`: one JSON POST with the standard library (no extra dependency), and
  :func:`classify_http_error` / :func:`describe_http_error` for its failures. Its ``timeout_s`` is a
  deadline for the whole exchange (a server trickling a byte every 2 s is cut off at the deadline, not
  after each byte), and an answer over :data:`MAX_ANSWER_BYTES` is refused unread when its
  ``Content-Length`` says so, else as soon as it passes the limit.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import logging
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from retrieval_pipeline.core.services.llm.transport import Classifier, retrying

logger = logging.getLogger(__name__)

T = TypeVar("T")

REDACTED = "[REDACTED]"
ERROR_LIMIT = 400
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\"]+")
_BODY_SNIPPET = 200
#: Largest answer :func:`post_json` reads, in bytes.
MAX_ANSWER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is re-sent.

    Attributes:
        max_retries: Re-sends after the first attempt (0: one attempt only).
        backoff_base_s: Backoff of the first retry; doubles per retry (full jitter below the cap).
        backoff_max_s: Cap of every wait, ``Retry-After`` included.
    """

    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0


class GaveUp(Exception):
    """A request failed for good: not retryable, or out of retries.

    Attributes:
        reason: One line, secrets already scrubbed by the caller's ``describe``.
        attempts: Requests sent.
    """

    def __init__(self, reason: str, attempts: int) -> None:
        super().__init__(f"{reason} (after {attempts} attempt(s))")
        self.reason = reason
        self.attempts = attempts


def call_with_retries(
    send: Callable[[], T],
    policy: RetryPolicy,
    classify: Classifier,
    describe: Callable[[Exception], str],
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[int, str], None] | None = None,
    what: str = "request",
) -> T:
    """Run ``send`` until it succeeds, retrying what ``classify`` calls retryable.

    Args:
        send: One attempt; returns the result or raises.
        policy: Retry budget and backoff.
        classify: ``exc -> (retryable, retry_after_s)``.
        describe: ``exc -> one line`` (must not contain secrets).
        sleep: Waits between attempts (injectable for tests).
        rng: Jitter source.
        on_retry: Called with ``(attempt, reason)`` before each re-send (for counters).
        what: Names the request in log lines.

    Returns:
        What ``send`` returned.

    Raises:
        GaveUp: A non-retryable failure, or the last retryable one; the cause is chained.
    """

    def before_retry(attempt: int, delay: float, exc: BaseException) -> None:
        reason = describe(exc)
        logger.info("%s failed (%s); retry %d/%d in %.2fs", what, reason, attempt + 1, policy.max_retries, delay)
        if on_retry is not None:
            on_retry(attempt, reason)

    attempts = retrying(policy, classify, sleep=sleep, rng=rng or random.Random(), before_retry=before_retry)
    try:
        return attempts(send)
    except Exception as exc:  # noqa: BLE001 - the final failure, re-raised as GaveUp
        raise GaveUp(describe(exc), attempts.statistics["attempt_number"]) from exc


# -- secrets -------------------------------------------------------------------------------------


def secret_from_env(variable: str, setting: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of environment variable ``variable``; only its NAME ever appears in messages.

    Args:
        variable: The variable's name (from the spec).
        setting: The spec field that named it, for the error message.
        environ: The environment (``os.environ`` by default).

    Raises:
        ValueError: The variable is unset or empty.
    """
    value = (os.environ if environ is None else environ).get(variable)
    if not value:
        raise ValueError(f"{setting}: environment variable {variable!r} is not set (the spec holds only its name)")
    return value


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` without any of ``secrets`` nor a bearer token, cut to ``ERROR_LIMIT`` characters."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return _BEARER.sub(rf"\1{REDACTED}", text)[:ERROR_LIMIT]


# -- JSON over HTTP (standard library) -----------------------------------------------------------


class BadResponse(ValueError):
    """A 2xx answer that is not the expected JSON (never retried: the server would say it again)."""


def post_json(url: str, payload: Any, headers: Mapping[str, str], timeout_s: float, *, max_bytes: int = MAX_ANSWER_BYTES) -> Any:
    """POST ``payload`` as JSON and return the decoded JSON answer.

    ``timeout_s`` is a deadline for the whole exchange: connecting, sending, the headers and the body
    (a watchdog shuts the connection down when it passes, however the server trickles its bytes).

    Raises:
        urllib.error.HTTPError: A non-2xx status (its body cut to the first 200 bytes).
        urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException: Transport failures;
            ``TimeoutError`` when the deadline passed.
        BadResponse: A 2xx body that is not JSON, or larger than ``max_bytes`` (refused unread when its
            ``Content-Length`` says so).
    """
    data = json.dumps(payload).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", "Accept": "application/json", **headers}
    )
    with _Deadline(timeout_s) as deadline:
        opener = urllib.request.build_opener(_DeadlineHTTPHandler(deadline), _DeadlineHTTPSHandler(deadline))
        try:
            with opener.open(request, timeout=timeout_s) as response:
                body = _read_answer(response, max_bytes)
        except urllib.error.HTTPError as error:
            deadline.check()
            snippet = error.read(_BODY_SNIPPET) if error.fp is not None else b""
            raise urllib.error.HTTPError(error.url, error.code, error.msg, error.headers, io.BytesIO(snippet)) from None
        except BadResponse:
            raise
        except Exception:
            deadline.check()
            raise
        deadline.check()
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadResponse(f"the answer is not JSON ({exc}): {_snippet(body)!r}") from None


def _read_answer(response: http.client.HTTPResponse, max_bytes: int) -> bytes:
    """The body, at most ``max_bytes``: a larger ``Content-Length`` is refused before reading."""
    length = (response.headers.get("Content-Length") or "").strip()
    if length.isdigit() and int(length) > max_bytes:
        raise BadResponse(f"the answer is {int(length):,} bytes (Content-Length), over the limit of {max_bytes:,}: not read")
    body = response.read(max_bytes + 1)
    if len(body) > max_bytes:
        raise BadResponse(f"the answer is over the limit of {max_bytes:,} bytes: refused after reading {max_bytes:,}")
    return body


class _Deadline:
    """A watchdog: when ``seconds`` pass, every connection registered with :meth:`watch` is shut down."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once when it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            self._shut(sock)

    def check(self) -> None:
        """Raise TimeoutError when the deadline has passed."""
        if self.expired:
            raise TimeoutError(f"no complete answer within {self.seconds:g} s (a deadline for the whole request)")

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked read, unlike close()


class _Watched:
    """An HTTP(S) connection whose socket the request's deadline watches once it is connected."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self._deadline.watch(self.sock)  # type: ignore[attr-defined]


class _WatchedHTTPConnection(_Watched, http.client.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, http.client.HTTPSConnection):
    pass


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTPConnection, req, deadline=self._deadline)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTPSConnection, req, context=self._context, deadline=self._deadline)


def classify_http_error(exc: Exception) -> tuple[bool, float | None]:
    """``(retryable, retry_after_s)`` of a :func:`post_json` failure: timeouts, connection errors, 429, 5xx."""
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code == 429:
            return True, _retry_after_s(exc.headers.get("Retry-After") if exc.headers else None)
        return exc.code >= 500, None
    if isinstance(exc, (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException)):
        return True, None
    return False, None


def describe_http_error(exc: Exception) -> str:
    """One line for a :func:`post_json` failure (status and the start of the body for HTTP errors)."""
    if isinstance(exc, urllib.error.HTTPError):
        try:
            body = exc.read()
        except Exception:  # noqa: BLE001 - the body is only decoration
            body = b""
        return " ".join(f"HTTP {exc.code} {exc.reason}: {_snippet(body)}".split())
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc.reason, str):
        exc = exc.reason if isinstance(exc.reason, Exception) else exc
    if isinstance(exc, TimeoutError):
        return f"timed out ({exc})" if "deadline" in str(exc) else f"timed out ({type(exc).__name__})"
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _retry_after_s(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (``None`` when absent or an HTTP date)."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _snippet(body: bytes) -> str:
    return body[:_BODY_SNIPPET].decode("utf-8", errors="replace")


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
