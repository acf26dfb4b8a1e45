"""A local LLM as the expensive ranker: pointwise P(yes) of Qwen2.5-Coder-1.5B over a registry retriever's top k.

    python benchmarks/llm_rerank.py --dataset insurance --base dense_mpnet --k 10 --json /tmp/llm_rerank.json
    python benchmarks/llm_rerank.py --dataset insurance --base dense_mpnet --scores-from /tmp/llm_rerank.json

Builds ``--base`` through the pipeline's factory (``dev_eval``), runs the dataset's resolved cases at depth 100,
serves the local model with llama.cpp on loopback (``serve_local_model``; the ``local-llm-qwen`` extra), and reranks
the base's first ``k`` hits with the ``rerank`` kind's own :class:`CrossEncoderReranker`, whose scorer here is
:class:`LlmScorer`: for each pair, :data:`PROMPT` with one token to answer, scored P(Yes) / (P(Yes) + P(No)) from the
answer token's top log-probabilities (0 when neither is among them). A second run is the reciprocal rank fusion
(``rrf_fuse``, k = 60) of the base's and the reranked orders. Nothing is tuned: the prompt and ``k`` were fixed
before any score was seen. The table gives hit@1, hit@5, MRR and nDCG@10 with 95% percentile-bootstrap CIs and each
run's paired difference to the base (``dev_eval.paired_table``). ``--json`` keeps the scores, so ``--scores-from``
prints the table again without the model.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_eval import build_indexes, dev_pairs, paired_table, registry_specs, table_lines  # noqa: E402

from retrieval_pipeline.core.common.types import Hit  # noqa: E402
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics  # noqa: E402
from retrieval_pipeline.core.retrieval.engines.fusion import rrf_fuse  # noqa: E402
from retrieval_pipeline.core.retrieval.engines.reranking import CrossEncoderReranker  # noqa: E402
from retrieval_pipeline.core.retrieval.factory import load_retriever  # noqa: E402
from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec  # noqa: E402

PROMPT = "Question: {query}\n\nPassage:\n{passage}\n\nDoes the passage answer the question? Answer Yes or No."
#: Characters of a document put in the prompt.
MAX_PASSAGE_CHARS = 1500


def p_yes(client, model: str, query: str, passage: str) -> float:
    """P(Yes) / (P(Yes) + P(No)) of the one-token answer, from its top 10 log-probabilities."""
    prompt = PROMPT.format(query=query, passage=passage[:MAX_PASSAGE_CHARS])
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=1, temperature=0, logprobs=True, top_logprobs=10
    )
    mass = {"yes": 0.0, "no": 0.0}
    for candidate in reply.choices[0].logprobs.content[0].top_logprobs:
        word = candidate.token.strip().lower()
        if word in mass:
            mass[word] += math.exp(candidate.logprob)
    total = mass["yes"] + mass["no"]
    return mass["yes"] / total if total > 0 else 0.0


class LlmScorer:
    """A rerank scorer (``model_id``, ``score(pairs)``): :func:`p_yes` of every pair, with a progress line per 100;
    ``scores`` keeps the last call's."""

    def __init__(self, client, model: str) -> None:
        self.client, self.model, self.model_id = client, model, f"llm:{model}"

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        started, scores = time.perf_counter(), []
        for i, (query, passage) in enumerate(pairs, start=1):
            scores.append(p_yes(self.client, self.model, query, passage))
            if i % 100 == 0 or i == len(pairs):
                print(f"{i}/{len(pairs)} pairs, {i / (time.perf_counter() - started):.2f} pairs/s", flush=True)
        self.scores = np.asarray(scores)
        return self.scores


class SavedScorer:
    """The scores of an earlier run, in the order the reranker asks for them (its queries, then each head's hits)."""

    model_id = "saved"

    def __init__(self, scores: Sequence[float]) -> None:
        self.scores = np.asarray(scores, dtype=np.float64)

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if len(pairs) != len(self.scores):
            raise ValueError(f"{len(self.scores)} saved scores for {len(pairs)} pairs")
        return self.scores


class Recorded:
    """A base retriever that answers from runs already made (the reranker asks its base again)."""

    name = "recorded"

    def __init__(self, queries: Sequence[str], runs: Sequence[list[Hit]]) -> None:
        self.runs = dict(zip(queries, runs))

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return [self.runs[q][:k] for q in queries]


def rerank_runs(queries: list[str], runs: list[list[Hit]], scorer, texts: dict[str, str], k: int) -> tuple[list, list]:
    """The base's runs with their top ``k`` reranked by ``scorer``, and the RRF of the base's and the reranked orders."""
    reranked = CrossEncoderReranker("llm", Recorded(queries, runs), scorer, texts, k).search(queries, 100)
    return reranked, [rrf_fuse([base, llm]) for base, llm in zip(runs, reranked)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="insurance")
    parser.add_argument("--types", default="", help="case types evaluated (comma-separated; empty: all resolved)")
    parser.add_argument("--base", default="dense_mpnet")
    parser.add_argument("--k", type=int, default=10, help="how many of the base's hits the model scores")
    parser.add_argument("--local-model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "data" / "cache")
    parser.add_argument("--json", type=Path, default=None, help="write the scores and the table here")
    parser.add_argument("--scores-from", type=Path, default=None, help="a --json file of an earlier run: no model needed")
    args = parser.parse_args(argv)

    dev = dev_pairs(args.dataset, {t for t in args.types.split(",") if t})
    specs, index_root = registry_specs(), Path(tempfile.mkdtemp(prefix="llm-rerank-"))
    build_indexes(specs, [args.base], dev, index_root, args.cache_dir)
    retriever = load_retriever(specs, args.base, dev.name, dev.documents, index_root, args.cache_dir, encoder_for_spec)
    queries, texts = [p.query for p in dev.pairs], {d.doc_id: d.text for d in dev.documents}
    runs = [list(result) for result in retriever.search(queries, 100)]
    heads = [[doc_id for doc_id, _ in run[: args.k]] for run in runs]
    seconds = None
    if args.scores_from:
        saved = json.loads(args.scores_from.read_text(encoding="utf-8"))
        if saved["query_ids"] != [p.query_id for p in dev.pairs] or saved["heads"] != heads:
            raise SystemExit(f"{args.scores_from} scored other queries or other hits than {args.base} returns now")
        scorer = SavedScorer([s for row in saved["scores"] for s in row])
        reranked, fused = rerank_runs(queries, runs, scorer, texts, args.k)
    else:
        from openai import OpenAI

        from retrieval_pipeline.core.services.llm.local_models import serve_local_model

        started = time.perf_counter()
        with serve_local_model(args.local_model, args.cache_dir, n_threads=args.threads) as server:
            client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=600)
            scorer = LlmScorer(client, str(server.model))
            reranked, fused = rerank_runs(queries, runs, scorer, texts, args.k)
        seconds = time.perf_counter() - started
    names = [args.base, f"llm_top{args.k}", f"rrf_{args.base}_llm"]
    order = [p.query_id for p in dev.pairs]
    frames = {
        name: per_query_metrics(dict(zip(order, ranked)), dev.qrels).set_index("query_id").loc[order]
        for name, ranked in zip(names, (runs, reranked, fused))
    }
    table = paired_table(frames, names)
    print(f"\n{args.dataset}: {len(dev.pairs)} resolved cases; {args.local_model} scoring the top {args.k} of {args.base}")
    if seconds is not None:
        pairs = len(dev.pairs) * args.k
        print(f"{pairs} pairs in {seconds:.0f} s ({pairs / seconds:.2f} pairs/s, {args.threads} threads)")
    for line in table_lines(table, names):
        print(line)
    if args.json and not args.scores_from:
        flat = iter(scorer.scores.tolist())  # in the reranker's order: each query's head, base order
        scores = [[next(flat) for _ in head] for head in heads]
        report = {"query_ids": order, "heads": heads, "scores": scores, "seconds": seconds, "metrics": table}
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
