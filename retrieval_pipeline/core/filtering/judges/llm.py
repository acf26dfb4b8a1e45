"""LLM judges: forward-RAG sufficiency and necessity, and scores for retrieved results.

Prompts ask for JSON validated against the schemas below. Every decision records the judge
(``llm:<model>``), the model's answer and its rationale. A pair whose calls failed is **undecided**
(kept out of the dataset, with the error) rather than guessed; the client's cache makes a re-run ask
only for what is still undecided.

Forward RAG (one pair = two calls):

* sufficiency: "answer the question from this context alone": kept only if ``answerable``;
* necessity: the same question over ``random_contexts`` seeded random non-gold documents: kept only
  if they do NOT make it answerable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from retrieval_pipeline.core.filtering.judges.offline import FilterDecision, random_documents
from retrieval_pipeline.core.services.llm.client import LLMCall, LLMClient

MAX_CONTEXT_CHARS = 2500


class AnswerFromContext(BaseModel):
    answerable: bool = Field(description="true only if the context alone answers the question")
    answer: str = Field("", description="the answer, from the context only; empty if not answerable")
    rationale: str = Field("", description="one sentence: why")


class RetrievalScores(BaseModel):
    quality: float = Field(ge=0.0, le=1.0, description="how well the retrieved contexts serve the question")
    completeness: float = Field(ge=0.0, le=1.0, description="how much of what is needed to answer is present")
    relevance: float = Field(ge=0.0, le=1.0, description="share of the retrieved contexts that are on topic")
    rationale: str = ""


SYSTEM = (
    "You are a careful annotator for a retrieval benchmark. Use ONLY the contexts given, never your own "
    "knowledge. Reply with one JSON object and nothing else."
)


def _contexts(texts: Sequence[str]) -> str:
    return "\n\n".join(f"[context {i + 1}]\n{t[:MAX_CONTEXT_CHARS]}" for i, t in enumerate(texts))


def answer_messages(question: str, contexts: Sequence[str]) -> list[dict[str, str]]:
    """Ask whether ``contexts`` alone answer ``question`` (schema: :class:`AnswerFromContext`)."""
    user = (
        f"{_contexts(contexts)}\n\nQuestion: {question}\n\nCan the question be answered from the contexts "
        'above alone? Reply as {"answerable": true|false, "answer": "...", "rationale": "..."}.'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def retrieval_messages(question: str, contexts: Sequence[str]) -> list[dict[str, str]]:
    """Ask for quality, completeness and relevance in [0, 1] (schema: :class:`RetrievalScores`)."""
    user = (
        f"Question: {question}\n\nRetrieved, best first:\n{_contexts(contexts)}\n\nScore the retrieval from 0 to 1: "
        '{"quality": q, "completeness": c, "relevance": r, "rationale": "..."}.'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


class LLMForwardRagJudge:
    """Sufficiency and necessity decided by an LLM over an OpenAI-compatible endpoint."""

    def __init__(self, client: LLMClient, corpus: Mapping[str, str], *, random_contexts: int = 3, seed: int = 13) -> None:
        self.client = client
        self.corpus = corpus
        self.random_contexts = random_contexts
        self.seed = seed
        self.name = f"llm:{client.settings.model}"

    def decide_all(self, pairs: Sequence[tuple[str, str, Sequence[str]]]) -> list[FilterDecision]:
        """One decision per ``(query_id, query, gold_doc_ids)``, in order; all calls run concurrently."""
        requests, randoms = [], []
        for query_id, query, golds in pairs:
            picked = random_documents(list(self.corpus), query_id, set(golds), self.random_contexts, self.seed)
            randoms.append(picked)
            requests.append((answer_messages(query, [self.corpus[g] for g in golds if g in self.corpus]), AnswerFromContext))
            requests.append((answer_messages(query, [self.corpus[d] for d in picked]), AnswerFromContext))
        calls = self.client.map_json(requests)
        return [self._decision(p[0], calls[2 * i], calls[2 * i + 1], randoms[i]) for i, p in enumerate(pairs)]

    def _decision(self, query_id: str, gold: LLMCall, rand: LLMCall, random_ids: list[str]) -> FilterDecision:
        details = {"sufficiency": _answer(gold), "necessity": _answer(rand)}
        if gold.value is None or rand.value is None:
            error = gold.error if gold.value is None else rand.error
            return FilterDecision(
                query_id, False, self.name, f"undecided: {error}", random_doc_ids=random_ids, undecided=True, details=details
            )
        sufficient, leaked = gold.value["answerable"], rand.value["answerable"]
        if not sufficient:
            reason = f"dropped (insufficient): the model could not answer from the gold context: {gold.value.get('rationale', '')}"
        elif leaked:
            reason = f"dropped (not necessary): random contexts also answered it: {rand.value.get('rationale', '')}"
        else:
            reason = f"kept: answered from the gold context ({gold.value.get('answer', '')!r}), not from random contexts"
        return FilterDecision(
            query_id,
            sufficient and not leaked,
            self.name,
            reason,
            1.0 if sufficient else 0.0,
            1.0 if leaked else 0.0,
            random_ids,
            details=details,
        )


def _answer(call: LLMCall) -> dict[str, object]:
    return {"value": call.value, "error": call.error, "cached": call.cached, "raw": None if call.value else call.raw}


class LLMRetrievalJudge:
    """Scores a query's retrieved contexts; a query passes at ``quality >= pass_at``."""

    def __init__(self, client: LLMClient, *, pass_at: float = 0.7) -> None:
        self.client = client
        self.pass_at = pass_at
        self.name = f"llm:{client.settings.model}"

    def score_all(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[dict[str, object]]:
        """For each ``(question, retrieved texts)``: scores, pass flag and judge; None scores when undecided."""
        calls = self.client.map_json([(retrieval_messages(q, ctx), RetrievalScores) for q, ctx in items])
        out = []
        for call in calls:
            v = call.value or {}
            quality = v.get("quality")
            out.append(
                {
                    "judge": self.name,
                    "judge_quality": quality,
                    "judge_completeness": v.get("completeness"),
                    "judge_relevance": v.get("relevance"),
                    "judge_pass": None if quality is None else bool(quality >= self.pass_at),
                    "judge_error": call.error,
                    "judge_rationale": v.get("rationale"),
                }
            )
        return out
