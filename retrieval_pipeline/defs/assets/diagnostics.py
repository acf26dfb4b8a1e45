"""Diagnostics: why each retriever missed the queries it missed (failure buckets)."""

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.evaluation import buckets as buckets
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import dataset_partitions

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]


class FailureBucketsConfig(dg.Config):
    """The cut-off: a query is missed when no gold document is in the top ``k``."""

    k: int = 5


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"})
def failure_buckets(
    context: dg.AssetExecutionContext,
    config: FailureBucketsConfig,
    query_results: pd.DataFrame,
    retrieval_dataset: pd.DataFrame,
    corpus: pd.DataFrame,
) -> dg.MaterializeResult[pd.DataFrame]:
    """One row per (retriever, query) missed at k, with one bucket and the evidence for it.

    Buckets, in precedence order: ``vocabulary_mismatch`` (no query content word in the gold's text),
    ``distractor_overlap`` (a hard negative or kin of the gold above it matches more query words),
    ``specificity_gap`` (a parent, base class, sibling or same-page doc above it, and the query names
    nothing specific to the gold), ``unexplained``; ``also`` lists the other buckets that apply.
    The rules are in :mod:`retrieval_pipeline.core.evaluation.buckets`. Per retriever the buckets add up
    to its misses (the ``bucket_counts`` table).
    """
    frame = buckets.failure_buckets(query_results, retrieval_dataset, corpus, config.k, dataset=context.partition_key)
    counts = buckets.bucket_counts(frame, buckets.queries_per_retriever(query_results))
    return dg.MaterializeResult(value=frame, metadata=dagster_metadata(buckets.failure_metadata(frame, counts, config.k)))
