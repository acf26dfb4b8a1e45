"""Score retrievers: ``from retrieval_pipeline import evaluate, compare`` (see ``docs/api.md``).

The names are loaded on first use, so importing the package (and every ``retrieval_pipeline.*`` module)
stays as light as before: no pandas, scipy, torch or Dagster until they are needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Comparison",
    "EmptyRunWarning",
    "Evaluation",
    "NoSharedQueryWarning",
    "PairComparison",
    "RunQrelsWarning",
    "compare",
    "evaluate",
    "parse_metric",
]

if TYPE_CHECKING:
    from retrieval_pipeline.api import (
        Comparison,
        EmptyRunWarning,
        Evaluation,
        NoSharedQueryWarning,
        PairComparison,
        RunQrelsWarning,
        compare,
        evaluate,
    )
    from retrieval_pipeline.core.evaluation.metrics.names import parse_metric


def __getattr__(name: str) -> Any:
    if name == "parse_metric":
        from retrieval_pipeline.core.evaluation.metrics.names import parse_metric

        return parse_metric
    if name in __all__:
        from retrieval_pipeline import api

        return getattr(api, name)
    raise AttributeError(f"module 'retrieval_pipeline' has no attribute {name!r}")
