"""No evaluation query reaches a fine-tuned model's training pairs, on the real datasets (``../shared/data``).

The miner (:func:`~retrieval_pipeline.core.retrieval.training.mined_pairs.mine_pairs`) takes documents only, so a
query can reach training only by also being corpus text. The cross-encoder of ``rerank_rrf_minilm_ce``
trains on the same anchors (its examples add BM25 negatives, corpus documents; see
``cross_finetune.labelled_examples``), so what holds here holds for it. This checks, for the real ADK index (every ADK
suite's cases: API questions, fix-error descriptions, multiple-choice questions), Natural Questions and the
insurance set, every mined anchor (hard negatives on, the widest mining) against every case's query text:

* no anchor equals a query after normalisation (lower case, whitespace collapsed, punctuation dropped);
* no anchor contains a whole normalised query;
* no anchor shares 80% of the union of its words with a query (Jaccard of word sets >= 0.8).

What the corpus does hold are docstrings that a question paraphrases: the closest ADK pair is the question
"What is the base class for all tools?" and the docstring "The base class for all tools." (Jaccard 0.75:
the question wraps the object's own one-line description). That is the corpus, which every retriever
indexes (the sentence is in its gold document's text), not a copy of the question, so it stays; the test
pins the closest overlap so that a change in mining that brings anchors nearer to the questions fails here.

Natural Questions is the one set whose corpus holds a question verbatim: the question "product-market fit
means being in a good market with a product that can satisfy that market" is the first sentence of its
own passage, so the ``lead`` rule mines it. :func:`test_nq_holds_one_question_verbatim_and_exclude_drops_it`
pins that sentence and shows that ``exclude=`` drops it, and the NQ checks run with ``exclude=`` its questions. The
pipeline itself never passes ``exclude``: a fine-tune is built from the retriever's build context, which holds the
corpus and no queries, so what it mines is corpus text (that NQ sentence included, as every retriever indexes it),
never a query; ``exclude=`` is for a caller who holds the questions and wants them out. The ADK and insurance checks
run with no exclusion, as the pipeline mines. The registry's
``dense_minilm_ft`` is meant for the ADK dataset (opt-in there). Mining only, no model: about a minute for the
three sets on 2 busy cores (loading the corpora).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from retrieval_pipeline.core.datasets import adapter_for
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.core.retrieval.training.mined_pairs import MiningSettings, mine_pairs

pytestmark = pytest.mark.integration

#: Mining with every rule (hard negatives add no anchor, only negatives drawn from the corpus).
WIDEST = MiningSettings(rules=("docstring", "member", "heading", "lead"))
JACCARD_LIMIT = 0.8
_WORD = re.compile(r"\w+")


def normalised(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def closest(queries: list[str], anchors: list[str]) -> tuple[float, str, str]:
    """The largest Jaccard overlap of word sets between a query and an anchor, with the two texts.

    Every pair at once: the shared words are the product of the two binary word matrices (NQ's 1,656
    questions against its anchors took about 20 s as a loop over the pairs). Ties go to the first query,
    then the first anchor.
    """
    query_sets = [frozenset(_WORD.findall(q.lower())) for q in queries]
    anchor_sets = [frozenset(_WORD.findall(a.lower())) for a in anchors]
    vocabulary = {w: i for i, w in enumerate(sorted(set().union(*query_sets, *anchor_sets)))}

    def matrix(sets: list[frozenset[str]]) -> sp.csr_matrix:
        rows = [i for i, words in enumerate(sets) for _ in words]
        columns = [vocabulary[w] for words in sets for w in words]
        return sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, columns)), shape=(len(sets), len(vocabulary)))

    shared = (matrix(query_sets) @ matrix(anchor_sets).T).toarray()
    sizes_q = np.array([len(q) for q in query_sets])[:, None]
    sizes_a = np.array([len(a) for a in anchor_sets])[None, :]
    union = sizes_q + sizes_a - shared
    jaccard = np.divide(shared, union, out=np.zeros(shared.shape), where=shared > 0)
    if not jaccard.size or jaccard.max() <= 0:
        return 0.0, "", ""
    q, a = np.unravel_index(int(np.argmax(jaccard)), jaccard.shape)
    return float(jaccard[q, a]), queries[q], anchors[a]


def corpus_and_queries(dataset: str) -> tuple[list, list[str]]:
    config = load_registry().datasets[dataset]
    adapter = adapter_for(config)
    return list(adapter.build_corpus(config).documents), [c.query for c in adapter.load_cases(config).cases if c.query.strip()]


@pytest.mark.parametrize(
    "dataset, decontaminate, max_overlap", [("adk_v1_24_1", False, 0.75), ("nq", True, 0.64), ("insurance", False, 0.4)]
)
def test_no_evaluation_query_or_near_copy_is_a_training_pair(
    shared_data: Path, dataset: str, decontaminate: bool, max_overlap: float
) -> None:
    documents, queries = corpus_and_queries(dataset)
    anchors = [p.anchor for p in mine_pairs(documents, WIDEST, exclude=queries if decontaminate else ())]
    assert len(anchors) > 50 and len(queries) > 20

    normal_anchors = [normalised(a) for a in anchors]
    anchor_set = set(normal_anchors)
    copies = [q for q in queries if normalised(q) in anchor_set]
    assert not copies, f"{dataset}: queries mined as training anchors: {copies[:3]}"
    every_anchor = "\n".join(normal_anchors)  # a normalised query holds no newline: in it = inside one anchor
    contained = [q for q in queries if len(normalised(q).split()) >= 4 and normalised(q) in every_anchor]
    assert not contained, f"{dataset}: queries inside a training anchor: {contained[:3]}"
    overlap, query, anchor = closest(queries, anchors)
    assert overlap < JACCARD_LIMIT, f"{dataset}: {query!r} and the anchor {anchor!r} share {overlap:.2f} of their words"
    assert overlap <= max_overlap + 1e-9, f"{dataset}: closest pair moved to {overlap:.3f}: {query!r} / {anchor!r}"


def test_nq_holds_one_question_verbatim_and_exclude_drops_it(shared_data: Path) -> None:
    documents, queries = corpus_and_queries("nq")
    corpus = " ".join(normalised(d.text) for d in documents)
    anchors = [normalised(p.anchor) for p in mine_pairs(documents, WIDEST)]
    every_anchor = "\n".join(anchors)
    mined = sorted({q for q in queries if len(normalised(q).split()) >= 4 and normalised(q) in every_anchor})
    assert mined == ["product-market fit means being in a good market with a product that can satisfy that market"]
    assert all(normalised(q) in corpus for q in mined)  # the corpus's own text, not something the miner read
    kept = [normalised(p.anchor) for p in mine_pairs(documents, WIDEST, exclude=mined)]
    assert not any(normalised(q) in a for q in mined for a in kept) and len(kept) == len(anchors) - 1
