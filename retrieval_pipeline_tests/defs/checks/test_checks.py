"""The check results of ``retrieval_metrics``: one per spec, whatever gates the dataset computed."""

from __future__ import annotations

from retrieval_pipeline.core.evaluation.checks.thresholds import CheckResult
from retrieval_pipeline.defs.checks import CHECK_SPECS, check_results


class _Log:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, message: str) -> None:
        self.warnings.append(message)


def test_one_result_per_spec_notes_for_floors_the_dataset_does_not_set_and_unknown_gates_logged():
    names = sorted(s.name for s in CHECK_SPECS)
    gates = [
        CheckResult(names[0], False, "ERROR", "below the threshold", {"bm25": 0.2}, 0.5),
        CheckResult("min_not_a_spec", False, "ERROR", "from another registry"),
    ]
    log = _Log()
    results = check_results(gates, "stdlib", log)
    assert [r.check_name for r in results] == names  # the gate first, then the notes in name order
    assert (results[0].passed, results[0].metadata["dataset"].value, results[0].metadata["threshold"].value) == (False, "stdlib", "0.5")
    assert all(r.passed and r.description == "[dataset stdlib] no such threshold configured for this dataset" for r in results[1:])
    assert log.warnings == ["no check named min_not_a_spec is defined; result not recorded as a check: from another registry"]


def test_check_metadata_holds_no_number_to_plot_and_rounds_the_values():
    values = {"bm25": 0.123456789, "dense": 0.9, "odd": float("nan")}
    gate = CheckResult("min_hit_rate_at_5", False, "ERROR", "below", values, 0.5, {"alpha": 0.05, "n_alerts": 2, "rule": "significance"})
    result = check_results([gate], "stdlib", _Log())[0]
    assert not [k for k, v in result.metadata.items() if isinstance(v.value, (int, float))]
    assert (result.metadata["alpha"].value, result.metadata["n_alerts"].value, result.metadata["rule"].value) == (
        "0.05",
        "2",
        "significance",
    )
    table = result.metadata["values"].value
    assert (
        "| bm25 | 0.1235 | below the threshold |" in table
        and "| dense | 0.9000 |  |" in table
        and "| odd | n/a | below the threshold |" in table
    )
