"""Failure buckets: why a retriever missed a query at k, one bucket per miss, with the evidence.

A query is **missed at k** by a retriever when no gold document is in its top k
(``first_relevant_rank`` is NaN or greater than k). Each miss gets exactly one primary ``bucket``,
the first rule in this precedence that applies, and lists the other rules that also apply in ``also``:

1. ``vocabulary_mismatch``: no content word of the query matches a word of any gold's text. It comes
   first because it is a property of the query and its gold alone: no ranking could fix it lexically.
2. ``distractor_overlap``: a document ranked above the gold is a hard negative of the query
   (``negative_ctxs`` with ``is_hard_negative``) or a kin of the gold, and matches more of the
   query's content words than the best-matching gold does. The ranking followed the words.
3. ``specificity_gap``: a kin of the gold ranks above it and the query is vague for the gold: it names
   nothing that is specific to the gold rather than to that kin. The ranking preferred a related,
   more generic document and the query gave it no reason not to. Checked after the distractor rule
   because "the query does not name the API" holds for most natural-language questions, while the
   distractor rule rests on a measured difference in overlap.
4. ``unexplained``: none of the above; the evidence says what was checked.

The words, documents and kinship these rules weigh are defined in
:mod:`~retrieval_pipeline.core.evaluation.bucket_evidence`.

Only the recorded hits (``top_hits``, the top 10) can be cited as ranking above the gold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.asset_metadata import Markdown, Metadata, md_preview
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.evaluation.bucket_evidence import Doc, content_words, is_vague, kinship, overlap, specific_words

#: Buckets in precedence order: a miss gets the first that applies.
BUCKETS: tuple[str, ...] = ("vocabulary_mismatch", "distractor_overlap", "specificity_gap", "unexplained")

QUERY_RESULTS_COLUMNS = ("retriever", "query_id", "first_relevant_rank", "top_hits")
DATASET_COLUMNS = ("id", "query", "positive_ctxs", "negative_ctxs")
CORPUS_COLUMNS = ("doc_id", "text", "title", "kind", "module", "aliases")
#: Columns of :func:`failure_buckets`' frame.
COLUMNS = ("retriever", "query_id", "query", "bucket", "evidence", "gold", "gold_rank", "outranking_doc", "outranking_rank", "also")


# --- one miss ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Miss:
    """One query a retriever missed at k, with what the rules need.

    Attributes:
        retriever: The retriever's name.
        query_id: The query's id.
        query: The query text.
        golds: The gold documents, the one at ``gold_rank`` first when it is among the recorded hits.
        gold_rank: 1-based rank of the first gold in the run; NaN when no gold was retrieved.
        above: ``(rank, doc)`` of the recorded hits ranked above the first gold, best first.
        hard_negatives: Doc id -> negative kind (``sibling``, ``bm25``...) of the query's hard negatives.
    """

    retriever: str
    query_id: str
    query: str
    golds: tuple[Doc, ...]
    gold_rank: float
    above: tuple[tuple[int, Doc], ...]
    hard_negatives: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def words(self) -> tuple[str, ...]:
        """The query's content words."""
        return content_words(self.query)

    @cached_property
    def gold_overlap(self) -> tuple[str, ...]:
        """The query words matching the best-matching gold (the longest overlap; the first gold on ties)."""
        return max((overlap(self.words, g.vocabulary) for g in self.golds), key=len, default=())

    @property
    def gold(self) -> Doc:
        """The gold cited in evidence."""
        return self.golds[0]

    def rank_text(self) -> str:
        """``rank 7``, or ``not retrieved`` when the run holds no gold."""
        return "not retrieved" if math.isnan(self.gold_rank) else f"rank {int(self.gold_rank)}"


@dataclass(frozen=True)
class Finding:
    """A rule that applies to a miss: its bucket, a readable sentence and the document it cites."""

    bucket: str
    evidence: str
    outranking_doc: str | None = None
    outranking_rank: int | None = None


def _quoted(words: Iterable[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)


def _gold_names(miss: Miss) -> str:
    ids = [g.doc_id for g in miss.golds]
    return f"the gold {ids[0]}'s" if len(ids) == 1 else f"any gold's ({', '.join(ids)})"


def vocabulary_mismatch(miss: Miss) -> Finding | None:
    """No content word of the query matches a word of any gold's text (a query without content words counts too)."""
    if miss.gold_overlap:
        return None
    said = f"no content word of the query ({_quoted(miss.words)})" if miss.words else "the query has no content word, so none"
    return Finding("vocabulary_mismatch", f"{said} appears in {_gold_names(miss)} text")


def _kin_of_gold(miss: Miss, doc: Doc) -> tuple[str, Doc] | None:
    """The first gold ``doc`` is kin of, with the kinship; ``None`` when it is kin of none."""
    return next(((kin, g) for g in miss.golds if (kin := kinship(doc, g)) is not None), None)


def _distractor_label(miss: Miss, doc: Doc) -> str | None:
    kin = _kin_of_gold(miss, doc)
    if kin is not None:
        return kin[0]
    kind = miss.hard_negatives.get(doc.doc_id)
    return None if kind is None else ("sibling" if kind == "sibling" else f"{kind} hard negative")


def distractor_overlap(miss: Miss) -> Finding | None:
    """The best-ranked hard negative or kin above the gold that matches more query words than any gold does."""
    gold_words = miss.gold_overlap
    for rank, doc in miss.above:
        label = _distractor_label(miss, doc)
        words = overlap(miss.words, doc.vocabulary) if label else ()
        if label and len(words) > len(gold_words):
            evidence = (
                f"{doc.doc_id} ({label}, overlap {len(words)} words: {', '.join(words)}) ranks {rank}, above gold {miss.gold.doc_id} "
                f"(overlap {len(gold_words)}{': ' + ', '.join(gold_words) if gold_words else ''}; {miss.rank_text()})"
            )
            return Finding("distractor_overlap", evidence, doc.doc_id, rank)
    return None


def specificity_gap(miss: Miss) -> Finding | None:
    """The best-ranked kin above the gold against which the query is vague (names nothing specific to the gold)."""
    for rank, doc in miss.above:
        kin = _kin_of_gold(miss, doc)
        if kin is not None and is_vague(miss.words, kin[1], doc):
            gold = kin[1]
            specific = sorted(specific_words(gold, doc))
            said = (
                f"the query says none of the name words specific to gold {gold.doc_id} ({', '.join(specific)})"
                if specific
                else f"gold {gold.doc_id}'s name words ({', '.join(sorted(gold.name_words))}) are all its {kin[0]}'s too"
            )
            evidence = f"{said}; its {kin[0]} {doc.doc_id} ranks {rank}, above the gold ({miss.rank_text()})"
            return Finding("specificity_gap", evidence, doc.doc_id, rank)
    return None


def unexplained(miss: Miss) -> Finding:
    """What was checked when no rule applies: the gold's overlap and the best-ranked recorded hit."""
    shared = miss.gold_overlap
    if miss.above:
        rank, doc = miss.above[0]
        top = f"; best hit above it: {doc.doc_id} (rank {rank}, overlap {len(overlap(miss.words, doc.vocabulary))})"
    else:
        top = "; no recorded hit above it"
    evidence = (
        f"query shares {len(shared)} content words ({', '.join(shared)}) with gold {miss.gold.doc_id} ({miss.rank_text()}); "
        f"no hard negative or kin with more overlap ranks above it, nor a kin the query cannot tell from it{top}"
    )
    return Finding("unexplained", evidence)


#: The rules in precedence order; ``unexplained`` closes the list.
RULES: tuple[Callable[[Miss], Finding | None], ...] = (vocabulary_mismatch, distractor_overlap, specificity_gap)


def classify(miss: Miss) -> dict[str, Any]:
    """One output row for a miss: the first rule that applies is the bucket, the others are ``also``."""
    findings = [f for rule in RULES if (f := rule(miss)) is not None]
    primary = findings[0] if findings else unexplained(miss)
    return {
        "retriever": miss.retriever,
        "query_id": miss.query_id,
        "query": miss.query,
        "bucket": primary.bucket,
        "evidence": primary.evidence,
        "gold": miss.gold.doc_id,
        "gold_rank": miss.gold_rank,
        "outranking_doc": primary.outranking_doc,
        "outranking_rank": primary.outranking_rank,
        "also": [f.bucket for f in findings[1:]],
    }


# --- frames -----------------------------------------------------------------------------------


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str, dataset: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{what} lacks columns {missing} (has {list(frame.columns)})", path=f"{what}/{dataset or '?'}")


def _corpus_docs(corpus: pd.DataFrame) -> dict[str, Doc]:
    docs = {}
    for row in corpus[list(CORPUS_COLUMNS)].itertuples(index=False):
        module = row.module if isinstance(row.module, str) and row.module else None
        aliases = tuple(row.aliases) if row.aliases is not None and not isinstance(row.aliases, float) else ()
        docs[row.doc_id] = Doc(row.doc_id, row.text or "", row.title or "", row.kind or "passage", module, aliases)
    return docs


@dataclass(frozen=True)
class _Case:
    query: str
    golds: tuple[Doc, ...]
    hard_negatives: dict[str, str]
    texts: dict[str, str]  # negatives' texts, for hits missing from the corpus


def _cases(dataset: pd.DataFrame, docs: Mapping[str, Doc], name: str) -> dict[str, _Case]:
    cases = {}
    for row in dataset[list(DATASET_COLUMNS)].itertuples(index=False):
        positives = sorted(list(row.positive_ctxs), key=lambda p: -float(p.get("rank_relevance") or 1))
        if not positives:
            raise InputError(
                "a query without positive_ctxs cannot be missed for a reason", path=f"retrieval_dataset/{name}", case_id=row.id
            )
        golds = []
        for p in positives:
            base = docs.get(p["fqn"], Doc(p["fqn"], kind="passage"))
            golds.append(Doc(base.doc_id, p.get("text") or base.text, base.title, base.kind, base.module, base.aliases))
        negatives = list(row.negative_ctxs)
        hard = {n["fqn"]: str(n.get("kind") or "hard") for n in negatives if n.get("is_hard_negative")}
        cases[row.id] = _Case(row.query, tuple(golds), hard, {n["fqn"]: n.get("text") or "" for n in negatives})
    return cases


def _hit_doc(doc_id: str, docs: Mapping[str, Doc], case: _Case, where: str, query_id: str) -> Doc:
    if doc_id in docs:
        return docs[doc_id]
    if doc_id in case.texts:
        return Doc(doc_id, case.texts[doc_id], kind="passage")
    raise InputError(f"top hit {doc_id!r} is neither in the corpus nor among the query's negatives", path=where, case_id=query_id)


def _hits(value: Any) -> list[str]:
    return [] if value is None or (isinstance(value, float) and math.isnan(value)) else [str(h) for h in value]


def is_miss(rank: float, k: int) -> bool:
    """Missed at k: no gold retrieved (NaN rank) or the first gold below rank k."""
    return math.isnan(rank) or rank > k


def _rank(value: Any) -> float:
    """A 1-based rank as a float; NaN for a missing one (None, NaN, pd.NA)."""
    return math.nan if value is None or pd.isna(value) else float(value)


def _miss(row: Any, case: _Case, docs: Mapping[str, Doc], where: str) -> Miss:
    rank = _rank(row.first_relevant_rank)
    hits = _hits(row.top_hits)
    gold_ids = {g.doc_id for g in case.golds}
    stop = len(hits) if math.isnan(rank) else min(len(hits), int(rank) - 1)
    above = tuple((i + 1, _hit_doc(h, docs, case, where, row.query_id)) for i, h in enumerate(hits[:stop]) if h not in gold_ids)
    at_rank = hits[int(rank) - 1] if not math.isnan(rank) and int(rank) <= len(hits) else None
    golds = sorted(case.golds, key=lambda g: g.doc_id != at_rank)  # stable: the gold at the rank first
    return Miss(row.retriever, row.query_id, case.query, tuple(golds), rank, above, case.hard_negatives)


def failure_buckets(
    query_results: pd.DataFrame, retrieval_dataset: pd.DataFrame, corpus: pd.DataFrame, k: int = 5, *, dataset: str = ""
) -> pd.DataFrame:
    """One row per (retriever, query) missed at k, with its bucket and evidence (module docstring for the rules).

    Args:
        query_results: One row per (retriever, query): ``retriever``, ``query_id``, ``first_relevant_rank``, ``top_hits``.
        retrieval_dataset: ``id``, ``query``, ``positive_ctxs``, ``negative_ctxs``.
        corpus: ``doc_id``, ``text``, ``title``, ``kind``, ``module``, ``aliases``.
        k: The cut-off: a query is missed when no gold is in the top k.
        dataset: The dataset's name, for error messages.

    Returns:
        Columns :data:`COLUMNS`, rows in ``query_results`` order: ``bucket`` is one of :data:`BUCKETS`,
        ``evidence`` a sentence, ``gold`` the cited gold, ``gold_rank`` its 1-based rank (NaN: not retrieved),
        ``outranking_doc``/``outranking_rank`` the cited hit above it (None for the other buckets),
        ``also`` the other buckets that apply.

    Raises:
        InputError: A frame lacks a column, ``k`` is not positive, a query has no gold or is not in the
            dataset, or a recorded hit is neither in the corpus nor a negative of its query.
    """
    if not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}", path=f"failure_buckets/{dataset or '?'}")
    _require(query_results, QUERY_RESULTS_COLUMNS, "query_results", dataset)
    _require(retrieval_dataset, DATASET_COLUMNS, "retrieval_dataset", dataset)
    _require(corpus, CORPUS_COLUMNS, "corpus", dataset)
    docs = _corpus_docs(corpus)
    cases = _cases(retrieval_dataset, docs, dataset)
    where = f"query_results/{dataset or '?'}"
    rows = []
    for row in query_results[list(QUERY_RESULTS_COLUMNS)].itertuples(index=False):
        if row.query_id not in cases:
            raise InputError("query is not in the retrieval_dataset", path=where, case_id=row.query_id)
        if is_miss(_rank(row.first_relevant_rank), k):
            rows.append(classify(_miss(row, cases[row.query_id], docs, where)))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.astype({"gold_rank": float, "outranking_rank": "Int64"})


def queries_per_retriever(query_results: pd.DataFrame) -> dict[str, int]:
    """Queries evaluated per retriever, in order of first appearance."""
    counts = query_results.groupby("retriever", sort=False)["query_id"].nunique()
    return {str(r): int(n) for r, n in counts.items()}


def bucket_counts(frame: pd.DataFrame, retrievers: Mapping[str, int]) -> pd.DataFrame:
    """Misses per retriever and bucket: columns ``retriever``, ``queries``, ``misses``, then :data:`BUCKETS`.

    Args:
        frame: :func:`failure_buckets`' output.
        retrievers: Retriever -> queries it was evaluated on, in table order (:func:`queries_per_retriever`);
            a retriever without misses gets a row of zeros.

    Raises:
        ValueError: ``frame`` names a retriever not in ``retrievers`` or a bucket not in :data:`BUCKETS`.
    """
    unknown = set(frame["retriever"]) - set(retrievers)
    bad = set(frame["bucket"]) - set(BUCKETS)
    if unknown or bad:
        raise ValueError(f"failure buckets name unknown retrievers {sorted(unknown)} or buckets {sorted(bad)}")
    table = pd.crosstab(
        pd.Categorical(frame["retriever"], categories=list(retrievers)), pd.Categorical(frame["bucket"], categories=BUCKETS)
    )
    table = table.reindex(index=list(retrievers), columns=list(BUCKETS), fill_value=0)
    table.insert(0, "misses", table.sum(axis=1))
    table.insert(0, "queries", [retrievers[r] for r in table.index])
    table.index.name = "retriever"
    table.columns.name = None
    return table.reset_index().astype({c: int for c in ("queries", "misses", *BUCKETS)})


def examples(frame: pd.DataFrame, per_bucket: int = 3) -> pd.DataFrame:
    """Up to ``per_bucket`` rows of each bucket, in bucket precedence order, for a preview."""
    order = {b: i for i, b in enumerate(BUCKETS)}
    picked = frame.groupby("bucket", sort=False).head(per_bucket)
    return picked.sort_values("bucket", key=lambda s: s.map(order), kind="stable")[["retriever", "query_id", "bucket", "evidence"]]


def failure_metadata(frame: pd.DataFrame, counts: pd.DataFrame, k: int) -> Metadata:
    """Headline counts, the per-retriever table (one markdown table) and example rows, as plain metadata values."""
    misses = int(counts["misses"].sum())
    queries = int(counts["queries"].sum())
    meta: Metadata = {"k": k, "misses": misses, "miss_rate": round(misses / queries, 3) if queries else 0.0}
    meta.update({f"misses/{b}": int(counts[b].sum()) for b in BUCKETS})
    meta["bucket_counts"] = Markdown(counts.to_markdown(index=False))
    meta["examples"] = Markdown(md_preview(examples(frame), n=3 * len(BUCKETS), max_chars=300))
    return meta
