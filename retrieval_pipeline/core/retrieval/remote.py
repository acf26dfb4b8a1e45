"""Shared plumbing of the remote retriever kinds (``openai_embeddings``, ``http``): retries, secrets, JSON POSTs.

* :class:`RetryPolicy` + :func:`call_with_retries`: the LLM client's policy (``backoff_delay`` of
  :mod:`retrieval_pipeline.core.llm.client`): a failure the classifier calls retryable (a timeout, a
  connection error, HTTP 429 with its ``Retry-After`` honoured and capped, HTTP 5xx) is re-sent up to
  ``max_retries`` times after capped exponential backoff with full jitter; anything else is final.
  A request that still fails raises :class:`GaveUp` with a one-line reason and the attempt count.
* :func:`secret_from_env`: secrets are named by environment variable in the specs; only the name is
  ever stored, and :func:`scrub` removes the values (and any bearer token) from error texts.
* :func:`post_json`: one JSON POST with the standard library (no extra dependency), and
  :func:`classify_http_error` / :func:`describe_http_error` for its failures.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from retrieval_pipeline.core.llm.client import backoff_delay

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: ``classify(exc) -> (retryable, retry_after_s)``.
Classifier = Callable[[Exception], tuple[bool, float | None]]

REDACTED = "[REDACTED]"
ERROR_LIMIT = 400
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\"]+")
_BODY_SNIPPET = 200


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
    rng = rng or random.Random()
    for attempt in range(policy.max_retries + 1):
        try:
            return send()
        except Exception as exc:  # noqa: BLE001 - classified; re-raised as GaveUp when final
            retryable, retry_after = classify(exc)
            reason = describe(exc)
            if not retryable or attempt == policy.max_retries:
                raise GaveUp(reason, attempt + 1) from exc
            delay = backoff_delay(attempt, retry_after, policy, rng)
            logger.info("%s failed (%s); retry %d/%d in %.2fs", what, reason, attempt + 1, policy.max_retries, delay)
            if on_retry is not None:
                on_retry(attempt, reason)
            sleep(delay)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


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


def post_json(url: str, payload: Any, headers: Mapping[str, str], timeout_s: float) -> Any:
    """POST ``payload`` as JSON and return the decoded JSON answer.

    ``timeout_s`` bounds the connection and every read (``urllib``'s socket timeout).

    Raises:
        urllib.error.HTTPError: A non-2xx status.
        urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException: Transport failures.
        BadResponse: A 2xx body that is not JSON.
    """
    data = json.dumps(payload).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", "Accept": "application/json", **headers}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - the URL is the operator's setting
        body = response.read()
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadResponse(f"the answer is not JSON ({exc}): {_snippet(body)!r}") from None


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
        return f"timed out ({type(exc).__name__})"
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
