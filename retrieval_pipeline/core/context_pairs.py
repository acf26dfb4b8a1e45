"""QA pairs with an expected context: relevant chunks are those similar enough to it."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_pipeline.core.pairs import QAPair
from retrieval_pipeline.core.similarity import SimilaritySettings, relevance, similarity_of
from retrieval_pipeline.core.types import Case, Document


class ContextMatcher:
    """Turns a context-QA case into a pair: every chunk whose similarity reaches the threshold is gold.

    The similarity settings are recorded in each pair's evidence with the matched chunks and ratios.
    A case whose expected context matches no chunk stays in the table, unresolved, with a warning that
    names the file, the row and the best ratio seen (computed exactly, over every chunk).
    """

    def __init__(self, chunks: Sequence[Document], settings: SimilaritySettings) -> None:
        self.chunks = list(chunks)
        self.settings = settings

    def pair(self, case: Case) -> QAPair:
        expected = str(case.extra.get("expected_context", ""))
        row = relevance(expected, self.chunks, self.settings)
        matches = sorted(((d, r) for d, r in row.items() if r >= self.settings.threshold), key=lambda x: (-x[1], x[0]))
        evidence = {"similarity": self.settings.as_dict(), "matches": [{"chunk": d, "ratio": round(r, 4)} for d, r in matches]}
        warnings: list[str] = []
        if not matches:
            best_id, best = max(
                ((c.doc_id, similarity_of(expected, c, self.settings)) for c in self.chunks),
                key=lambda x: (x[1], x[0]),
                default=(None, 0.0),
            )
            evidence["best"] = {"chunk": best_id, "ratio": round(best, 4)}
            warnings.append(
                f"{case.source_file} row {case.index + 1} ({case.case_id}): the expected context matches no chunk "
                f"at threshold {self.settings.threshold:g} (best ratio {best:.3f} in {best_id})"
            )
        return QAPair(
            case.case_id,
            case.suite,
            case.benchmark_type,
            case.source_file,
            case.query,
            [d for d, _ in matches],
            "resolved" if matches else "unresolved",
            f"similarity>={self.settings.threshold:g}",
            evidence,
            warnings,
        )
