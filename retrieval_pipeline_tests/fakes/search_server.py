"""A fake search service (the ``http`` retriever kind's protocol) on 127.0.0.1.

``POST /search`` with ``{"queries": [...], "k": k}`` answers ``{"results": [[{"doc_id", "score"}, ...], ...]}``:
a document's score is the number of distinct query words it contains; documents without any are left
out, ties keep corpus order. Per-query behaviour is driven by marker words in the query:

* ``slow``: the whole request sleeps ``timeout_sleep_s`` first (a timeout for the client);
* ``fails``: the query's entry is ``{"error": "index shard unavailable"}``;
* ``mangled``: the query's entry is garbage (a hit without a score);
* ``stranger``: the query's hits start with a doc id that is not in the corpus.

Transport faults and ``bad_results`` (``results`` with one entry too few) can be scripted per request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_pipeline_tests.fakes.json_server import LoopbackJSONServer, Reply, error_reply

UNKNOWN_DOC = "not-in-the-corpus"
SERVICE_ERROR = "index shard unavailable"
_WORD = re.compile(r"\w+")


class FakeSearchService(LoopbackJSONServer):
    """Serve ``POST /search`` over ``corpus`` (doc id -> text), in corpus order.

    Args:
        corpus: The documents.
        script: Faults of the first requests (transport faults or ``bad_results``).
        timeout_sleep_s: How long a ``slow`` query or a ``timeout`` fault sleeps.
    """

    route = "/search"

    def __init__(self, corpus: Mapping[str, str], *, script: Sequence[str | None] = (), timeout_sleep_s: float = 1.0) -> None:
        super().__init__(script=script, timeout_sleep_s=timeout_sleep_s, known_faults=("bad_results",))
        self.corpus = dict(corpus)
        self._words = {doc: set(_WORD.findall(text.lower())) for doc, text in self.corpus.items()}

    @property
    def url(self) -> str:
        """The search endpoint."""
        return f"{self.origin}/search"

    def fault_for(self, body: Any) -> str | None:
        queries = body.get("queries") if isinstance(body, dict) else None
        if isinstance(queries, list) and any("slow" in _WORD.findall(str(q).lower()) for q in queries):
            return "timeout"
        return None

    def ranking(self, query: str, k: int) -> list[dict[str, Any]]:
        """The hits the service answers for ``query``."""
        words = set(_WORD.findall(query.lower()))
        scored = [(len(words & self._words[doc]), position, doc) for position, doc in enumerate(self.corpus)]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [{"doc_id": doc, "score": float(score)} for score, _, doc in ranked[:k]]

    def answer(self, body: Any, fault: str | None) -> Reply:
        queries, k = (body.get("queries"), body.get("k")) if isinstance(body, dict) else (None, None)
        if not isinstance(queries, list) or not isinstance(k, int):
            return error_reply(400, "expected {'queries': [...], 'k': int}")
        results = [self._entry(str(q), k) for q in queries]
        if fault == "bad_results":
            results = results[:-1]
        return Reply(200, {"results": results})

    def _entry(self, query: str, k: int) -> Any:
        words = set(_WORD.findall(query.lower()))
        if "fails" in words:
            return {"error": SERVICE_ERROR}
        if "mangled" in words:
            return [{"doc_id": "d0"}]
        hits = self.ranking(query, k)
        if "stranger" in words:
            hits = [{"doc_id": UNKNOWN_DOC, "score": 99.0}, *hits][:k]
        return hits
