"""Two first runs on a fresh ``DAGSTER_HOME`` at once: the home is initialised once, under a lock (issue 39.4).

Before, one of two (or more) processes opening a fresh home together failed with ``sqlalchemy.exc.OperationalError:
table alembic_version already exists``: four processes released together failed 1 or 2 of 4 in three of three trials.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
OPEN = """
import os, sys, time
from pathlib import Path
from retrieval_pipeline.cli.instance import home_instance
go = Path(sys.argv[1])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.005)
with home_instance() as instance:
    instance.get_runs_count()
print("opened")
"""


@pytest.mark.integration
@pytest.mark.parametrize("trial", range(2))
def test_first_opens_of_a_fresh_home_at_once_all_succeed(tmp_path: Path, trial: int) -> None:
    home, go = tmp_path / "fresh_home", tmp_path / "go"
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(PROJECT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, str(go)], cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    for proc in procs:  # every process has imported Dagster and waits for the file
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0 and out.strip() == "opened", err[-2000:]
    assert (home / "history" / "runs.db").exists()
