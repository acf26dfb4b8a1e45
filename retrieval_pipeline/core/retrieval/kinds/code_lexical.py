"""``kind: code_lexical``: a lexical retriever's scores plus identifier matches on names and FQNs.

The identifiers a query names (backticked, CamelCase, snake_case, dotted) are matched against each
document's name and FQN, exactly and by parts, and added to the min-max normalised scores of ``base``
(:mod:`retrieval_pipeline.core.retrieval.engines.identifiers` has the features and the formula).

Settings:

* ``base``: the retriever whose scores are the text part (built first: it is a component), e.g. ``bm25_code``.
* ``depth``: hits read from ``base`` per query (default 100).
* ``weights``: ``text``, ``exact``, ``suffix``, ``component``, ``part`` (defaults 1, 1, 0.5, 0.25, 0.5;
  each >= 0): an exact name outranks a name sharing words with the identifier, and a dotted path that
  ends the FQN adds to its exact name.
* ``prior``: optional, off by default: ``{path, field, id_field, weight}`` reads a YAML list of entries
  (``ranked_targets.yaml``: ``id`` and ``usage_score``) and adds ``weight`` times
  :func:`~retrieval_pipeline.core.retrieval.engines.identifiers.prior_values` of ``field`` (``path`` is relative
  to the working directory). The build writes the corpus's prior values to ``prior.json``; a document the
  file does not name gets 0.

The index is ``prior.json`` alone (when a prior is set); the name index is rebuilt from the corpus on load
(a pass over the documents' names).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.yaml_file import read_yaml
from retrieval_pipeline.core.retrieval.engines.identifiers import CodeLexicalRetriever, FeatureWeights, prior_values
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverName, RetrieverSpec, register_kind

PRIOR_FILE = "prior.json"


class CodeWeights(BaseModel):
    """The feature weights (see :class:`~retrieval_pipeline.core.retrieval.engines.identifiers.FeatureWeights`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: float = Field(1.0, ge=0)
    exact: float = Field(1.0, ge=0)
    suffix: float = Field(0.5, ge=0)
    component: float = Field(0.25, ge=0)
    part: float = Field(0.5, ge=0)


class PriorSource(BaseModel):
    """A corpus prior read from a YAML list of entries: ``weight`` times the log-scaled ``field`` of each ``id_field``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    field: str = "usage_score"
    id_field: str = "id"
    weight: float = Field(0.1, gt=0)

    def scores(self) -> dict[str, float]:
        """``{id: value}`` of every entry with a numeric ``field``.

        Raises:
            InputError: The file is unreadable or not a list of entries.
        """
        entries = read_yaml(Path(self.path), "prior file")
        if not isinstance(entries, list):
            raise InputError(f"{self.path}: the prior file must hold a list of entries, got {type(entries).__name__}")
        scores: dict[str, float] = {}
        for entry in entries:
            if not isinstance(entry, Mapping):
                continue
            value = entry.get(self.field)
            if entry.get(self.id_field) is not None and isinstance(value, int | float) and not isinstance(value, bool):
                scores.setdefault(str(entry[self.id_field]), float(value))
        return scores


@register_kind
class CodeLexicalSpec(RetrieverSpec):
    kind: Literal["code_lexical"] = "code_lexical"
    base: RetrieverName
    depth: int = Field(100, ge=1)
    weights: CodeWeights = CodeWeights()
    prior: PriorSource | None = None

    def components(self) -> list[str]:
        return [self.base]

    def feature_weights(self) -> FeatureWeights:
        return FeatureWeights(**self.weights.model_dump(), prior=self.prior.weight if self.prior else 0.0)

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        """Check the base is built; with a prior, write the corpus's prior values to ``prior.json``."""
        ctx.component(self.base)
        if self.prior is None:
            return {"prior_docs": 0}
        values = prior_values(ctx.doc_ids, self.prior.scores())
        prior = {doc_id: float(v) for doc_id, v in zip(ctx.doc_ids, values.tolist()) if v > 0}
        (Path(ctx.index_dir) / PRIOR_FILE).write_text(json.dumps(prior, sort_keys=True), encoding="utf-8")
        return {"prior_docs": len(prior)}

    def load(self, ctx: RetrieverContext) -> CodeLexicalRetriever:
        prior = None
        if self.prior is not None:
            stored = json.loads((Path(ctx.index_dir) / PRIOR_FILE).read_text(encoding="utf-8"))
            prior = np.array([float(stored.get(doc_id, 0.0)) for doc_id in ctx.doc_ids])
        return CodeLexicalRetriever(self.name, ctx.component(self.base), ctx.documents, self.feature_weights(), self.depth, prior)
