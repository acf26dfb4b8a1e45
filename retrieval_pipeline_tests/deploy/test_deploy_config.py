"""The deployment's configuration, validated with the libraries' own schemas. No server and no cluster are needed.

- ``deploy/dagster.yaml``: Dagster's instance schema; the run queue and the launcher are built from it;
  the database driver its URL names loads; a missing variable is an error that names it.
- ``deploy/code_location.py``: the executor registry, its errors, and ``execution:`` run config.
- ``deploy/k8s/dagster.yaml``: Dagster's instance schema, and the ``K8sRunLauncher`` built through
  dagster-k8s's own schema. From it and the Helm values, the Kubernetes Job of a run is built as the
  launcher builds it, and its pod is checked.
- ``deploy/k8s/values.yaml``: its keys against the chart's documented structure, and the instance that the chart
  renders from it against ``deploy/k8s/dagster.yaml``. The render follows the chart's instance templates
  for the sections set here. With ``helm`` and the chart at hand, the real render is checked too (opt-in).
- ``deploy/k8s/Dockerfile`` and ``volumes.yaml``: what they name exists, and the pins match the installed versions.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._config import convert_potential_field, process_config
from dagster._core.code_pointer import FileCodePointer
from dagster._core.errors import DagsterInvalidConfigError
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._serdes import ConfigurableClassData

# the `deploy` extra (in `dev` too): without it, say what to install rather than fail at collection
pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed: pip install -e '.[deploy]'")
pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed: pip install -e '.[deploy]'")
import kubernetes  # noqa: E402 - installed with dagster-k8s
from dagster_k8s import K8sRunLauncher  # noqa: E402
from dagster_k8s.job import construct_dagster_k8s_job  # noqa: E402
from dagster_k8s.models import k8s_model_from_dict, k8s_snake_case_dict  # noqa: E402
from dagster_postgres import PostgresRunStorage  # noqa: E402
from dagster_postgres.utils import pg_url_from_config  # noqa: E402

from retrieval_pipeline.definitions import defs as project_defs
from retrieval_pipeline_tests.deploy.multiprocess_job import load_code_location

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = PROJECT_ROOT / "deploy"
K8S = DEPLOY / "k8s"
PG_ENV = {
    "DAGSTER_PG_HOST": "db.example",
    "DAGSTER_PG_PORT": "6543",
    "DAGSTER_PG_USERNAME": "dagster",
    "DAGSTER_PG_PASSWORD": "secret",
    "DAGSTER_PG_DB": "dagster",
}
#: What the chart puts into the daemon's and the run pods' environment (release "dagster").
CHART_ENV = {
    "DAGSTER_HOME": "/opt/dagster/dagster_home",
    "DAGSTER_K8S_INSTANCE_CONFIG_MAP": "dagster-instance",
    "DAGSTER_K8S_PG_PASSWORD_SECRET": "dagster-postgresql-secret",
    "DAGSTER_K8S_PIPELINE_RUN_ENV_CONFIGMAP": "dagster-pipeline-env",
    "DAGSTER_PG_PASSWORD": "secret",
}
RELEASE, NAMESPACE = "dagster", "retrieval"
HEAVY_LIMIT = {"key": "retrieval_pipeline/heavy", "value": "embedding", "limit": 1}

# The keys of the Dagster chart's values, as its values.schema.json documents them (the sections used here).
# Leaves whose values are Kubernetes objects or free-form maps are not listed: None means "any value".
_IMAGE = {"repository": None, "tag": None, "pullPolicy": {"Always", "IfNotPresent", "Never"}}
_USER_DEPLOYMENT_KEYS = (
    "env envConfigMaps envSecrets annotations nodeSelector affinity tolerations podSecurityContext securityContext resources "
    "livenessProbe readinessProbe startupProbe labels volumeMounts volumes schedulerName initContainers sidecarContainers "
    "codeServerArgs deploymentNamespace"
)
_DAEMON_KEYS = (
    "enabled image heartbeatTolerance env envConfigMaps envSecrets deploymentLabels labels nodeSelector affinity tolerations "
    "podSecurityContext securityContext resources livenessProbe readinessProbe startupProbe annotations runMonitoring "
    "runRetries sensors schedules schedulerName volumeMounts volumes initContainerResources"
)
CHART_STRUCTURE: dict[str, Any] = {
    "global": {"postgresqlSecretName": None, "dagsterHome": None, "serviceAccountName": None, "celeryConfigSecretName": None},
    "generatePostgresqlPasswordSecret": None,
    "postgresql": {
        "image": _IMAGE,
        "enabled": None,
        "postgresqlHost": None,
        "postgresqlUsername": None,
        "postgresqlPassword": None,
        "postgresqlDatabase": None,
        "postgresqlParams": None,
        "postgresqlScheme": None,
        "service": {"port": None},
    },
    "dagster-user-deployments": {
        "enabled": None,
        "enableSubchart": None,
        "imagePullSecrets": None,
        "deployments": [
            {
                "name": None,
                "image": _IMAGE,
                "dagsterApiGrpcArgs": None,
                "port": None,
                "includeConfigInLaunchedRuns": {"enabled": None},
                **dict.fromkeys(_USER_DEPLOYMENT_KEYS.split()),
            }
        ],
    },
    "runLauncher": {
        "type": {"CeleryK8sRunLauncher", "K8sRunLauncher", "CustomRunLauncher"},
        "config": {
            "celeryK8sRunLauncher": None,
            "customRunLauncher": None,
            "k8sRunLauncher": dict.fromkeys(
                "image imagePullPolicy jobNamespace loadInclusterConfig kubeconfigFile envConfigMaps envSecrets envVars volumeMounts "
                "volumes labels failPodOnRunFailure resources schedulerName securityContext runK8sConfig".split()
            ),
        },
    },
    "dagsterDaemon": {
        **dict.fromkeys(_DAEMON_KEYS.split()),
        "runCoordinator": {
            "enabled": None,
            "type": {"QueuedRunCoordinator", "CustomRunCoordinator"},
            "config": {
                "customRunCoordinator": None,
                "queuedRunCoordinator": {
                    "maxConcurrentRuns": None,
                    "dequeueIntervalSeconds": None,
                    "dequeueNumWorkers": None,
                    "dequeueUseThreads": None,
                    "blockOpConcurrencyLimitedRuns": None,
                    "tagConcurrencyLimits": [{"key": None, "value": None, "limit": None}],
                },
            },
        },
    },
    "telemetry": {"enabled": None},
}
#: What the chart's schema requires of k8sRunLauncher (the chart's own defaults supply them unless set here).
K8S_RUN_LAUNCHER_REQUIRED = {"imagePullPolicy", "loadInclusterConfig", "envConfigMaps", "envSecrets", "envVars", "volumeMounts", "volumes"}


def validate(schema: Any, value: Any) -> Any:
    """``value`` processed with a library's config schema (env: sources resolved); fails the test with the errors."""
    processed = process_config(convert_potential_field(schema).config_type, value)
    assert processed.success, processed.errors
    return processed.value


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def undocumented_keys(value: Any, structure: Any, path: str = "") -> list[str]:
    """Paths in ``value`` that the documented ``structure`` has no place for (or enum values it does not allow)."""
    if structure is None:
        return []
    if isinstance(structure, set):
        return [] if value in structure else [f"{path}={value!r} (allowed: {sorted(structure)})"]
    if isinstance(structure, list):
        return [p for i, item in enumerate(value) for p in undocumented_keys(item, structure[0], f"{path}[{i}]")]
    if not isinstance(value, Mapping):
        return [f"{path} should be a mapping"]
    out = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        out += undocumented_keys(item, structure[key], where) if key in structure else [where]
    return out


def chart_instance(values: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The instance sections that the chart's templates render from ``values`` (only the parts set in values.yaml).

    It follows helpers/instance/_postgresql.tpl, _run-coordinator.tpl, _run-launcher.tpl and configmap-instance.yaml.
    """
    pg = values["postgresql"]
    postgres_db = {
        "username": pg["postgresqlUsername"],
        "password": {"env": "DAGSTER_PG_PASSWORD"},
        "hostname": pg["postgresqlHost"],
        "db_name": pg["postgresqlDatabase"],
        "port": pg["service"]["port"],
        "params": pg.get("postgresqlParams", {}),
        **({"scheme": pg["postgresqlScheme"]} if pg.get("postgresqlScheme") else {}),
    }
    storages = {
        "run_storage": ("dagster_postgres.run_storage", "PostgresRunStorage"),
        "event_log_storage": ("dagster_postgres.event_log", "PostgresEventLogStorage"),
        "schedule_storage": ("dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
    }
    out: dict[str, Any] = {name: {"module": m, "class": c, "config": {"postgres_db": postgres_db}} for name, (m, c) in storages.items()}
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    out["run_coordinator"] = {
        "module": "dagster._core.run_coordinator",
        "class": "QueuedRunCoordinator",
        "config": {"max_concurrent_runs": queued["maxConcurrentRuns"], "tag_concurrency_limits": queued["tagConcurrencyLimits"]},
    }
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    config: dict[str, Any] = {
        "load_incluster_config": launcher["loadInclusterConfig"],
        "job_namespace": launcher.get("jobNamespace") or namespace,
        "image_pull_policy": launcher["imagePullPolicy"],
        "service_account_name": values["global"]["serviceAccountName"],
        "dagster_home": {"env": "DAGSTER_HOME"},
        "instance_config_map": {"env": "DAGSTER_K8S_INSTANCE_CONFIG_MAP"},
        "postgres_password_secret": {"env": "DAGSTER_K8S_PG_PASSWORD_SECRET"},
        "env_config_maps": [{"env": "DAGSTER_K8S_PIPELINE_RUN_ENV_CONFIGMAP"}] + [m["name"] for m in launcher["envConfigMaps"]],
    }
    config.update({snake: launcher[camel] for camel, snake in (("envSecrets", "env_secrets"), ("envVars", "env_vars")) if launcher[camel]})
    config.update(
        {snake: launcher[camel] for camel, snake in (("volumeMounts", "volume_mounts"), ("volumes", "volumes")) if launcher[camel]}
    )
    if launcher.get("resources"):
        config["resources"] = launcher["resources"]
    out["run_launcher"] = {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": config}
    monitoring = values["dagsterDaemon"]["runMonitoring"]
    out["run_monitoring"] = {"enabled": monitoring["enabled"], "start_timeout_seconds": monitoring["startTimeoutSeconds"]}
    retries = values["dagsterDaemon"]["runRetries"]
    out["run_retries"] = {"enabled": retries["enabled"], "max_retries": retries["maxRetries"]}
    out["telemetry"] = {"enabled": values["telemetry"]["enabled"]}
    return out


def user_container_context(values: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The container context the chart gives the code location's runs (dagsterUserDeployments.k8sContainerContext)."""
    deployment = values["dagster-user-deployments"]["deployments"][0]
    k8s: dict[str, Any] = {
        "image_pull_policy": deployment["image"]["pullPolicy"],
        "env_config_maps": [f"{RELEASE}-{deployment['name']}-user-env"],
        "namespace": namespace,
        "service_account_name": values["global"]["serviceAccountName"],
    }
    for camel, snake in (("volumeMounts", "volume_mounts"), ("volumes", "volumes"), ("resources", "resources"), ("labels", "labels")):
        if deployment.get(camel):
            k8s[snake] = deployment[camel]
    return {"k8s": k8s}


def k8s_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> K8sRunLauncher:
    """The run launcher of deploy/k8s/dagster.yaml, built through dagster-k8s's schema with a local kubeconfig.

    In the cluster it loads the in-cluster config; here a kubeconfig naming a loopback API server stands
    in for it (nothing is contacted while the launcher is built).
    """
    for name, value in CHART_ENV.items():
        monkeypatch.setenv(name, value)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "test", "user": {"token": "test"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    section = read_yaml(K8S / "dagster.yaml")["run_launcher"]
    config = {**section["config"], "load_incluster_config": False, "kubeconfig_file": str(kubeconfig)}
    launcher = ConfigurableClassData(section["module"], section["class"], yaml.safe_dump(config)).rehydrate(as_type=K8sRunLauncher)
    return launcher


# ---- deploy/dagster.yaml --------------------------------------------------------------------------------


def test_local_instance_passes_dagsters_schema_and_reads_postgres_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    for name, value in PG_ENV.items():
        monkeypatch.setenv(name, value)
    config, _ = dagster_instance_config(str(DEPLOY))
    postgres_db = config["storage"]["postgres"]["postgres_db"]
    fields = {"hostname": "DAGSTER_PG_HOST", "port": "DAGSTER_PG_PORT", "username": "DAGSTER_PG_USERNAME"}
    fields |= {"password": "DAGSTER_PG_PASSWORD", "db_name": "DAGSTER_PG_DB"}
    assert {field: postgres_db[field] for field in fields} == {field: {"env": env} for field, env in fields.items()}

    url = pg_url_from_config(validate(PostgresRunStorage.config_type(), config["storage"]["postgres"]))
    assert url == "postgresql+psycopg2://dagster:secret@db.example:6543/dagster"
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)  # imports the driver the URL names; connects to nothing
    assert engine.dialect.driver == "psycopg2"
    engine.dispose()


def test_local_instance_queues_runs_with_one_embedding_run_at_a_time(monkeypatch: pytest.MonkeyPatch):
    for name, value in PG_ENV.items():
        monkeypatch.setenv(name, value)
    ref = InstanceRef.from_dir(str(DEPLOY))
    coordinator = ref.run_coordinator
    assert isinstance(coordinator, dg.QueuedRunCoordinator)
    queue = coordinator.get_run_queue_config()
    assert queue.max_concurrent_runs == 2 and [dict(limit) for limit in queue.tag_concurrency_limits] == [HEAVY_LIMIT]
    assert type(ref.run_launcher).__name__ == "DefaultRunLauncher"  # runs are processes on the daemon's host


def test_a_missing_connection_variable_is_an_error_that_names_it(monkeypatch: pytest.MonkeyPatch):
    for name, value in PG_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DAGSTER_PG_HOST")
    with pytest.raises(DagsterInvalidConfigError, match="DAGSTER_PG_HOST"):
        InstanceRef.from_dir(str(DEPLOY)).storage  # noqa: B018 - the property builds the storage from config


# ---- deploy/code_location.py -------------------------------------------------------------------------


def test_multiprocess_is_the_default_and_every_other_definition_is_kept():
    code_location = load_code_location()
    choice = code_location.executor_from_environment({})
    assert (choice.name, choice.max_concurrent) == ("multiprocess", 2)
    base = project_defs()
    production = code_location.production_definitions(base, choice)
    assert production.executor.name == "multiprocess"
    assert production.resolve_job_def("weekly_evaluation").executor_def.name == "multiprocess"
    from dagster._record import as_dict

    kept, new = as_dict(base), as_dict(production)
    assert {k: v for k, v in new.items() if k != "executor"} == {k: v for k, v in kept.items() if k != "executor"}


@pytest.mark.parametrize("name", ["in_process", "multiprocess", "k8s"])
def test_each_executor_of_the_registry_loads(name: str):
    code_location = load_code_location()
    choice = code_location.executor_from_environment({code_location.EXECUTOR_ENV: name, code_location.MAX_CONCURRENT_ENV: "3"})
    executor = code_location.EXECUTORS[choice.name](choice.max_concurrent)
    assert executor.name == name


def test_run_config_sets_the_step_count_and_the_embedding_step_limit_stays():
    code_location = load_code_location()
    production = code_location.production_definitions(project_defs(), code_location.ExecutorChoice("multiprocess", 2))
    job = production.resolve_job_def("weekly_evaluation")
    # what the multiprocess executor receives: the run's step count (else the deployment's), and always the heavy-step limit
    for run_config, steps in (({"execution": {"config": {"max_concurrent": 4}}}, 4), ({}, 2)):
        executor_config = dg.validate_run_config(job, run_config)["execution"]["multiprocess"]
        assert executor_config["max_concurrent"] == steps
        assert executor_config["tag_concurrency_limits"] == [HEAVY_LIMIT]
    with pytest.raises(DagsterInvalidConfigError):
        dg.validate_run_config(job, {"execution": {"config": {"max_concurrent": "four"}}})


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"RETRIEVAL_PIPELINE_EXECUTOR": "celery"}, "RETRIEVAL_PIPELINE_EXECUTOR='celery' is not an executor"),
        ({"RETRIEVAL_PIPELINE_MAX_CONCURRENT": "0"}, "RETRIEVAL_PIPELINE_MAX_CONCURRENT='0' must be a positive integer"),
        ({"RETRIEVAL_PIPELINE_MAX_CONCURRENT": "two"}, "RETRIEVAL_PIPELINE_MAX_CONCURRENT='two' must be a positive integer"),
    ],
)
def test_bad_executor_settings_name_the_variable(environ: dict[str, str], message: str):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_code_location().executor_from_environment(environ)


def test_weekly_job_runs_carry_the_tag_that_the_queue_limits():
    tags = project_defs().resolve_job_def("weekly_evaluation").run_tags
    if HEAVY_LIMIT["key"] not in tags:
        pytest.skip(
            "weekly_evaluation gives its runs no retrieval_pipeline/heavy tag yet: add "
            "run_tags={'retrieval_pipeline/heavy': 'embedding'} to define_asset_job in retrieval_pipeline/defs/schedules.py"
        )
    assert tags[HEAVY_LIMIT["key"]] == HEAVY_LIMIT["value"]


# ---- deploy/k8s: instance, Helm values, run pod ------------------------------------------------------


def test_k8s_instance_passes_dagsters_schema_and_builds_the_k8s_run_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name, value in CHART_ENV.items():
        monkeypatch.setenv(name, value)
    config, _ = dagster_instance_config(str(K8S))
    for storage in ("run_storage", "event_log_storage", "schedule_storage"):
        processed = validate(PostgresRunStorage.config_type(), config[storage]["config"])
        assert processed["postgres_db"]["password"] == "secret"  # from DAGSTER_PG_PASSWORD, as the chart sets it
    launcher = k8s_launcher(tmp_path, monkeypatch)
    assert launcher.job_namespace == NAMESPACE and launcher.service_account_name == "dagster"
    assert launcher.dagster_home == CHART_ENV["DAGSTER_HOME"] and launcher.instance_config_map == "dagster-instance"
    assert launcher.resources == {"requests": {"cpu": "2", "memory": "6Gi"}, "limits": {"memory": "12Gi"}}


def test_helm_values_use_only_keys_the_chart_documents():
    values = read_yaml(K8S / "values.yaml")
    assert undocumented_keys(values, CHART_STRUCTURE) == []
    assert K8S_RUN_LAUNCHER_REQUIRED <= set(values["runLauncher"]["config"]["k8sRunLauncher"])
    # the checker does catch a misspelt key
    assert undocumented_keys({"dagsterDaemon": {"runCordinator": {}}}, CHART_STRUCTURE) == ["dagsterDaemon.runCordinator"]


def test_helm_values_render_the_k8s_instance_and_pass_dagsters_schemas(monkeypatch: pytest.MonkeyPatch):
    for name, value in CHART_ENV.items():
        monkeypatch.setenv(name, value)
    rendered = chart_instance(read_yaml(K8S / "values.yaml"), NAMESPACE)
    written = read_yaml(K8S / "dagster.yaml")
    assert {key: written[key] for key in rendered} == rendered
    schemas = {"run_coordinator": dg.QueuedRunCoordinator.config_type(), "run_launcher": K8sRunLauncher.config_type()}
    for section, schema in schemas.items():
        validate(schema, rendered[section]["config"])
    assert rendered["run_coordinator"]["config"]["tag_concurrency_limits"] == [HEAVY_LIMIT]
    local = read_yaml(DEPLOY / "dagster.yaml")
    assert local["run_coordinator"]["config"]["tag_concurrency_limits"] == [HEAVY_LIMIT]  # the same limit on one host


def test_a_run_pod_built_as_the_launcher_builds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    values = read_yaml(K8S / "values.yaml")
    deployment = values["dagster-user-deployments"]["deployments"][0]
    image = f"{deployment['image']['repository']}:{deployment['image']['tag']}"
    launcher = k8s_launcher(tmp_path, monkeypatch)
    origin = RepositoryPythonOrigin(
        executable_path="/usr/local/bin/python",
        code_pointer=FileCodePointer(deployment["dagsterApiGrpcArgs"][1], "defs", deployment["dagsterApiGrpcArgs"][3]),
        container_image=image,
        entry_point=["dagster"],
        container_context=user_container_context(values, NAMESPACE),  # validated by dagster-k8s's container-context schema
    )
    run = dg.DagsterRun(job_name="weekly_evaluation", run_id="0" * 32, job_code_origin=JobPythonOrigin("weekly_evaluation", origin))
    context = launcher.get_container_context_for_run(run)
    job = construct_dagster_k8s_job(
        job_config=context.get_k8s_job_config(job_image=image, run_launcher=launcher),
        args=["dagster", "api", "execute_run", "{}"],
        job_name="dagster-run-test",
        pod_name="dagster-run-test",
        component="run_worker",
        user_defined_k8s_config=context.run_k8s_config,
    )
    pod = job.spec.template.spec
    container = pod.containers[0]
    assert container.image == image and pod.service_account_name == "dagster"
    assert {m.mount_path for m in container.volume_mounts} >= {"/opt/dagster/app/data/out", "/opt/dagster/app/data/cache"}
    claims = {v.name: v.persistent_volume_claim.claim_name for v in pod.volumes if v.persistent_volume_claim}
    assert claims == {"data-out": "retrieval-data-out", "data-cache": "retrieval-data-cache", "shared-data": "retrieval-shared-data"}
    assert container.resources.requests == {"cpu": "2", "memory": "6Gi"}
    config_maps = {source.config_map_ref.name for source in container.env_from if source.config_map_ref}
    assert {"dagster-pipeline-env", f"{RELEASE}-{deployment['name']}-user-env"} <= config_maps
    assert kubernetes.client.ApiClient().sanitize_for_serialization(job)["kind"] == "Job"


@pytest.mark.skipif(
    shutil.which("helm") is None or not os.environ.get("DAGSTER_HELM_CHART"),
    reason="opt-in: needs `helm` on PATH and DAGSTER_HELM_CHART (a path to, or a reference of, the dagster chart 1.13.27)",
)
def test_helm_renders_the_same_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    chart = os.environ["DAGSTER_HELM_CHART"]
    command = ["helm", "template", RELEASE, chart, "--namespace", NAMESPACE, "-f", str(K8S / "values.yaml")]
    if not Path(chart).is_dir():  # a chart reference: the chart version is the Dagster version
        command += ["--version", importlib.metadata.version("dagster")]
    manifests = list(yaml.safe_load_all(subprocess.run(command, check=True, capture_output=True, text=True, timeout=120).stdout))
    config_map = next(m for m in manifests if m and m["kind"] == "ConfigMap" and m["metadata"]["name"] == f"{RELEASE}-instance")
    (tmp_path / "dagster.yaml").write_text(config_map["data"]["dagster.yaml"])
    for name, value in CHART_ENV.items():
        monkeypatch.setenv(name, value)
    rendered, _ = dagster_instance_config(str(tmp_path))
    written = read_yaml(K8S / "dagster.yaml")
    assert rendered["run_coordinator"] == written["run_coordinator"]
    assert {k: rendered["run_launcher"]["config"].get(k) for k in written["run_launcher"]["config"]} == written["run_launcher"]["config"]


# ---- deploy/k8s: image and volumes ---------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (K8S / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_pins_what_is_installed_and_serves_the_code_location_the_chart_runs():
    instructions = dockerfile_instructions()
    base = next(args for op, args in instructions if op == "FROM")
    assert base.startswith(f"python:{sys.version_info.major}.{sys.version_info.minor}-")  # the Python the tests run on
    for op, args in instructions:
        if op == "COPY":
            for source in args.split()[:-1]:
                assert (PROJECT_ROOT / source).exists(), f"COPY {source}: not in the project"
    pip = " ".join(args for op, args in instructions if op == "RUN" and "pip install" in args)
    pins = dict(re.findall(r"([A-Za-z0-9_.-]+)==([0-9][^\s'\"]*)", pip))
    for package in ("dagster-postgres", "dagster-k8s"):
        assert pins[package] == importlib.metadata.version(package), package
        # the library version that goes with the installed Dagster (0.29.x with 1.13.x), as the library itself requires
        assert f"dagster=={importlib.metadata.version('dagster')}" in (importlib.metadata.requires(package) or [])
    assert f"torch=={pins['torch']}" in (importlib.metadata.requires("retrieval_pipeline") or [])  # the project's own pin

    workdir = next(args for op, args in instructions if op == "WORKDIR")
    command = yaml.safe_load(next(args for op, args in instructions if op == "CMD"))
    assert command[:3] == ["dagster", "api", "grpc"]
    grpc_args = command[command.index("-f") :]
    deployment = read_yaml(K8S / "values.yaml")["dagster-user-deployments"]["deployments"][0]
    assert grpc_args == deployment["dagsterApiGrpcArgs"] == ["-f", "deploy/code_location.py", "-d", workdir]
    assert str(deployment["port"]) == command[command.index("-p") + 1] == next(args for op, args in instructions if op == "EXPOSE")
    assert (PROJECT_ROOT / grpc_args[1]).is_file()


def test_volume_claims_are_valid_kubernetes_objects_and_cover_the_mounted_volumes():
    claims = {}
    for document in yaml.safe_load_all((K8S / "volumes.yaml").read_text()):
        claim = k8s_model_from_dict(
            kubernetes.client.V1PersistentVolumeClaim, k8s_snake_case_dict(kubernetes.client.V1PersistentVolumeClaim, document)
        )
        claims[claim.metadata.name] = claim
    deployment = read_yaml(K8S / "values.yaml")["dagster-user-deployments"]["deployments"][0]
    for volume in deployment["volumes"]:
        model = k8s_model_from_dict(kubernetes.client.V1Volume, k8s_snake_case_dict(kubernetes.client.V1Volume, volume))
        assert model.persistent_volume_claim.claim_name in claims, volume["name"]
    writable = {"retrieval-data-out", "retrieval-data-cache"}  # shared by run pods and the code server
    assert all("ReadWriteMany" in claims[name].spec.access_modes for name in writable)
