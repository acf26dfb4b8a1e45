"""The runner behind ``make run``, in-process on the tiny dataset (keyword encoder, temporary folders and DAGSTER_HOME)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from retrieval_pipeline.cli.console import DatasetRun, FailedCheck, format_summary, metrics_table
from retrieval_pipeline.cli.materialise import UsageError, add_retriever_selection, unused_note, used_by_dataset
from retrieval_pipeline.cli.run import main
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.assets.retrieval import REGISTRY, retriever_step
from retrieval_pipeline.defs.sensors import failed_checks_of_run
from retrieval_pipeline_tests.defs.conftest import VOCAB, write_dataset
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

DATASET = "stdlib"  # the tiny dataset is registered under the project's partition key
RETRIEVERS = ["bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"]
ERROR_FLOOR = "thresholds: {hit_rate@5: {min: 1.01, severity: ERROR}}"


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A persistent instance in a temporary folder, as ``make run`` has in ``.dagster_home``."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def tiny_resources(tmp_path: Path, thresholds: str = "") -> dict[str, object]:
    return resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), write_dataset(tmp_path / "in", thresholds))


def run(
    resources: dict[str, object],
    log: Path,
    capfd: pytest.CaptureFixture[str],
    instance: dg.DagsterInstance | None = None,
    args: tuple[str, ...] = (),
) -> tuple[int, str, str]:
    """The runner on the tiny dataset; returns the exit code, stdout and stderr (file-descriptor level)."""
    code = main(["--datasets", DATASET, "--log", str(log), *args], resources=resources, instance=instance)
    captured = capfd.readouterr()
    return code, captured.out, captured.err


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The comparison table: ``{retriever: [hit@1, hit@5, MRR, nDCG@10 cells]}``, after checking its header.

    The "(baseline)" label, hit@5's CI column and the significance marks (▲/▼) are checked and left out
    of the cells; the best-per-column ``*`` stays.
    """
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["retriever"])
    assert lines[header].split() == ["retriever", "hit@1", "hit@5", "hit@5", "95%", "CI", "MRR", "nDCG@10"]
    rows = {}
    for line in lines[header + 2 :]:  # after the dashes
        cells = re.sub(r"\[\d\.\d+, \d\.\d+\]", "", line.replace(" (baseline)", "")).replace("▲", "").replace("▼", "").split()
        if not cells or cells[0] not in RETRIEVERS:
            break
        rows[cells[0]] = cells[1:]
    return rows


def test_failing_error_floor_prints_table_and_failed_check_and_exits_1(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    resources = tiny_resources(tmp_path, ERROR_FLOOR)
    log = tmp_path / "logs" / "run.log"
    instance = dg.DagsterInstance.ephemeral()  # an in-memory instance: this machine's sqlite writes are slow
    code, stdout, stderr = run(resources, log, capfd, instance)

    assert code == 1
    # progress: one line per finished step, the failing one says why
    header = re.search(r"== stdlib \(1/1\): (\d+) steps", stdout)
    assert header, stdout
    step_lines = [line for line in stdout.splitlines() if line.strip().startswith("[")]
    assert any("corpus, corpus_rejects" in line and line.rstrip().endswith(" s") for line in step_lines)
    assert all(f"/{header[1]}]" in line for line in step_lines)  # "[ i/N]": N is the plan's step count
    failing = [line for line in step_lines if "FAILED" in line]
    assert len(failing) == 1 and "retrieval_metrics" in failing[0] and "FAILED: a blocking ERROR check failed" in failing[0]
    # every step ran: nothing depends on retrieval_metrics, so a failed floor still leaves the report written
    assert len(step_lines) == int(header[1])
    assert (tmp_path / "out" / "exports" / DATASET / "report.html").is_file()
    # issue 39.7: the reject counts reach the console, under the dataset's line and in the summary
    rejects = pd.read_parquet(tmp_path / "out" / "case_rejects" / f"{DATASET}.parquet")
    corpus_rejects = pd.read_parquet(tmp_path / "out" / "corpus_rejects" / f"{DATASET}.parquet")
    counts = f"rejected: {len(rejects)} row(s) in case_rejects, {len(corpus_rejects)} row(s) in corpus_rejects"
    assert stdout.count(counts) == 2, stdout

    # the table: the run's retrieval_metrics values, 3 decimals, the best hit@5 marked
    rows = table_rows(stdout)
    assert list(rows) == RETRIEVERS
    metrics = pd.read_parquet(tmp_path / "out" / "retrieval_metrics" / f"{DATASET}.parquet").set_index("retriever")
    for name, cells in rows.items():
        assert [c.rstrip("*") for c in cells] == [f"{metrics.loc[name, m]:.3f}" for m in ("hit_rate@1", "hit_rate@5", "mrr", "ndcg@10")]
    best = metrics["hit_rate@5"].max()
    assert {n for n, cells in rows.items() if cells[1].endswith("*")} == set(metrics.index[metrics["hit_rate@5"] == best])
    # under it the verdict line of each column's metric: the tiny dataset has too few queries for a test, and says so
    verdicts = [line.strip() for line in stdout.splitlines() if line.startswith("    ") and ": no test (not enough queries" in line]
    assert [v.split(":")[0] for v in verdicts] == ["hit@1", "hit@5", "MRR", "nDCG@10"]

    # the failed ERROR floor with its numbers, where the outputs are, the log file, the verdict
    check_line = next(line for line in stdout.splitlines() if "min_hit_rate_at_5" in line and "below" in line)
    assert check_line.split()[0] == "ERROR" and "hit_rate@5 below 1.01 for bm25 (" in check_line
    assert "threshold 1.01" in stdout
    exports = tmp_path / "out" / "exports" / DATASET
    assert f"exports: {exports}/: evaluation_results.json" in stdout and (exports / "evaluation_results.json").is_file()
    assert "(baseline)" in next(line for line in stdout.splitlines() if line.strip().startswith(RETRIEVERS[0]))
    assert f"quality report: {exports / 'quality_report.md'}" in stdout
    assert f"Log (the full Dagster event stream): {log}" in stdout
    assert stdout.rstrip().splitlines()[-1].startswith("FAILED: 1 of 1 run(s): stdlib (ERROR check min_hit_rate_at_5)")

    # the terminal stays free of Dagster's event lines; the log file has all of them
    assert "DEBUG" not in stdout + stderr and "STEP_START" not in stdout + stderr
    text = log.read_text(encoding="utf-8")
    assert " - DEBUG - " in text and text.count("STEP_START") == len(step_lines)  # one progress line per step started
    assert "ASSET_CHECK_EVALUATION" in text and "STEP_FAILURE" in text and "DagsterAssetCheckFailedError" in text

    # recorded as `dagster asset materialize` records it (job, partition tag, check results): what the alert sensor reads
    (record,) = instance.get_runs()
    assert record.job_name == "__ASSET_JOB" and record.tags["dagster/partition"] == DATASET
    unused = set(REGISTRY.retrievers.names) - {"bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"}
    every_used_asset = {
        k for k in defs().resolve_asset_graph().materializable_asset_keys if (step := retriever_step(k)) is None or step[0] not in unused
    }
    assert record.status == dg.DagsterRunStatus.FAILURE and set(record.asset_selection or ()) == every_used_asset
    failed = failed_checks_of_run(instance, record.run_id, DATASET, dg.AssetKey("retrieval_metrics"))
    assert [f["check"] for f in failed] == ["min_hit_rate_at_5"] and failed[0]["severity"] == "ERROR"


def test_passing_run_exits_0_and_is_kept_in_dagster_home(tmp_path: Path, dagster_home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    resources = tiny_resources(tmp_path)  # the registry's floors: hit_rate@5 >= 0 (ERROR), mrr >= 0 (WARN)
    sample = '{"ops": {"retrieval_runs": {"config": {"sample_size": 2}}}}'  # run config passed through, as with the CLI
    code, stdout, stderr = run(resources, tmp_path / "run.log", capfd, args=("--config-json", sample))
    assert code == 0, stdout + stderr
    assert "failed checks: none" in stdout and stdout.rstrip().endswith("OK: 1 dataset(s) materialised")
    assert "(* best per column; 2 queries;" in stdout
    assert list(table_rows(stdout)) == RETRIEVERS
    assert "DEBUG" not in stdout + stderr and "note: DAGSTER_HOME" not in stdout
    unused = sorted(set(REGISTRY.retrievers.names) - {"bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"})
    assert len(unused) > 5 and f"({DATASET} does not use {len(unused)} of the registry's retrievers" in stdout  # counted
    assert unused_note("toy", ["a", "b"]) == "toy does not use a, b: their steps are left out"  # named when few

    with dg.DagsterInstance.get() as instance:  # a new instance object: the run outlived the command, for drift and the sensor
        (record,) = instance.get_runs()
        assert record.status == dg.DagsterRunStatus.SUCCESS and record.tags["dagster/partition"] == DATASET
        metrics = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("retrieval_metrics"), asset_partitions=[DATASET]), limit=1
        ).records
    assert metrics and metrics[0].run_id == record.run_id  # the drift check's previous value on the next run


def test_unknown_dataset_and_bad_selection_exit_2(tmp_path: Path, dagster_home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["--datasets", "no_such_dataset", "--log", str(tmp_path / "a.log")]) == 2
    err = capfd.readouterr().err
    assert err.startswith("error: unknown dataset(s) no_such_dataset; the registry has: ") and "stdlib" in err
    assert main(["--datasets", DATASET, "--select", "no_such_asset", "--log", str(tmp_path / "b.log")]) == 2
    assert capfd.readouterr().err.startswith("error: invalid --select 'no_such_asset'")
    assert main(["--datasets", DATASET, "--select", "corpus", "--log", str(tmp_path / "c.log")]) == 2  # without corpus_rejects
    assert "does not support subsetting" in capfd.readouterr().err
    with dg.DagsterInstance.get() as instance:
        assert not instance.get_runs()  # nothing was started


def test_metrics_table_marks_the_best_value_per_column() -> None:
    frame = pd.DataFrame(
        {
            "retriever": ["a", "b", "c"],
            "hit_rate@1": [0.1, 0.3, 0.3],
            "hit_rate@5": [0.5, 0.5, 0.5],
            "mrr": [0.2, math.nan, 0.1],
            "ndcg@10": [0.25, 0.2, 0.1],
        }
    )
    lines = metrics_table(frame).splitlines()
    assert lines[0].split() == ["retriever", "hit@1", "hit@5", "MRR", "nDCG@10"]
    assert [line.split() for line in lines[2:]] == [
        ["a", "0.100", "0.500", "0.200*", "0.250*"],
        ["b", "0.300*", "0.500", "-", "0.200"],  # ties are all marked; a column where all are equal has no mark
        ["c", "0.300*", "0.500", "0.100", "0.100"],
    ]


def test_metrics_table_shows_hit5_ci_and_marks_significant_differences_from_the_baseline() -> None:
    frame = pd.DataFrame(
        {"retriever": ["a", "b"], "hit_rate@1": [0.1, 0.3], "hit_rate@5": [0.4, 0.7], "mrr": [0.2, 0.25], "ndcg@10": [0.3, 0.2]}
    )

    def row(retriever, metric, low, high, significant=None, direction=None):
        return {"retriever": retriever, "metric": metric, "ci_low": low, "ci_high": high, "baseline_retriever": "a"} | {
            "significant": significant,
            "direction": direction,
        }

    significance = pd.DataFrame(
        [
            row("a", "hit_rate@5", 0.3, 0.5),
            row("b", "hit_rate@5", 0.6, 0.8, True, "better"),
            row("b", "mrr", 0.2, 0.3, False, "better"),  # better but not significantly: no mark
            row("b", "ndcg@10", 0.1, 0.3, True, "worse"),
        ]
    )
    lines = metrics_table(frame, significance).splitlines()
    assert lines[0].split() == ["retriever", "hit@1", "hit@5", "hit@5", "95%", "CI", "MRR", "nDCG@10"]
    assert [line.split() for line in lines[2:]] == [
        ["a", "(baseline)", "0.100", "0.400", "[0.300,", "0.500]", "0.200", "0.300*"],
        ["b", "0.300*", "0.700*▲", "[0.600,", "0.800]", "0.250*", "0.200", "▼"],
    ]


def test_summary_prints_a_verdict_line_per_table_metric_under_the_table_and_nothing_without_pairs(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"retriever": ["a", "b"], "hit_rate@1": [0.1, 0.3], "hit_rate@5": [0.4, 0.7], "mrr": [0.2, 0.25], "ndcg@10": [0.3, 0.2]}
    )
    columns = ["metric", "a", "b", "n_queries", "mean_a", "mean_b", "delta", "ci_low", "ci_high", "p", "p_holm", "significant", "note"]
    pairs = pd.DataFrame(
        [
            ["hit_rate@5", "b", "a", 40, 0.7, 0.4, 0.3, 0.12, 0.45, 0.0002, 0.0002, True, ""],
            ["mrr", "b", "a", 40, 0.25, 0.2, 0.05, -0.02, 0.1, 0.41, 0.41, False, ""],
            ["not_found_rate", "b", "a", 40, 0.1, 0.2, -0.1, -0.2, 0.0, 0.2, 0.2, False, ""],  # not a table column
        ],
        columns=columns,
    )
    without = DatasetRun("toy", "abcdef12", True, 1.0, [], [], frame, tmp_path)
    plain = format_summary([without], tmp_path / "run.log").splitlines()
    lines = format_summary(
        [DatasetRun("toy", "abcdef12", True, 1.0, [], [], frame, tmp_path, pairs=pairs)], tmp_path / "run.log"
    ).splitlines()
    legend = next(i for i, line in enumerate(lines) if line.startswith("  (* best per column"))
    assert lines[legend + 1 : legend + 4] == [
        "  every retriever against every other (delta [95% CI, unadjusted], randomisation test, Holm-corrected over the 1"
        " pair of a metric, the family of the table's ▲/▼; a verdict follows the Holm p, not the interval):",
        "    b beats a on hit@5 by +0.300 [+0.120, +0.450], p < 0.001",
        "    b and a are indistinguishable on MRR (p = 0.41)",
    ]
    assert lines[: legend + 1] + lines[legend + 4 :] == plain  # the rest of the summary is unchanged


def test_summary_names_only_the_error_checks_that_failed_the_run(tmp_path: Path) -> None:
    failed = [
        FailedCheck("retrieval_metrics", "min_hit_rate_at_5", "ERROR", "hit_rate@5 below 0.8", {}, blocking=True),
        FailedCheck("retrieval_metrics", "min_mrr", "WARN", "mrr below 0.82", {}, blocking=True),  # blocking spec, WARN result
    ]
    run = DatasetRun("insurance", "abcdef12", False, 1.0, [], failed, None, tmp_path)
    last = format_summary([run], tmp_path / "run.log").rstrip().splitlines()[-1]
    assert last == "FAILED: 1 of 1 run(s): insurance (ERROR check min_hit_rate_at_5). Exit code 1"


def test_the_demos_expected_failed_checks_say_why_under_each_and_the_last_line_does_not_read_ok(tmp_path: Path) -> None:
    """The demo ends with WARN floors and a non-blocking ERROR check: each says why under it; the last line says exit 0
    and that checks failed without blocking, instead of a bare "OK:" above failures."""
    failed = [
        FailedCheck("retrieval_metrics", "min_hit_rate_at_5", "WARN", "hit_rate@5 below 0.8 for bm25 (0.436)", {}),
        FailedCheck("retrieval_metrics", "drift_hit_rate_at_5", "WARN", "dropped", {}),
        FailedCheck("quality_report", "no_incorrect_questions", "ERROR", "1 disproven", {}),
    ]
    text = format_summary([DatasetRun("stdlib", "abcdef12", True, 1.0, [], failed, None, tmp_path)], tmp_path / "run.log")
    why = [line.strip() for line in text.splitlines() if line.strip().startswith("why: ")]
    assert len(why) == 3
    assert "WARN threshold (severity WARN for stdlib in data/config/datasets.yaml)" in why[0] and "on purpose" in why[0]
    assert "never fails a run" in why[1] and "not blocking" in why[2] and "disproven" in why[2]
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("Done, exit code 0: 1 dataset(s) materialised, no run failed; 1 non-blocking ERROR check(s) and 2 WARN")
    assert not last.startswith("OK")


class _Specs:
    """A retriever registry: ``hybrid`` fuses ``a`` and ``b``."""

    def closure(self, names):
        order: list[str] = []
        for name in names:
            order += [n for n in ({"hybrid": ["a", "b", "hybrid"]}.get(name, [name])) if n not in order]
        return order


class _Registry:
    retrievers = _Specs()

    def get(self, dataset):
        return type("Config", (), {"retrievers": ["hybrid", "c"]})()


def test_a_run_leaves_out_the_steps_of_retrievers_the_dataset_does_not_use() -> None:
    def steps(name: str) -> set[dg.AssetKey]:
        return {dg.AssetKey(["retrievers", name + "_index"]), dg.AssetKey(["retrievers", name + "_runs"])}

    other = {dg.AssetKey("corpus"), dg.AssetKey("retrieval_runs"), dg.AssetKey(["retrievers", "a", "notes"])}
    keys = other | steps("a") | steps("b") | steps("c") | steps("hybrid") | steps("unused")
    used, unused = used_by_dataset(keys, _Registry(), "toy")
    # listed retrievers keep both steps, components only their index, the unused one nothing
    assert used == other | steps("c") | steps("hybrid") | {dg.AssetKey(["retrievers", n + "_index"]) for n in ("a", "b")}
    assert unused == ["unused"]
    # asked for explicitly, an unused retriever's steps still run (and say "not evaluated here")
    assert used_by_dataset(steps("unused"), _Registry(), "toy") == (steps("unused"), [])


def test_adding_a_retriever_builds_the_indexes_it_needs_first_and_refuses_what_a_dataset_does_not_list() -> None:
    registry = load_registry()  # the project's: adk_v1_24_1 lists code_lexical_classes, not code_lexical_ft_classes
    assert add_retriever_selection(registry, "code_lexical_classes", ["adk_v1_24_1"]) == (
        "retrievers/bm25_code_index,retrievers/code_lexical_index,retrievers/code_lexical_classes_index,"
        "retrievers/code_lexical_classes_runs,retrieval_runs*"
    )
    with pytest.raises(
        UsageError,
        match=r"adk_v1_24_1 does not list retriever code_lexical_ft_classes: add it to `retrievers:` of adk_v1_24_1 in data/config/datasets.yaml",
    ):
        add_retriever_selection(registry, "code_lexical_ft_classes", ["adk_v1_24_1"])
    with pytest.raises(UsageError, match=r"unknown retriever 'no_such_retriever'; known: bm25"):
        add_retriever_selection(registry, "no_such_retriever", ["stdlib"])


def test_add_retriever_on_the_command_line(tmp_path: Path, dagster_home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    resources = tiny_resources(tmp_path)
    code, _, err = run(resources, tmp_path / "a.log", capfd, args=("--add-retriever", "no_such_retriever"))
    assert code == 2 and "unknown retriever 'no_such_retriever'" in err
    code, _, err = run(resources, tmp_path / "b.log", capfd, args=("--add-retriever", "bm25", "--select", "corpus"))
    assert code == 2 and "give it or --select, not both" in err
    assert run(resources, tmp_path / "c.log", capfd)[0] == 0  # the dataset materialised, then one retriever re-added
    code, out, _ = run(resources, tmp_path / "d.log", capfd, args=("--add-retriever", "hybrid_rrf_k60"))
    assert code == 0
    steps = [m.group(1) for line in out.splitlines() if (m := re.match(r"\s+\[\s*\d+/\d+\]\s+\S+\s+(\S+)", line))]
    assert steps[:4] == [  # step keys, as the run page names them
        "retrievers__bm25_index",
        "retrievers__dense_minilm_index",
        "retrievers__hybrid_rrf_k60_index",
        "retrievers__hybrid_rrf_k60_runs",
    ]
    assert "retrieval_runs" in steps and "retrievers__bm25_runs" not in steps


def test_the_terminal_names_each_step_as_the_run_page_does() -> None:
    """The progress line's label is the step key the run page and the event log show (not the asset's user string);
    a step making several assets names them after it."""
    import dagster as dg

    from retrieval_pipeline.cli.progress import Plan
    from retrieval_pipeline.definitions import defs

    definitions = defs()
    job = definitions.resolve_job_def("weekly_evaluation")
    keys = job.asset_layer.executable_asset_keys
    plan = Plan.of(definitions, sorted(keys))
    run_page_steps = {node.name for node in job.graph.node_defs}  # one op per step: the run page's step keys
    assert set(plan.steps) == run_page_steps
    for step in plan.steps:
        assert plan.label(step)[1].split(" ")[0] == step
    # the asset names follow where the step key alone would not find them: a '.' Dagster's op names do not allow,
    # a step making several assets (named after its main asset)
    assert plan.label("retrievers__bm25_index")[1] == "retrievers__bm25_index"
    assert (
        plan.label("retrievers__hybrid_minmax_a0_5_index")[1]
        == "retrievers__hybrid_minmax_a0_5_index (retrievers/hybrid_minmax_a0.5_index)"
    )
    assert plan.label("question_verdicts")[1] == "question_verdicts (quality_report, question_verdicts)"
    assert plan.label("retrieval_metrics")[1] == "retrieval_metrics" and "verify_questions" not in plan.steps
    assert plan.label_width == max(len(plan.label(s)[1]) for s in plan.steps)  # the columns after the label line up
    assert dg.AssetKey(["retrievers", "hybrid_minmax_a0.5_index"]) in keys


def test_a_missing_input_names_the_cause_and_the_fix(tmp_path: Path, dagster_home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 39.11: ``make add-retriever`` on a fresh clone said only ``Error occurred while loading input "corpus"``."""
    resources = tiny_resources(tmp_path)
    code, out, err = run(resources, tmp_path / "a.log", capfd, args=("--add-retriever", "bm25"))
    assert code == 1 and "Traceback" not in out + err
    step = next(line for line in out.splitlines() if "retrievers__bm25_index" in line and "FAILED" in line)
    assert "Error occurred while loading input" not in step
    assert f"input 'corpus' of dataset {DATASET} was never materialised" in step
    assert f"run the dataset first: make run DATASETS={DATASET}" in step
