"""Choose HNSW's ``efSearch`` on real vectors: recall@10 against flat on a dev half of the queries, reported on the test half.

The vectors are all-MiniLM-L6-v2 (the registry's ``dense_minilm``) over the 100,000-document subset that
``benchmarks/scale.py`` evaluates (same seed, same nested subsets), read from its embedding cache (embedded
first when missing), with that subset's known-item queries encoded as the retriever encodes them. One HNSW
graph (``M`` 32, ``efConstruction`` 200) is built; each ``efSearch`` is then searched on every query. The
queries are split in seeded halves: the rule is "the smallest efSearch whose dev recall@10 reaches the
goal"; its test-half recall is the number to report. Single-query latencies are on one FAISS thread.

    .venv/bin/python benchmarks/hnsw_ef_search.py [--size 100000] [--ef 128 192 256 384 512] [--goal 0.98]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402  (beside this file)

from retrieval_pipeline.core.retrieval.engines.faiss_index import faiss_threads, recall_at_k  # noqa: E402
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs  # noqa: E402
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache  # noqa: E402
from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--ef", type=int, nargs="+", default=[128, 192, 256, 384, 512])
    parser.add_argument("--goal", type=float, default=0.98)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--cache-dir", type=Path, default=PROJECT_ROOT / "data" / "cache" / "scale_bench")
    args = parser.parse_args(argv)
    import faiss

    corpus = scale.installed_corpus()
    golds = [(q, g) for q, _, g in corpus.queries]
    sizes = sorted({10_000, 30_000, args.size})
    subsets, _ = scale.nested_subsets([d.doc_id for d in corpus.documents], golds, sizes, seed=args.seed, gold_share=0.02)
    subset = subsets[args.size]
    documents = [corpus.documents[i] for i in subset.positions]
    texts = {q: t for q, t, _ in corpus.queries}
    spec = load_retriever_specs(PROJECT_ROOT / "data" / "config" / "retrievers.yaml").get("dense_minilm")
    encoder = encoder_for_spec(spec)
    with EmbeddingCache(args.cache_dir / "embeddings.sqlite") as cache:
        vectors, stats = cache.get_or_encode(encoder, [spec.passage_prefix + d.text for d in documents])
    print(f"{len(documents):,} documents ({stats.hits:,} vectors from the cache, {stats.misses:,} embedded now)")
    queries = encoder.encode([spec.query_prefix + texts[q] for q in subset.query_ids]).astype(np.float32)
    docs = np.ascontiguousarray(vectors / np.linalg.norm(vectors, axis=1, keepdims=True), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    flat = faiss.IndexFlatIP(docs.shape[1])
    flat.add(docs)
    _, truth = flat.search(queries, 10)
    hnsw = faiss.IndexHNSWFlat(docs.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 200
    started = time.perf_counter()
    hnsw.add(docs)
    print(f"HNSW (M 32, efConstruction 200) built in {time.perf_counter() - started:.1f} s; {len(queries):,} queries")
    order = np.random.default_rng(args.seed).permutation(len(queries))
    dev, test = order[: len(order) // 2], order[len(order) // 2 :]
    chosen = None
    for ef in sorted(args.ef):
        hnsw.hnsw.efSearch = ef
        _, found = hnsw.search(queries, 10)
        latency = []
        with faiss_threads(1):
            for i in range(min(300, len(queries))):
                started = time.perf_counter()
                hnsw.search(queries[i : i + 1], 10)
                latency.append((time.perf_counter() - started) * 1000)
        on_dev, on_test = recall_at_k(truth[dev], found[dev]), recall_at_k(truth[test], found[test])
        if chosen is None and on_dev >= args.goal:
            chosen = (ef, on_test)
        print(
            f"efSearch {ef:>4}: recall@10 dev {on_dev:.4f}  test {on_test:.4f}; "
            f"single query P50 {np.percentile(latency, 50):.3f} ms, P95 {np.percentile(latency, 95):.3f} ms"
        )
    if chosen is None:
        print(f"no efSearch reached recall@10 {args.goal} on the dev half")
        return 1
    print(
        f"chosen on dev: efSearch {chosen[0]}; its test-half recall@10 {chosen[1]:.4f} (goal {args.goal}: {'OK' if chosen[1] >= args.goal else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
