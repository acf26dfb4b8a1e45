from __future__ import annotations

from collections.abc import Sequence

from retrieval_pipeline.core.evaluate import frame_to_runs, runs_to_frame, timed_run
from retrieval_pipeline.core.frames import from_frame, to_frame
from retrieval_pipeline.core.types import Case


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
    from retrieval_pipeline.core.evaluate import batched_run

    queries = {f"q{i}": "x" for i in range(5)}
    tr = batched_run(Fixed(), queries, k=2, latency_sample=2)
    assert set(tr.run) == set(queries) and set(tr.latency_ms) == {"q0", "q1"}
    back = frame_to_runs(runs_to_frame([tr]))["fixed"]
    assert back.run == tr.run and back.latency_ms == tr.latency_ms
