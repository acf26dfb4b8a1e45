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

Scoring: scikit-learn's ``TfidfVectorizer`` over a text's lowercased words and the character n-grams of
each word (its ``char_wb`` analyser: padded with spaces, so word starts and ends count); weights are
sublinear tf ``1 + log(tf)`` times smoothed idf ``log((1 + N) / (1 + df)) + 1``, rows L2-normalised,
and the score is the cosine. Ties are broken by corpus position, so results are deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

#: Lowercased ``\w+`` words, as scikit-learn's word analyser finds them.
_WORDS = TfidfVectorizer(token_pattern=r"\w+").build_analyzer()


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
        self._chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(char_ngrams, char_ngrams)).build_analyzer() if char_ngrams else None
        self.doc_ids: list[str] = []
        self.vectorizer = self._vectorizer()
        self.matrix = sp.csr_array((0, 0))

    def _vectorizer(self, vocabulary: dict[str, int] | None = None) -> TfidfVectorizer:
        return TfidfVectorizer(analyzer=self.features, vocabulary=vocabulary, sublinear_tf=True, dtype=np.float64)

    def features(self, text: str) -> list[str]:
        """A text's words (``w:``) and the character n-grams of each word (``c:``), one entry per occurrence."""
        words = _WORDS(text)
        grams = self._chars(" ".join(words)) if self._chars else []
        return [f"w:{w}" for w in words] + [f"c:{g}" for g in grams]

    def build(self, doc_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index the corpus."""
        if len(doc_ids) != len(texts):
            raise ValueError(f"{len(doc_ids)} doc ids but {len(texts)} texts")
        self.doc_ids = list(doc_ids)
        self.vectorizer = self._vectorizer()
        self.matrix = sp.csr_array(self.vectorizer.fit_transform(texts))

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` documents per query by cosine, ties by corpus position; zero scores are left out."""
        if not queries:
            return []
        scores = (sp.csr_array(self.vectorizer.transform(queries)) @ self.matrix.T).toarray()
        return [self._top(row, k) for row in scores]

    def _top(self, row: np.ndarray, k: int) -> list[tuple[str, float]]:
        order = np.lexsort((np.arange(len(row)), -row))[: max(k, 0)]
        return [(self.doc_ids[i], float(row[i])) for i in order if row[i] > 0]

    def save(self, directory: Path) -> None:
        """Write the index (three files) into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        sp.save_npz(directory / "matrix.npz", sp.csr_matrix(self.matrix))
        np.save(directory / "idf.npy", self.vectorizer.idf_)
        vocabulary = {feature: int(column) for feature, column in self.vectorizer.vocabulary_.items()}
        state = {"doc_ids": self.doc_ids, "vocabulary": vocabulary, "char_ngrams": self.char_ngrams}
        (directory / "state.json").write_text(json.dumps(state), encoding="utf-8")

    def load(self, directory: Path) -> None:
        """Read what :meth:`save` wrote."""
        directory = Path(directory)
        state = json.loads((directory / "state.json").read_text(encoding="utf-8"))
        if state["char_ngrams"] != self.char_ngrams:
            raise ValueError(f"{directory}: saved with char_ngrams={state['char_ngrams']}, asked for {self.char_ngrams}")
        self.doc_ids = state["doc_ids"]
        self.vectorizer = self._vectorizer(state["vocabulary"])
        self.vectorizer.idf_ = np.load(directory / "idf.npy")
        self.matrix = sp.csr_array(sp.load_npz(directory / "matrix.npz"))
