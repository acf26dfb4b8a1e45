"""The columns computed elsewhere: context-QA similarity, the LLM judge, ``aggregate``'s summary figures, bookkeeping.

None has a formula here: context-QA's columns come from the dataset kind
(:mod:`retrieval_pipeline.core.datasets.context_qa.metrics`), the judge's from the LLM judge, the summary
figures from :func:`~retrieval_pipeline.core.evaluation.metrics.frame.aggregate`. Their entries say what
they mean, which direction is better and how they are aggregated and shown.
"""

from __future__ import annotations

from retrieval_pipeline.core.evaluation.metrics.entry import Aggregation, MetricInfo, per_query


def _summary(
    name: str, description: str, aggregation: Aggregation, higher: bool | None, *, headline: bool = False, summary: bool = False
) -> MetricInfo:
    """A figure that only ``aggregate`` produces (``summary``: in the report's summary table)."""
    return MetricInfo(name, description, higher, aggregation, "summary", headline, views={"summary": True} if summary else {}, order=90)


def _bookkeeping(name: str, description: str) -> MetricInfo:
    """A per-query column that is not a metric."""
    return MetricInfo(name, description, None, "none", "bookkeeping", order=900)


ENTRIES = (
    # --- context QA (core.datasets.context_qa.metrics), between mrr and ndcg@k in the headline
    per_query(
        "context_coverage@{k}",
        "Mean best exact similarity of any of the top {k} chunks to the expected context "
        "(0 when nothing was retrieved); unlike hit_rate@{k} it is not cut at the threshold, so near misses show.",
        headline=(5,),
        order=60,
    ),
    per_query(
        "best_match_position@{k}",
        "Mean 1-based position in the top {k} of the chunk most similar to the expected context, "
        "over the queries with a relevant chunk in the top {k} (1 is best).",
        aggregation="mean_over_found",
        higher=False,
        headline=(5,),
        order=70,
    ),
    # --- summary figures of aggregate
    _summary(
        "not_found_rate", "Share of queries with no relevant document anywhere in the run.", "rate", False, headline=True, summary=True
    ),
    _summary(
        "avg_rank_when_found",
        "Mean rank of the first relevant document, over the queries where one was found.",
        "mean_over_found",
        False,
        headline=True,
    ),
    _summary("latency_mean_ms", "Mean search latency per query, in milliseconds.", "mean", False, headline=True),
    _summary(
        "latency_p95_ms",
        "95th percentile of search latency per query, in milliseconds (linear interpolation).",
        "p95",
        False,
        headline=True,
    ),
    _summary("not_found", "Number of queries with no relevant document anywhere in the run.", "count", False),
    _summary("n_queries", "Number of evaluated queries (every query in the qrels, retrieved or not).", "count", None),
    # --- the LLM judge of retrieved results
    per_query(
        "judge_quality",
        "Mean LLM-judge score in [0, 1] of how well the retrieved contexts serve the question, over the judged queries.",
        order=120,
    ),
    per_query(
        "judge_completeness",
        "Mean LLM-judge score in [0, 1] of how much of what is needed to answer is present "
        "in the retrieved contexts, over the judged queries.",
        order=120,
    ),
    per_query(
        "judge_relevance",
        "Mean LLM-judge share in [0, 1] of the retrieved contexts that are on topic, over the judged queries.",
        order=120,
    ),
    per_query("judge_pass", "Share of judged queries whose LLM-judge quality reaches the pass mark.", aggregation="rate", order=120),
    # --- bookkeeping columns of the per-query frames
    _bookkeeping("query_id", "Identifier of the query."),
    _bookkeeping("n_relevant", "Number of relevant documents (grade >= 1) the qrels hold for the query."),
    _bookkeeping("found", "Whether any relevant document appears anywhere in the query's run."),
    _bookkeeping("first_relevant_rank", "1-based rank of the first relevant document in the run (empty when not found)."),
    _bookkeeping("retriever", "Name of the retriever that produced the row."),
    _bookkeeping("latency_ms", "Search latency of the query in milliseconds (empty past the latency sample)."),
    _bookkeeping("error", "Why the retriever failed on the query (empty when it did not); a failed query counts as not found."),
    _bookkeeping("top_hits", "Doc ids of the query's top retrieved documents, best first."),
    _bookkeeping("judge", "Name of the LLM judge that scored the row (empty when not judged)."),
    _bookkeeping("judge_error", "Why the LLM judge gave no scores for the row (empty when it did)."),
    _bookkeeping("judge_rationale", "The LLM judge's explanation of its scores."),
)
