"""A fake OpenAI-compatible ``POST /v1/embeddings`` server on 127.0.0.1 with deterministic vectors.

The vector of a text is a bag of keywords (:class:`~retrieval_pipeline_tests.fakes.encoders.KeywordEncoder`
over ``vocabulary``) scaled by 3, so clients must L2-normalise it themselves::

    with FakeEmbeddingsServer(["cat", "dog"], script=["500", "429"]) as server:
        encoder = OpenAIEmbeddingEncoder(server.base_url, server.model, ...)

A request's ``dimensions`` truncates or zero-pads the vectors. Besides the transport faults of
:mod:`retrieval_pipeline_tests.fakes.json_server`, the script may hold content faults
(:data:`CONTENT_FAULTS`): ``wrong_count`` (one vector missing), ``non_numeric`` (strings in a vector),
``wrong_dim`` (one vector one number longer), ``no_data`` (a JSON object without ``data``),
``nan`` (a NaN in a vector), ``shuffled`` (items in reverse order, each with its right ``index``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder
from retrieval_pipeline_tests.fakes.json_server import LoopbackJSONServer, Reply, error_reply

CONTENT_FAULTS: tuple[str, ...] = ("wrong_count", "non_numeric", "wrong_dim", "no_data", "nan", "shuffled")
SCALE = 3.0


class FakeEmbeddingsServer(LoopbackJSONServer):
    """Serve ``POST /v1/embeddings`` with keyword-bag vectors.

    Args:
        vocabulary: The keywords; the native dimension is ``len(vocabulary) + 1``.
        model: The only model name accepted (another one gets HTTP 404, like OpenAI).
        script: Faults of the first requests (transport or content faults).
        timeout_sleep_s: How long a ``timeout`` fault sleeps.
    """

    route = "/v1/embeddings"

    def __init__(
        self, vocabulary: Sequence[str], *, model: str = "fake-embed", script: Sequence[str | None] = (), timeout_sleep_s: float = 1.0
    ) -> None:
        super().__init__(script=script, timeout_sleep_s=timeout_sleep_s, known_faults=CONTENT_FAULTS)
        self.model = model
        self.keywords = KeywordEncoder(vocabulary)

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` of this server."""
        return f"{self.origin}/v1"

    @property
    def texts_embedded(self) -> list[str]:
        """Every input text of every request that got vectors, in order."""
        return [t for r in self.requests if r.status == 200 and isinstance(r.body, dict) for t in _inputs(r.body) or []]

    def vector(self, text: str, dimensions: int | None = None) -> list[float]:
        """The (unnormalised) vector the server returns for ``text``."""
        values = [float(x) * SCALE for x in self.keywords.vector(text)]
        if dimensions is not None:
            values = (values + [0.0] * dimensions)[:dimensions]
        return values

    def answer(self, body: Any, fault: str | None) -> Reply:
        texts = _inputs(body)
        if texts is None:
            return error_reply(400, "'input' must be a string or a list of strings")
        if body.get("model") != self.model:
            return error_reply(404, f"model {body.get('model')!r} not found")
        if fault == "no_data":
            return Reply(200, {"object": "list", "model": self.model})
        dimensions = body.get("dimensions")
        items = [{"object": "embedding", "index": i, "embedding": self.vector(t, dimensions)} for i, t in enumerate(texts)]
        items = _spoil(items, fault)
        return Reply(
            200, {"object": "list", "data": items, "model": self.model, "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}}
        )


def _inputs(body: Any) -> list[str] | None:
    if not isinstance(body, dict):
        return None
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return list(value)
    return None


def _spoil(items: list[dict[str, Any]], fault: str | None) -> list[dict[str, Any]]:
    """Apply a content fault to the embedding items."""
    if fault == "wrong_count":
        return items[:-1]
    if fault == "shuffled":
        return items[::-1]
    if not items or fault is None:
        return items
    first = dict(items[0])
    if fault == "non_numeric":
        first["embedding"] = ["zero"] * len(first["embedding"])
    elif fault == "wrong_dim":
        first["embedding"] = [*first["embedding"], 1.0]
    elif fault == "nan":
        first["embedding"] = [float("nan"), *first["embedding"][1:]]
    return [first, *items[1:]]
