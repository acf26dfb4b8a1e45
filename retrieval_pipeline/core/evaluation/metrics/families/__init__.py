"""The metrics, one module each: its formula beside its entries (:class:`~retrieval_pipeline.core.evaluation.metrics.entry.MetricInfo`).

Every module here that defines ``ENTRIES`` is found by the registry; adding a metric is adding one
module (formula and entry) and its test. Notation in the docstrings: for one query, ``rel_i`` is 1 when
the document at rank ``i`` (1-based) is relevant and 0 otherwise, ``g_i`` is its grade (0 when not
relevant), and ``R`` is the number of relevant documents in the qrels.
"""
