"""The metrics, one module each: its formula beside its entries (:class:`~retrieval_pipeline.core.evaluation.metrics.entry.MetricInfo`).

The modules are grouped by the judgements their formula reads:

- ``binary/``: relevant or not (``grade >= 1``): hit_rate, mrr, precision, recall, f1, map, r_prec, rbp;
- ``graded/``: the grade itself: ndcg, err;
- ``incomplete/``: which documents the qrels judge at all (unjudged ones are skipped or counted): bpref, infap, judged.

Every module under this folder (any sub-folder) that defines ``ENTRIES`` is found by the registry; adding a
metric is adding one module (formula and entry) to the sub-folder of the judgements it reads, and its test.
Notation in the docstrings: for one query, ``rel_i`` is 1 when the document at rank ``i`` (1-based) is
relevant and 0 otherwise, ``g_i`` is its grade (0 when not relevant), and ``R`` is the number of relevant
documents in the qrels.
"""
