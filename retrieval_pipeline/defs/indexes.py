"""Per-retriever indexes, saved with their parameters under ``data/out/indexes/<dataset>/<retriever>/``."""

import time

import pandas as pd
import dagster as dg

from retrieval_pipeline.core.retrieval.bm25 import BM25Retriever
from retrieval_pipeline.core.retrieval.dense import DenseRetriever
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import EncoderResource, PipelineSettings


@dg.asset(partitions_def=dataset_partitions, group_name="indexes", kinds={"python"})
def bm25_index(context: dg.AssetExecutionContext, settings: PipelineSettings, corpus: pd.DataFrame) -> dg.MaterializeResult:
    """BM25 (Okapi, rank-bm25's scoring reproduced exactly) over the corpus text, as a sparse term-weight matrix."""
    params = settings.dataset(context.partition_key).retrievers.bm25
    t0 = time.perf_counter()
    index = BM25Retriever.build(corpus["doc_id"].tolist(), corpus["text"].tolist(), k1=params.k1, b=params.b, epsilon=params.epsilon)
    path = settings.index_dir(context.partition_key, "bm25")
    index.save(path)
    return dg.MaterializeResult(metadata={
        "documents": len(corpus), "k1": params.k1, "b": params.b, "epsilon": params.epsilon,
        "build_seconds": round(time.perf_counter() - t0, 3), "index_path": dg.MetadataValue.path(str(path)),
    })


@dg.asset(partitions_def=dataset_partitions, group_name="indexes", kinds={"faiss", "torch"})
def dense_index(
    context: dg.AssetExecutionContext, settings: PipelineSettings, encoder: EncoderResource, corpus: pd.DataFrame
) -> dg.MaterializeResult:
    """Dense index: all-MiniLM-L6-v2 embeddings (normalised) in a FAISS inner-product index.

    Embeddings come from a cache keyed by model and text hash, so an unchanged corpus is never re-embedded
    (``embedded_now`` is 0 on a re-run).
    """
    enc = encoder.get_encoder()
    index = DenseRetriever("dense_minilm").build(corpus["doc_id"].tolist(), corpus["text"].tolist(), enc, cache=settings.embedding_cache())
    path = settings.index_dir(context.partition_key, "dense_minilm")
    index.save(path)
    stats = index.build_stats
    return dg.MaterializeResult(metadata={
        "documents": len(corpus), "model_id": enc.model_id, "dim": enc.dim,
        "embedded_now": stats.embedded_now, "from_cache": stats.from_cache,
        "build_seconds": round(stats.seconds, 3), "index_path": dg.MetadataValue.path(str(path)),
    })
