"""A local LLM as the expensive ranker: pointwise P(yes) of Qwen2.5-Coder-1.5B over a registry retriever's top k.

    python benchmarks/llm_rerank.py --dataset insurance --base dense_mpnet --k 10 --json /tmp/llm_rerank.json
    python benchmarks/llm_rerank.py --dataset insurance --base dense_mpnet --scores-from /tmp/llm_rerank.json

Builds ``--base`` through the pipeline's factory (``dev_eval``), runs the dataset's resolved cases at depth 100,
serves the local model with llama.cpp on loopback (``serve_local_model``; the ``local-llm-qwen`` extra), and asks,
for each of the base's first ``k`` hits, :data:`PROMPT` with one token to answer; a pair's score is
P(Yes) / (P(Yes) + P(No)) read from the answer token's top log-probabilities (0 when neither is among them).
Two runs come out of the scores: the ``k`` hits sorted by score (ties keep the base's order) and the reciprocal
rank fusion of the base's and the LLM's orders (k = 60); the hits below ``k`` follow in the base's order. Nothing
is tuned: the prompt and ``k`` were fixed before any score was seen. The table gives hit@1, hit@5, MRR and
nDCG@10 with 95% percentile-bootstrap CIs and each run's paired difference to the base (``dev_eval.paired_table``).
``--json`` keeps the scores, so ``--scores-from`` prints the table again without the model.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_eval import build_indexes, dev_pairs, paired_table, registry_specs, table_lines  # noqa: E402

from retrieval_pipeline.core.evaluation.metrics import per_query_metrics  # noqa: E402
from retrieval_pipeline.core.retrieval.encoders import encoder_for_spec  # noqa: E402
from retrieval_pipeline.core.retrieval.factory import load_retriever  # noqa: E402

PROMPT = "Question: {query}\n\nPassage:\n{passage}\n\nDoes the passage answer the question? Answer Yes or No."
#: Characters of a document put in the prompt.
MAX_PASSAGE_CHARS = 1500
RRF_K = 60


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


def llm_scores(queries: list[str], heads: list[list[str]], texts: dict[str, str], local_model: str, threads: int) -> list[list[float]]:
    """Every (query, head document) pair's score, from the local model served on loopback."""
    from openai import OpenAI

    from retrieval_pipeline.core.llm.local_models import serve_local_model

    scores: list[list[float]] = []
    started, done = time.perf_counter(), 0
    with serve_local_model(local_model, ROOT / "data" / "cache", n_threads=threads) as server:
        client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=600)
        for i, (query, head) in enumerate(zip(queries, heads)):
            scores.append([p_yes(client, str(server.model), query, texts[d]) for d in head])
            done += len(head)
            if i % 10 == 0 or i == len(queries) - 1:
                print(f"{i + 1}/{len(queries)} queries, {done / (time.perf_counter() - started):.2f} pairs/s", flush=True)
    return scores


def reranked(run: list[str], scores: list[float]) -> list[str]:
    """The scored head sorted by score (stable: ties keep the base's order), then the base's tail."""
    head = run[: len(scores)]
    order = sorted(range(len(head)), key=lambda j: -scores[j])
    return [head[j] for j in order] + run[len(head) :]


def fused(run: list[str], scores: list[float]) -> list[str]:
    """Reciprocal rank fusion (k = 60) of the base's order and the LLM's order of the head, then the base's tail."""
    head = run[: len(scores)]
    llm_rank = {d: r for r, d in enumerate(reranked(head, scores))}
    fusion = {d: 1 / (RRF_K + 1 + r) + 1 / (RRF_K + 1 + llm_rank[d]) for r, d in enumerate(head)}
    return sorted(head, key=lambda d: -fusion[d]) + run[len(head) :]


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
    queries = [p.query for p in dev.pairs]
    runs = [[doc_id for doc_id, _ in result] for result in retriever.search(queries, 100)]
    seconds = None
    if args.scores_from:
        saved = json.loads(args.scores_from.read_text(encoding="utf-8"))
        if saved["query_ids"] != [p.query_id for p in dev.pairs] or saved["heads"] != [r[: args.k] for r in runs]:
            raise SystemExit(f"{args.scores_from} scored other queries or other hits than {args.base} returns now")
        scores = saved["scores"]
    else:
        texts = {d.doc_id: d.text for d in dev.documents}
        started = time.perf_counter()
        scores = llm_scores(queries, [r[: args.k] for r in runs], texts, args.local_model, args.threads)
        seconds = time.perf_counter() - started
    names = [args.base, f"llm_top{args.k}", f"rrf_{args.base}_llm"]
    variants = {names[0]: runs, names[1]: list(map(reranked, runs, scores)), names[2]: list(map(fused, runs, scores))}
    order = [p.query_id for p in dev.pairs]
    frames = {
        name: per_query_metrics({q: [(d, -float(i)) for i, d in enumerate(r)] for q, r in zip(order, ranked)}, dev.qrels)
        .set_index("query_id")
        .loc[order]
        for name, ranked in variants.items()
    }
    table = paired_table(frames, names)
    print(f"\n{args.dataset}: {len(dev.pairs)} resolved cases; {args.local_model} scoring the top {args.k} of {args.base}")
    if seconds is not None:
        pairs = len(dev.pairs) * args.k
        print(f"{pairs} pairs in {seconds:.0f} s ({pairs / seconds:.2f} pairs/s, {args.threads} threads)")
    for line in table_lines(table, names):
        print(line)
    if args.json and not args.scores_from:
        report = {"query_ids": order, "heads": [r[: args.k] for r in runs], "scores": scores, "seconds": seconds, "metrics": table}
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
