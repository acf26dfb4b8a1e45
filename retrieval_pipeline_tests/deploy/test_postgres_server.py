"""The test server's helpers, on fakes: choosing the binaries, refusing to install without root, naming the variables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from retrieval_pipeline_tests.deploy import postgres_server
from retrieval_pipeline_tests.deploy.postgres_server import PostgresServer, PostgresUnavailable, find_bin_dir, install_postgresql

DEPLOY_INSTANCE = Path(__file__).resolve().parents[2] / "deploy" / "dagster.yaml"


def fake_versions(root: Path, versions: dict[str, tuple[str, ...]]) -> None:
    for version, binaries in versions.items():
        (root / version / "bin").mkdir(parents=True)
        for binary in binaries:
            (root / version / "bin" / binary).write_text("")


def env_names(node: object) -> set[str]:
    """Every variable an ``{env: NAME}`` entry reads, anywhere in a YAML tree."""
    if isinstance(node, dict):
        if set(node) == {"env"}:
            return {node["env"]}
        return {name for value in node.values() for name in env_names(value)}
    if isinstance(node, list):
        return {name for value in node for name in env_names(value)}
    return set()


def test_the_newest_complete_version_is_used(tmp_path: Path):
    fake_versions(tmp_path, {"9.6": ("initdb", "postgres"), "15": ("initdb", "postgres"), "16": ("initdb",)})
    assert find_bin_dir(tmp_path) == tmp_path / "15" / "bin"  # 16 has no server binary; 15 > 9.6 numerically
    assert find_bin_dir(tmp_path / "absent") is None


def test_without_root_the_install_is_refused_with_the_command_to_run(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(postgres_server.os, "geteuid", lambda: 1000)
    with pytest.raises(PostgresUnavailable, match="apt-get install -y postgresql"):
        install_postgresql()


def test_the_server_sets_exactly_the_variables_the_deploy_instance_reads():
    server = PostgresServer("127.0.0.1", 5999, "dagster", "pw", pid=1, data_dir=Path("/nonexistent"), version="15")
    env = server.dagster_env("db1")
    assert set(env) == env_names(yaml.safe_load(DEPLOY_INSTANCE.read_text()))
    assert env["DAGSTER_PG_PORT"] == "5999" and env["DAGSTER_PG_DB"] == "db1"


def test_a_database_name_that_is_not_a_plain_identifier_is_refused_before_connecting():
    server = PostgresServer("127.0.0.1", 1, "dagster", "pw", pid=1, data_dir=Path("/nonexistent"), version="15")
    with pytest.raises(ValueError, match="not a plain identifier"):
        server.create_database('x"; DROP DATABASE postgres; --')
