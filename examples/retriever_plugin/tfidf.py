"""A worked retriever plug-in: TF-IDF cosine over words and character n-grams.

Register it in ``data/config/retrievers.yaml``::

    tfidf_plugin:
      kind: python
      factory: examples.retriever_plugin.tfidf:TfidfRetriever
      params: {char_ngrams: 3}

and check it against the retriever contract (the same checks the pipeline applies to every answer)::

    python -m retrieval_pipeline.contract examples.retriever_plugin.tfidf:TfidfRetriever --param char_ngrams=3

The contract: ``build(doc_ids, texts)`` indexes the corpus; ``search(queries, k)`` returns, per query,
at most ``k`` ``(doc_id, score)`` pairs, score descending, each doc id once, all from the corpus.
``save(directory)`` / ``load(directory)`` are optional: with them the index built by the index asset
is reused by the runs asset instead of being built again.

Scoring: a text's features are its lowercased words and the character n-grams of each word (padded
with spaces, so word starts and ends count); weights are sublinear tf ``1 + log(tf)`` times smoothed
idf ``log((1 + N) / (1 + df)) + 1``, rows L2-normalised, and the score is the cosine. Ties are broken
by corpus position, so results are deterministic.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

_WORD = re.compile(r"\w+")


class TfidfRetriever:
    """TF-IDF cosine search (see the module docstring).

    Args:
        char_ngrams: Length of the character n-grams added per word (0: words only).
    """

    name = "tfidf_plugin"

    def __init__(self, char_ngrams: int = 3) -> None:
        if char_ngrams < 0:
            raise ValueError(f"char_ngrams must be >= 0, got {char_ngrams}")
        self.char_ngrams = char_ngrams
        self.doc_ids: list[str] = []
        self.vocabulary: dict[str, int] = {}
        self.idf = np.zeros(0)
        self.matrix = sp.csr_array((0, 0))

    def features(self, text: str) -> Counter[str]:
        """Word and character n-gram counts of a text."""
        words = _WORD.findall(text.lower())
        counts: Counter[str] = Counter(f"w:{w}" for w in words)
        n = self.char_ngrams
        if n:
            for word in words:
                padded = f" {word} "
                counts.update(f"c:{padded[i : i + n]}" for i in range(max(1, len(padded) - n + 1)))
        return counts

    def build(self, doc_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index the corpus."""
        if len(doc_ids) != len(texts):
            raise ValueError(f"{len(doc_ids)} doc ids but {len(texts)} texts")
        self.doc_ids = list(doc_ids)
        counted = [self.features(t) for t in texts]
        df: Counter[str] = Counter(f for c in counted for f in c)
        self.vocabulary = {f: i for i, f in enumerate(sorted(df))}
        n = len(texts)
        self.idf = np.array([np.log((1 + n) / (1 + df[f])) + 1.0 for f in sorted(df)])
        self.matrix = self._vectors(counted)

    def _vectors(self, counted: Sequence[Counter[str]]) -> sp.csr_array:
        rows, cols, vals = [], [], []
        for row, counts in enumerate(counted):
            for feature, tf in counts.items():
                col = self.vocabulary.get(feature)
                if col is not None:
                    rows.append(row)
                    cols.append(col)
                    vals.append((1.0 + np.log(tf)) * self.idf[col])
        matrix = sp.csr_array((vals, (rows, cols)), shape=(len(counted), len(self.vocabulary)))
        norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0
        return sp.csr_array(sp.diags(1.0 / norms) @ matrix)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` documents per query by cosine, ties by corpus position; zero scores are left out."""
        if not queries:
            return []
        scores = (self._vectors([self.features(q) for q in queries]) @ self.matrix.T).toarray()
        return [self._top(row, k) for row in scores]

    def _top(self, row: np.ndarray, k: int) -> list[tuple[str, float]]:
        order = np.lexsort((np.arange(len(row)), -row))[: max(k, 0)]
        return [(self.doc_ids[i], float(row[i])) for i in order if row[i] > 0]

    def save(self, directory: Path) -> None:
        """Write the index (three files) into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        sp.save_npz(directory / "matrix.npz", sp.csr_matrix(self.matrix))
        np.save(directory / "idf.npy", self.idf)
        state = {"doc_ids": self.doc_ids, "vocabulary": self.vocabulary, "char_ngrams": self.char_ngrams}
        (directory / "state.json").write_text(json.dumps(state), encoding="utf-8")

    def load(self, directory: Path) -> None:
        """Read what :meth:`save` wrote."""
        directory = Path(directory)
        state = json.loads((directory / "state.json").read_text(encoding="utf-8"))
        if state["char_ngrams"] != self.char_ngrams:
            raise ValueError(f"{directory}: saved with char_ngrams={state['char_ngrams']}, asked for {self.char_ngrams}")
        self.doc_ids, self.vocabulary = state["doc_ids"], state["vocabulary"]
        self.idf = np.load(directory / "idf.npy")
        self.matrix = sp.csr_array(sp.load_npz(directory / "matrix.npz"))
