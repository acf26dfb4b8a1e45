from __future__ import annotations

from collections.abc import Sequence

from retrieval_pipeline.core.common.frames import from_frame, to_frame
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.retrieval.run_loop import frame_to_runs, runs_to_frame, timed_run


class Fixed:
    name = "fixed"

    def __init__(self):
        self.calls = 0

    def search(self, queries: Sequence[str], k: int):
        self.calls += 1
        return [[("a", 2.0), ("b", 1.0)][:k] if q != "none" else [] for q in queries]


def test_timed_run_times_each_query_after_a_warm_up():
    r = Fixed()
    tr = timed_run(r, {"q1": "x", "q2": "none"}, k=2)
    assert r.calls == 3  # one warm-up + one per query
    assert tr.run == {"q1": [("a", 2.0), ("b", 1.0)], "q2": []}
    assert set(tr.latency_ms) == {"q1", "q2"} and all(v >= 0 for v in tr.latency_ms.values())


def test_run_frame_round_trip_keeps_empty_results():
    tr = timed_run(Fixed(), {"q1": "x", "q2": "none"}, k=2)
    back = frame_to_runs(runs_to_frame([tr]))["fixed"]
    assert back.run == tr.run and back.latency_ms == tr.latency_ms


def test_case_frame_round_trip():
    case = Case("c1", "s", "api_understanding", "f.yaml", 0, "q?", gold_fqns=["a.b"], extra={"category": "x"})
    frame = to_frame([case], Case, ("gold_fqns", "files", "options", "extra"))
    assert from_frame(frame, Case, ("gold_fqns", "files", "options", "extra")) == [case]


def test_batched_run_ranks_all_and_times_only_the_sample():
    from retrieval_pipeline.core.retrieval.run_loop import batched_run

    queries = {f"q{i}": "x" for i in range(5)}
    tr = batched_run(Fixed(), queries, k=2, latency_sample=2)
    assert set(tr.run) == set(queries) and set(tr.latency_ms) == {"q0", "q1"}
    back = frame_to_runs(runs_to_frame([tr]))["fixed"]
    assert back.run == tr.run and back.latency_ms == tr.latency_ms


def _frame_to_runs_by_pandas_groups(frame):
    """The former frame_to_runs (a pandas group per query): the reference of the one-pass version."""
    import pandas as pd

    from retrieval_pipeline.core.retrieval.run_loop import TimedRun

    out = {}
    for retriever, group in frame.sort_values(["retriever", "query_id", "rank"]).groupby("retriever", sort=False):
        run, latency, errors = {}, {}, {}
        for qid, g in group.groupby("query_id", sort=False):
            if pd.notna(g["latency_ms"].iloc[0]):
                latency[qid] = float(g["latency_ms"].iloc[0])
            if "error" in g and isinstance(g["error"].iloc[0], str):
                errors[qid] = g["error"].iloc[0]
            run[qid] = [(d, float(s)) for d, s, r in zip(g["doc_id"], g["score"], g["rank"]) if r > 0]
        out[str(retriever)] = TimedRun(str(retriever), run, latency, errors)
    return out


def test_frame_to_runs_equals_the_pandas_groups_reference_on_shuffled_rows_errors_and_empty_answers():
    import numpy as np

    from retrieval_pipeline.core.retrieval.run_loop import TimedRun

    rng = np.random.default_rng(4)
    runs = []
    for name in ("dense", "bm25", "hybrid"):
        run, latency, errors = {}, {}, {}
        for q in range(40):
            qid = f"q{q:02d}"
            n = int(rng.integers(0, 6))  # some queries found nothing
            run[qid] = [(f"d{int(d)}", float(s)) for d, s in zip(rng.choice(50, n, replace=False), np.sort(rng.random(n))[::-1])]
            if q % 3 == 0:
                latency[qid] = float(rng.random() * 10)
            if n == 0 and q % 2:
                errors[qid] = f"timeout on {qid}"
        runs.append(TimedRun(name, run, latency, errors))
    frame = runs_to_frame(runs).sample(frac=1.0, random_state=1)  # stored row order is not relied on
    ours, reference = frame_to_runs(frame), _frame_to_runs_by_pandas_groups(frame)
    assert list(ours) == list(reference) == ["bm25", "dense", "hybrid"]
    for name, timed in reference.items():
        assert ours[name] == timed
        assert list(ours[name].run) == list(timed.run)  # the same query order too
    assert {name: t.run for name, t in ours.items()} == {t.retriever: t.run for t in runs}
