"""MLflow logging against a real local tracking store (SQLite in a temporary folder), and the optional resource."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pytest

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.report.mlflow_log import (
    MAX_KEY_LENGTH,
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VALUE_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_VALUE_LENGTH,
    MLflowLogError,
    MLflowNotInstalledError,
    default_artifact_location,
    evaluation_week,
    flatten_params,
    log_evaluation,
    metric_key,
    metric_values,
    sanitise_name,
)
from retrieval_pipeline.defs.mlflow_resource import MLflowResource, mlflow_from_environment

requires_mlflow = pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None, reason="the mlflow extra is not installed: pip install 'retrieval_pipeline[mlflow]'"
)

PROJECT_ROOT = Path(__file__).resolve().parents[3]
WEEK_47 = datetime(2026, 11, 19, 9, 30, tzinfo=timezone.utc)  # Thursday of ISO week 47 of 2026 (worked out below)
WEEK_48 = WEEK_47 + timedelta(days=7)


@pytest.fixture(autouse=True, scope="module")
def no_mlruns_in_the_project() -> Iterator[None]:
    """No test here may leave MLflow's default ``mlruns/`` (or ``mlflow.db``) in the project, whatever it runs from."""
    before = {name: (PROJECT_ROOT / name).exists() for name in ("mlruns", "mlartifacts", "mlflow.db")}
    yield
    assert {name: (PROJECT_ROOT / name).exists() for name in before} == before


def _client(tracking_uri: str):
    """A client of the store, to read back what was logged (mlflow imported only by tests that require it)."""
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def _validation():
    from mlflow.utils import validation

    return validation


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One real SQLite tracking store for the module (creating its schema takes about a second)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "report.md"
    path.write_bytes("# Retrievers\n\n| retriever | hit_rate@5 |\n| bm25 | 0.5 |\n\u00e9\n".encode())
    return path


def _log(store: str, experiment: str, **overrides):
    arguments = {
        "tracking_uri": store,
        "experiment": experiment,
        "dataset": "nq_small",
        "evaluated_at": WEEK_47,
        "params": {"k": 10},
        "metrics": {"bm25": {"hit_rate@5": 0.5}},
        "artifacts": [],
    }
    return log_evaluation(**{**arguments, **overrides})


# --- the step, the keys, the params: pure functions, checked against hand-worked values and MLflow's rules


@pytest.mark.parametrize(
    ("moment", "week"),
    [
        # 2026-01-01 is a Thursday, so ISO week 1 starts Monday 2025-12-29; 2026-11-19 is day 325 after it: 46 weeks + 3 days
        (datetime(2026, 11, 19), 202647),
        (datetime(2025, 12, 29), 202601),  # the Monday that starts ISO 2026-W01, still calendar 2025
        (datetime(2027, 1, 1), 202653),  # a year starting on Thursday has 53 ISO weeks; 2027-01-01 (Friday) is in its last
        (datetime(2024, 12, 30), 202501),  # Monday of ISO 2025-W01
        (datetime(2026, 11, 23, 0, 30, tzinfo=timezone(timedelta(hours=2))), 202647),  # Monday 00:30 at UTC+2 is Sunday in UTC
    ],
)
def test_evaluation_week_is_iso_year_times_100_plus_iso_week_in_utc(moment: datetime, week: int) -> None:
    assert evaluation_week(moment) == week


@requires_mlflow
@pytest.mark.parametrize(
    ("retriever", "metric", "key"),
    [
        ("bm25", "hit_rate@5", "bm25/hit_rate_at_5"),
        ("dense", "ndcg@10", "dense/ndcg_at_10"),
        ("hybrid/rrf", "mrr", "hybrid_rrf/mrr"),  # the only slash is the separator
        ("e5 large", "recall@k=5", "e5_large/recall_at_k_5"),
        ("..", "p@5", "__/p_at_5"),  # a dots-only component would be a path MLflow refuses
        ("bge-m3", "latency_ms.p95", "bge-m3/latency_ms.p95"),  # dashes and dots are kept
        ("caf\u00e9", "hit%", "caf_/hit_pct_"),
    ],
)
def test_metric_key_sanitised_as_written_and_accepted_by_mlflow(retriever: str, metric: str, key: str) -> None:
    assert metric_key(retriever, metric) == key
    # parity with MLflow's own validation (raises on a bad name)
    _validation()._validate_metric_name(key)
    _validation()._validate_param_name(sanitise_name(metric))


@requires_mlflow
def test_limits_copied_from_mlflow_match_the_library() -> None:
    validation = _validation()
    assert (MAX_KEY_LENGTH, MAX_PARAM_VALUE_LENGTH, MAX_TAG_VALUE_LENGTH) == (
        validation.MAX_ENTITY_KEY_LENGTH,
        validation.MAX_PARAM_VAL_LENGTH,
        validation.MAX_TAG_VAL_LENGTH,
    )
    assert (MAX_PARAMS_TAGS_PER_BATCH, MAX_METRICS_PER_BATCH) == (validation.MAX_PARAMS_TAGS_PER_BATCH, validation.MAX_METRICS_PER_BATCH)


def test_metric_values_skip_nan_and_none_and_count_them() -> None:
    values, skipped = metric_values("d", {"bm25": {"mrr": 0.25, "ndcg@10": math.nan, "judge": None}, "dense": {"mrr": 1}})
    assert values == {"bm25/mrr": 0.25, "dense/mrr": 1.0}
    assert skipped == 2


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({"bm25": {"a b": 0.1, "a_b": 0.2}}, r"'bm25/a b' and 'bm25/a_b' both become MLflow key 'bm25/a_b'"),
        ({"bm25": {"mrr": "high"}}, r"metric bm25/mrr is 'high', not a number"),
        ({"bm25": {"mrr": True}}, r"metric bm25/mrr is True, not a number"),
        ({"": {"mrr": 0.1}}, r"empty retriever or metric name"),
        ({"bm25": {"m" * 300: 0.1}}, r"longer than MLflow's 250 characters"),
    ],
)
def test_bad_metrics_are_refused_naming_the_dataset(metrics: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        metric_values("nq_small", metrics)
    assert "dataset nq_small" in str(caught.value)


def test_params_flattened_and_stringified() -> None:
    params = {"retrievers": {"bm25": {"k1": 1.2, "b": 0.75}}, "cutoffs": [1, 5, 10], "tags": {"x"}, "name": "nq", "rerank": None}
    assert flatten_params(params) == {
        "retrievers.bm25.k1": "1.2",
        "retrievers.bm25.b": "0.75",
        "cutoffs": "[1, 5, 10]",
        "tags": '["x"]',
        "name": "nq",
        "rerank": "None",
    }


def test_default_artifact_location_never_the_current_directory(tmp_path: Path) -> None:
    assert default_artifact_location(f"sqlite:///{tmp_path / 'db' / 'mlflow.db'}") == (tmp_path / "db" / "mlartifacts").as_uri()
    assert default_artifact_location("http://localhost:5000") is None
    with pytest.raises(MLflowLogError, match=r"'postgresql://u@h/db'.*set artifact_location"):
        default_artifact_location("postgresql://u@h/db")
    with pytest.raises(MLflowLogError, match="in-memory"):
        default_artifact_location("sqlite:///:memory:")


# --- a real local store


@requires_mlflow
def test_two_weekly_evaluations_read_back_from_the_store(store: str, report: Path, tmp_path: Path) -> None:
    metrics_47 = {"bm25": {"hit_rate@5": 0.5, "mrr": 0.3125}, "dense": {"hit_rate@5": 0.75, "mrr": 0.5}}
    metrics_48 = {"bm25": {"hit_rate@5": 0.625, "mrr": 0.375}, "dense": {"hit_rate@5": 0.875, "mrr": 0.5625}}
    params = {"k": 10, "retrievers": {"bm25": {"k1": 1.2}}, "queries": 8}
    first = _log(store, "weekly", metrics=metrics_47, params=params, artifacts=[report], dagster_run_id="dagster-run-1")
    second = _log(store, "weekly", metrics=metrics_48, params=params, artifacts=[report], evaluated_at=WEEK_48)

    assert (first.step, second.step) == (202647, 202648)
    assert first.run_id != second.run_id and first.experiment_id == second.experiment_id
    assert (first.n_metrics, first.n_skipped_nan) == (4, 0)
    client = _client(store)
    for logged, metrics in ((first, metrics_47), (second, metrics_48)):
        for retriever, by_metric in metrics.items():
            for metric, value in by_metric.items():
                history = client.get_metric_history(logged.run_id, metric_key(retriever, metric))
                assert [(h.step, h.value) for h in history] == [(logged.step, value)]
        run = client.get_run(logged.run_id)
        assert run.info.status == "FINISHED"
        assert run.data.params == {"k": "10", "retrievers.bm25.k1": "1.2", "queries": "8"}
        assert run.data.tags["dataset"] == "nq_small"
        assert run.data.tags["evaluation_week"] == str(logged.step)
        assert [a.path for a in client.list_artifacts(logged.run_id)] == ["report.md"]
        downloaded = Path(client.download_artifacts(logged.run_id, "report.md", str(tmp_path / logged.run_id)))
        assert downloaded.read_bytes() == report.read_bytes()
    assert client.get_run(first.run_id).data.tags["dagster_run_id"] == "dagster-run-1"
    assert "dagster_run_id" not in client.get_run(second.run_id).data.tags
    # the week series across runs, as a dashboard would query it
    runs = client.search_runs([first.experiment_id], "tags.dataset = 'nq_small'")
    series = sorted((int(r.data.tags["evaluation_week"]), r.data.metrics["dense/hit_rate_at_5"]) for r in runs)
    assert series == [(202647, 0.75), (202648, 0.875)]


@requires_mlflow
def test_nan_metrics_are_not_logged_and_counted(store: str) -> None:
    logged = _log(store, "nan", metrics={"bm25": {"mrr": 0.5, "ndcg@10": float("nan")}, "judge": {"pass_rate": None}})
    assert (logged.n_metrics, logged.n_skipped_nan) == (1, 2)
    assert _client(store).get_run(logged.run_id).data.metrics == {"bm25/mrr": 0.5}


@requires_mlflow
def test_long_params_truncated_with_a_note_and_many_params_batched(store: str) -> None:
    long_value = "q" * (MAX_PARAM_VALUE_LENGTH + 1000)
    params = {"prompt": long_value, **{f"p{i:03d}": i for i in range(150)}}  # more than one batch of 100
    logged = _log(store, "params", params=params)
    run = _client(store).get_run(logged.run_id)
    assert len(run.data.params) == 151
    assert all(run.data.params[f"p{i:03d}"] == str(i) for i in range(150))
    stored = run.data.params["prompt"]
    assert len(stored) <= MAX_PARAM_VALUE_LENGTH
    kept = len(stored) - len(stored.lstrip("q"))
    note = re.search(r"truncated by retrieval_pipeline: (\d+) of (\d+) characters dropped", stored)
    assert note is not None and (int(note.group(1)), int(note.group(2))) == (len(long_value) - kept, len(long_value))
    assert logged.truncated_params == ("prompt",)
    assert run.data.tags["truncated_params"] == "prompt"


@requires_mlflow
def test_missing_artifact_refused_before_any_run_is_created(store: str, tmp_path: Path) -> None:
    client = _client(store)
    _log(store, "missing")  # the experiment exists, with one run
    experiment = client.get_experiment_by_name("missing")
    with pytest.raises(InputError, match=r"file .*nope\.md.*dataset nq_small: artifact to log to MLflow does not exist"):
        _log(store, "missing", artifacts=[tmp_path / "nope.md"])
    assert len(client.search_runs([experiment.experiment_id])) == 1


@requires_mlflow
def test_artifact_folder_logged_under_its_name(store: str, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "bm25.run").write_text("q1 Q0 d1 1 1.0 bm25\n")
    logged = _log(store, "folders", artifacts=[folder])
    client = _client(store)
    assert [a.path for a in client.list_artifacts(logged.run_id, "exports")] == ["exports/bm25.run"]


@requires_mlflow
@pytest.mark.parametrize("bad", ["nosuch://somewhere", "  "])
def test_bad_tracking_uri_gives_an_error_naming_it(bad: str) -> None:
    with pytest.raises(MLflowLogError, match=re.escape(repr(bad)) if bad.strip() else "tracking URI is empty"):
        _log(bad, "bad")


@requires_mlflow
def test_unwritable_sqlite_path_gives_an_error_naming_it(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "a_file"
    not_a_folder.write_text("")
    uri = f"sqlite:///{not_a_folder / 'mlflow.db'}"
    with pytest.raises(MLflowLogError, match=re.escape(repr(uri))):
        _log(uri, "bad")


@requires_mlflow
def test_file_store_refused_by_mlflow_names_the_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = (tmp_path / "fs").as_uri()
    with pytest.raises(MLflowLogError, match=re.escape(repr(uri)) + ".*MLFLOW_ALLOW_FILE_STORE"):
        _log(uri, "bad")


@requires_mlflow
def test_failure_while_logging_marks_the_run_failed(store: str, report: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(client, run_id, path):
        raise OSError(f"disk full writing {path.name}")

    monkeypatch.setattr("retrieval_pipeline.core.report.mlflow_log._log_artifact", refuse)
    with pytest.raises(MLflowLogError, match=re.escape(repr(store)) + r", dataset nq_small, run \w+: disk full writing report\.md"):
        _log(store, "failing", artifacts=[report])
    runs = _client(store).search_runs([_client(store).get_experiment_by_name("failing").experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
    assert runs[0].data.metrics == {"bm25/hit_rate_at_5": 0.5}  # what came before the failure is kept


@requires_mlflow
def test_nothing_written_outside_the_store_whatever_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project_had_mlruns = (PROJECT_ROOT / "mlruns").exists()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    store_dir = tmp_path / "store"
    logged = _log(f"sqlite:///{store_dir / 'mlflow.db'}", "cwd", artifacts=[_written(tmp_path / "r.md")])
    assert list(cwd.iterdir()) == []
    assert logged.artifact_uri.startswith((store_dir / "mlartifacts").as_uri())
    assert sorted(p.name for p in store_dir.iterdir()) == ["mlartifacts", "mlflow.db"]
    assert (PROJECT_ROOT / "mlruns").exists() == project_had_mlruns


# --- the resource


def test_disabled_resource_does_nothing_and_imports_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # any import of mlflow would now fail
    monkeypatch.chdir(tmp_path)
    resource = MLflowResource()
    assert not resource.enabled
    assert resource.log("nq_small", WEEK_47, {"k": 1}, {"bm25": {"mrr": 0.5}}) is None
    assert list(tmp_path.iterdir()) == []


def test_enabled_resource_without_mlflow_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    resource = MLflowResource(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(MLflowNotInstalledError, match=re.escape("pip install 'retrieval_pipeline[mlflow]'")):
        resource.log("nq_small", WEEK_47, {"k": 1}, {"bm25": {"mrr": 0.5}})


@requires_mlflow
def test_resource_from_environment_through_dagster(store: str, report: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert not mlflow_from_environment().enabled
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from_env")
    with dg.build_resources({"mlflow": mlflow_from_environment()}) as resources:
        logged = resources.mlflow.log("nq_small", WEEK_48, {"k": 5}, {"bm25": {"recall@10": 0.8}}, [report], dagster_run_id="abc")
    assert logged is not None and logged.step == 202648
    client = _client(store)
    run = client.get_run(logged.run_id)
    assert client.get_experiment(run.info.experiment_id).name == "from_env"
    assert run.data.metrics == {"bm25/recall_at_10": 0.8}
    assert run.data.tags["dagster_run_id"] == "abc"


def _written(path: Path) -> Path:
    path.write_text("report\n")
    return path
