"""MLflow logging against a real local tracking store (SQLite in a temporary folder), and the optional resource.

An evaluation is a parent run with a child run per retriever; the tests read both back as a user would.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.report import mlflow_log
from retrieval_pipeline.core.report.assemble import mlflow_retrievers
from retrieval_pipeline.core.report.mlflow_log import (
    MAX_KEY_LENGTH,
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VALUE_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_VALUE_LENGTH,
    MLflowLogError,
    MLflowNotInstalledError,
    RetrieverResult,
    default_artifact_location,
    evaluation_week,
    flatten_params,
    log_evaluation,
    metric_values,
    sanitise_name,
)
from retrieval_pipeline.core.retrieval.kinds.openai_embeddings import OpenAIEmbeddingsSpec
from retrieval_pipeline.defs.mlflow_resource import MLflowResource, mlflow_from_environment

requires_mlflow = pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None, reason="the mlflow extra is not installed: pip install 'retrieval_pipeline[mlflow]'"
)

PROJECT_ROOT = Path(__file__).resolve().parents[3]
WEEK_47 = datetime(2026, 11, 19, 9, 30, tzinfo=timezone.utc)  # Thursday of ISO week 47 of 2026 (worked out below)
WEEK_48 = WEEK_47 + timedelta(days=7)
BM25 = {"kind": "bm25", "k1": 1.2, "b": 0.75, "fields": {"text": 1, "title": 2}}
DENSE = {"kind": "dense", "model": {"package": "minilm", "revision": None}, "batch_size": 32, "query_prefix": ""}


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
        "retrievers": {"bm25": RetrieverResult(BM25, {"hit_rate@5": 0.5})},
        "artifacts": [],
    }
    return log_evaluation(**{**arguments, **overrides})


def _children(store: str, parent_run_id: str) -> dict:
    """The child runs of a parent, by run name, as MLflow's run comparison finds them (the parentRunId tag)."""
    runs = _client(store).search_runs(
        [_client(store).get_run(parent_run_id).info.experiment_id], f"tags.mlflow.parentRunId = '{parent_run_id}'"
    )
    return {r.info.run_name: r for r in runs}


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
    ("name", "key"),
    [
        ("hit_rate@5", "hit_rate_at_5"),
        ("ndcg@10", "ndcg_at_10"),
        ("hybrid/rrf", "hybrid_rrf"),  # a key is one component, never a path
        ("recall@k=5", "recall_at_k_5"),
        ("e5 large", "e5_large"),
        ("..", "__"),  # a dots-only name would be a path MLflow refuses
        ("latency_ms.p95", "latency_ms.p95"),  # dots and dashes are kept
        ("bge-m3", "bge-m3"),
        ("caf\u00e9", "caf_"),
        ("hit%", "hit_pct_"),
    ],
)
def test_names_sanitised_as_written_and_accepted_by_mlflow(name: str, key: str) -> None:
    assert sanitise_name(name) == key
    # parity with MLflow's own validation (raises on a bad name), the interval keys included
    for candidate in (key, f"{key}_ci_low", f"{key}_ci_high"):
        _validation()._validate_metric_name(candidate)
        _validation()._validate_param_name(candidate)


@requires_mlflow
def test_limits_copied_from_mlflow_match_the_library() -> None:
    validation = _validation()
    assert (MAX_KEY_LENGTH, MAX_PARAM_VALUE_LENGTH, MAX_TAG_VALUE_LENGTH) == (
        validation.MAX_ENTITY_KEY_LENGTH,
        validation.MAX_PARAM_VAL_LENGTH,
        validation.MAX_TAG_VAL_LENGTH,
    )
    assert (MAX_PARAMS_TAGS_PER_BATCH, MAX_METRICS_PER_BATCH) == (validation.MAX_PARAMS_TAGS_PER_BATCH, validation.MAX_METRICS_PER_BATCH)


def test_metric_values_are_means_and_interval_bounds_skipping_nan_and_none() -> None:
    result = RetrieverResult(
        {},
        {"mrr": 0.25, "ndcg@10": math.nan, "judge": None, "hit_rate@5": 1},
        {"mrr": (0.125, 0.5), "ndcg@10": (math.nan, math.nan), "hit_rate@5": (0.75, 1.0)},
    )
    values, skipped = metric_values("d", "bm25", result)
    assert values == {
        "mrr": 0.25,
        "hit_rate_at_5": 1.0,
        "mrr_ci_low": 0.125,
        "mrr_ci_high": 0.5,
        "hit_rate_at_5_ci_low": 0.75,
        "hit_rate_at_5_ci_high": 1.0,
    }
    assert skipped == 4


@pytest.mark.parametrize(
    ("means", "intervals", "message"),
    [
        ({"a b": 0.1, "a_b": 0.2}, {}, r"'bm25/a b' and 'bm25/a_b' both become MLflow key 'a_b'"),
        ({"mrr_ci_low": 0.1}, {"mrr": (0.0, 0.2)}, r"'bm25/mrr_ci_low' and 'bm25/mrr ci_low' both become MLflow key 'mrr_ci_low'"),
        ({"mrr": "high"}, {}, r"metric bm25/mrr is 'high', not a number"),
        ({"mrr": True}, {}, r"metric bm25/mrr is True, not a number"),
        ({"mrr": 0.5}, {"mrr": ("low", 0.6)}, r"metric bm25/mrr ci_low is 'low', not a number"),
        ({"": 0.1}, {}, r"metric 'bm25/' has an empty name"),
        ({"m" * 300: 0.1}, {}, r"longer than MLflow's 250 characters"),
    ],
)
def test_bad_metrics_are_refused_naming_the_dataset(means: dict, intervals: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        metric_values("nq_small", "bm25", RetrieverResult({}, means, intervals))
    assert "dataset nq_small" in str(caught.value)


def test_bad_retriever_refused_before_any_store_is_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # checked before mlflow is even imported
    with pytest.raises(InputError, match="dataset nq_small: a retriever has an empty name"):
        _log("sqlite:////nonexistent/mlflow.db", "bad", retrievers={" ": RetrieverResult({}, {"mrr": 0.5})})
    with pytest.raises(InputError, match=r"dataset nq_small, retriever bm25: param key 'k{251}' is longer than MLflow's 250"):
        _log("sqlite:////nonexistent/mlflow.db", "bad", retrievers={"bm25": RetrieverResult({"k" * 251: 1}, {"mrr": 0.5})})


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


def _evaluation(hit_rate: dict[str, float], mrr: dict[str, float]) -> dict[str, RetrieverResult]:
    """bm25 and dense with their settings, two means each, and intervals a quarter either side (clipped to [0, 1])."""
    settings = {"bm25": BM25, "dense": DENSE}
    return {
        name: RetrieverResult(
            settings[name],
            {"hit_rate@5": hit_rate[name], "mrr": mrr[name]},
            {m: (max(v - 0.25, 0.0), min(v + 0.25, 1.0)) for m, v in (("hit_rate@5", hit_rate[name]), ("mrr", mrr[name]))},
        )
        for name in settings
    }


@requires_mlflow
def test_two_weekly_evaluations_read_back_from_the_store(store: str, report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evaluation_47 = _evaluation({"bm25": 0.5, "dense": 0.75}, {"bm25": 0.3125, "dense": 0.5})
    evaluation_48 = _evaluation({"bm25": 0.625, "dense": 0.875}, {"bm25": 0.375, "dense": 0.5625})
    params = {"k": 10, "statistics": {"confidence": 0.95}, "queries": 8}
    first = _log(store, "weekly", retrievers=evaluation_47, params=params, artifacts=[report], dagster_run_id="dagster-run-1")
    second = _log(store, "weekly", retrievers=evaluation_48, params=params, artifacts=[report], evaluated_at=WEEK_48)

    assert (first.step, second.step) == (202647, 202648)
    assert first.run_id != second.run_id and first.experiment_id == second.experiment_id
    assert (first.n_metrics, first.n_skipped_nan) == (12, 0)  # 2 retrievers x 2 metrics x (mean, low, high)
    client = _client(store)
    for logged, evaluation in ((first, evaluation_47), (second, evaluation_48)):
        # the parent: the dataset's params and tags, the report, no metrics of its own
        parent = client.get_run(logged.run_id)
        assert parent.info.status == "FINISHED" and parent.info.run_name == f"nq_small week {logged.step}"
        assert parent.data.params == {"k": "10", "statistics.confidence": "0.95", "queries": "8"}
        assert parent.data.metrics == {}
        assert parent.data.tags["dataset"] == "nq_small"
        assert parent.data.tags["evaluation_week"] == str(logged.step)
        assert [a.path for a in client.list_artifacts(logged.run_id)] == ["report.md"]
        downloaded = Path(client.download_artifacts(logged.run_id, "report.md", str(tmp_path / logged.run_id)))
        assert downloaded.read_bytes() == report.read_bytes()
        # one child per retriever, named by it, nested under the parent
        children = _children(store, logged.run_id)
        assert sorted(children) == ["bm25", "dense"]
        assert {name: run.info.run_id for name, run in children.items()} == dict(logged.child_run_ids)
        for name, result in evaluation.items():
            child = children[name]
            assert child.info.status == "FINISHED"
            assert child.data.tags["mlflow.parentRunId"] == logged.run_id
            assert child.data.tags["retriever"] == name and child.data.tags["dataset"] == "nq_small"
            assert child.data.params == flatten_params(result.settings)  # the spec, flat
            for metric, mean in result.means.items():
                key = sanitise_name(metric)
                low, high = child.data.metrics[f"{key}_ci_low"], child.data.metrics[f"{key}_ci_high"]
                assert (low, high) == result.intervals[metric] and low <= child.data.metrics[key] == mean <= high
                for logged_key in (key, f"{key}_ci_low", f"{key}_ci_high"):
                    history = client.get_metric_history(child.info.run_id, logged_key)
                    assert [(h.step, h.value) for h in history] == [(logged.step, child.data.metrics[logged_key])]
            assert [a.path for a in client.list_artifacts(child.info.run_id)] == []
    assert children["bm25"].data.params == {"kind": "bm25", "k1": "1.2", "b": "0.75", "fields.text": "1", "fields.title": "2"}
    assert children["dense"].data.params["model.package"] == "minilm"
    for run_id in (first.run_id, *first.child_run_ids.values()):
        assert client.get_run(run_id).data.tags["dagster_run_id"] == "dagster-run-1"
    for run_id in (second.run_id, *second.child_run_ids.values()):
        assert "dagster_run_id" not in client.get_run(run_id).data.tags
    # the week series of one retriever across evaluations, as a dashboard would query it
    runs = client.search_runs([first.experiment_id], "tags.dataset = 'nq_small' and tags.retriever = 'dense'")
    series = sorted((int(r.data.tags["evaluation_week"]), r.data.metrics["hit_rate_at_5"]) for r in runs)
    assert series == [(202647, 0.75), (202648, 0.875)]
    # two children side by side, as MLflow's run comparison (and mlflow.search_runs) shows them
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    frame = mlflow.search_runs([first.experiment_id], f"tags.mlflow.parentRunId = '{first.run_id}'")
    side_by_side = frame.set_index("tags.mlflow.runName").sort_index()
    columns = ["metrics.hit_rate_at_5_ci_low", "metrics.hit_rate_at_5", "metrics.hit_rate_at_5_ci_high", "params.kind"]
    assert side_by_side[columns].to_dict("index") == {
        "bm25": dict(zip(columns, [0.25, 0.5, 0.75, "bm25"])),
        "dense": dict(zip(columns, [0.5, 0.75, 1.0, "dense"])),
    }
    assert side_by_side.loc["bm25", "params.k1"] == "1.2" and pd.isna(side_by_side.loc["dense", "params.k1"])


@requires_mlflow
def test_nan_metrics_are_not_logged_and_counted(store: str) -> None:
    retrievers = {
        "bm25": RetrieverResult(BM25, {"mrr": 0.5, "ndcg@10": float("nan")}, {"mrr": (0.25, float("nan"))}),
        "judge": RetrieverResult({}, {"pass_rate": None}),
    }
    logged = _log(store, "nan", retrievers=retrievers)
    assert (logged.n_metrics, logged.n_skipped_nan) == (2, 3)
    children = _children(store, logged.run_id)
    assert children["bm25"].data.metrics == {"mrr": 0.5, "mrr_ci_low": 0.25}
    assert children["judge"].data.metrics == {} and children["judge"].data.params == {}


@requires_mlflow
def test_long_params_truncated_with_a_note_and_many_params_batched(store: str) -> None:
    long_value = "q" * (MAX_PARAM_VALUE_LENGTH + 1000)
    params = {"prompt": long_value, **{f"p{i:03d}": i for i in range(150)}}  # more than one batch of 100
    retrievers = {"bm25": RetrieverResult({**BM25, "description": long_value}, {"mrr": 0.5})}
    logged = _log(store, "params", params=params, retrievers=retrievers)
    run = _client(store).get_run(logged.run_id)
    assert len(run.data.params) == 151
    assert all(run.data.params[f"p{i:03d}"] == str(i) for i in range(150))
    stored = run.data.params["prompt"]
    assert len(stored) <= MAX_PARAM_VALUE_LENGTH
    kept = len(stored) - len(stored.lstrip("q"))
    note = re.search(r"truncated by retrieval_pipeline: (\d+) of (\d+) characters dropped", stored)
    assert note is not None and (int(note.group(1)), int(note.group(2))) == (len(long_value) - kept, len(long_value))
    assert logged.truncated_params == ("prompt", "bm25/description")
    assert run.data.tags["truncated_params"] == "prompt"
    child = _children(store, logged.run_id)["bm25"]
    assert child.data.tags["truncated_params"] == "description"
    assert child.data.params["description"] == stored  # the same value, cut the same way
    assert child.data.params["k1"] == "1.2"


@requires_mlflow
def test_secrets_are_named_never_logged(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec names its key's environment variable; the variable's value reaches no param, tag or metric."""
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("EMBEDDINGS_API_KEY", secret)
    spec = OpenAIEmbeddingsSpec(name="remote", base_url="https://embeddings.example/v1", model="e5", api_key_env="EMBEDDINGS_API_KEY")
    table = pd.DataFrame({"retriever": ["remote"], "mrr": [0.5]})
    significance = pd.DataFrame({"retriever": ["remote"], "metric": ["mrr"], "ci_low": [0.25], "ci_high": [0.75]})
    logged = _log(store, "secrets", retrievers=mlflow_retrievers(table, significance, {"remote": spec}), tags={"note": "x"})
    child = _children(store, logged.run_id)["remote"]
    assert child.data.params["api_key_env"] == "EMBEDDINGS_API_KEY" and child.data.params["base_url"] == "https://embeddings.example/v1"
    assert child.data.metrics == {"mrr": 0.5, "mrr_ci_low": 0.25, "mrr_ci_high": 0.75}
    for run_id in (logged.run_id, child.info.run_id):
        data = _client(store).get_run(run_id).data
        assert secret not in repr((data.params, data.tags, data.metrics))


@requires_mlflow
def test_missing_artifact_refused_before_any_run_is_created(store: str, tmp_path: Path) -> None:
    client = _client(store)
    _log(store, "missing")  # the experiment exists, with a parent and its child
    experiment = client.get_experiment_by_name("missing")
    with pytest.raises(InputError, match=r"file .*nope\.md.*dataset nq_small: artifact to log to MLflow does not exist"):
        _log(store, "missing", artifacts=[tmp_path / "nope.md"])
    assert len(client.search_runs([experiment.experiment_id])) == 2


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
    client = _client(store)
    runs = client.search_runs([client.get_experiment_by_name("failing").experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert parent.info.status == "FAILED"
    # what came before the failure is kept: the child, logged before the parent's artifacts
    assert [(r.info.run_name, r.info.status, r.data.metrics) for r in _children(store, parent.info.run_id).values()] == [
        ("bm25", "FINISHED", {"hit_rate_at_5": 0.5})
    ]


@requires_mlflow
def test_failure_in_a_child_marks_it_and_its_parent_failed(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log_batches = mlflow_log._log_params_and_metrics

    def refuse_metrics(client, run_id, params, values, step, millis):
        if values:
            raise OSError("database is locked")
        log_batches(client, run_id, params, values, step, millis)

    monkeypatch.setattr(mlflow_log, "_log_params_and_metrics", refuse_metrics)
    with pytest.raises(
        MLflowLogError, match=re.escape(repr(store)) + r", dataset nq_small, run \w+: retriever bm25, run \w+: database is locked"
    ):
        _log(store, "child_failing")
    client = _client(store)
    runs = client.search_runs([client.get_experiment_by_name("child_failing").experiment_id])
    assert sorted((r.info.run_name, r.info.status) for r in runs) == [("bm25", "FAILED"), ("nq_small week 202647", "FAILED")]


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
    assert resource.log("nq_small", WEEK_47, {"k": 1}, {"bm25": RetrieverResult(BM25, {"mrr": 0.5})}) is None
    assert list(tmp_path.iterdir()) == []


def test_enabled_resource_without_mlflow_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    resource = MLflowResource(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(MLflowNotInstalledError, match=re.escape("pip install 'retrieval_pipeline[mlflow]'")):
        resource.log("nq_small", WEEK_47, {"k": 1}, {"bm25": RetrieverResult(BM25, {"mrr": 0.5})})


@requires_mlflow
def test_resource_from_environment_through_dagster(store: str, report: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert not mlflow_from_environment().enabled
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from_env")
    with dg.build_resources({"mlflow": mlflow_from_environment()}) as resources:
        retrievers = {"bm25": RetrieverResult(BM25, {"recall@10": 0.8}, {"recall@10": (0.7, 0.9)})}
        logged = resources.mlflow.log("nq_small", WEEK_48, {"k": 5}, retrievers, [report], dagster_run_id="abc")
    assert logged is not None and logged.step == 202648
    client = _client(store)
    run = client.get_run(logged.run_id)
    assert client.get_experiment(run.info.experiment_id).name == "from_env"
    assert run.data.tags["dagster_run_id"] == "abc"
    child = _children(store, logged.run_id)["bm25"]
    assert child.data.metrics == {"recall_at_10": 0.8, "recall_at_10_ci_low": 0.7, "recall_at_10_ci_high": 0.9}
    assert child.data.tags["dagster_run_id"] == "abc"


def _written(path: Path) -> Path:
    path.write_text("report\n")
    return path
