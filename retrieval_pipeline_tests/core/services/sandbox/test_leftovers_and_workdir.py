"""A run cannot fill the host's disk through its working directory, and what a killed run leaves is swept by the next."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from retrieval_pipeline.core.services.sandbox import cgroups, leftovers
from retrieval_pipeline.core.services.sandbox.bubblewrap import run_in_sandbox
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings

FILL = """import errno, time
written = 0
error = None
try:
    for i in range(24):
        with open(f"fill_{i}", "wb") as handle:
            handle.write(b"x" * (3 * 2**20))
        written += 3
except OSError as exc:
    error = errno.errorcode.get(exc.errno)
print("WROTE", written, "ERROR", error, flush=True)
time.sleep(1.5)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the working directory's tmpfs is mounted by a root verifier only")
def test_a_run_that_fills_its_working_directory_gets_enospc_and_the_host_disk_is_untouched(sandbox):
    settings = SandboxSettings(python=sandbox.python, file_mb=4, workdir_mb=16, timeout_s=30)
    host = tempfile.gettempdir()
    before = shutil.disk_usage(host).used
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], shutil.disk_usage(host).used)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        execution = run_in_sandbox({"fill.py": FILL}, [str(settings.python), "fill.py"], settings)
    finally:
        stop.set()
        sampler.join()
    words = execution.stdout.split()
    written, error = int(words[words.index("WROTE") + 1]), words[words.index("ERROR") + 1]
    assert error == "ENOSPC" and written <= 16, execution.stdout  # 24 files of 3 MB, each under file_mb: the cap bound
    # 72 MB on the host's disk without the tmpfs; other processes write too, so a tolerance of 8 MB
    assert peak[0] - before < 8 * 2**20, (peak[0] - before) / 2**20


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_next_run_sweeps_what_a_dead_run_left_and_only_that(tmp_path: Path):
    dead = _dead_pid()
    assert leftovers.start_time(dead) is None
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_folder = tmp_path / f"{leftovers.PREFIX}{dead}_12345_abc"
        live_folder = tmp_path / f"{leftovers.PREFIX}{leftovers.owner_tag(live.pid)}_def"
        reused_pid = tmp_path / f"{leftovers.PREFIX}{live.pid}_1_ghi"  # the live pid, but another start time: dead
        other = tmp_path / "rp_sandbox_unnamed"  # not named by an owner: never touched
        for folder in (dead_folder, live_folder, reused_pid, other):
            (folder / "work").mkdir(parents=True)
            (folder / "work" / "left.txt").write_text("x")
        removed = leftovers.sweep(tmp_path, cgroup_parents=[])
        assert sorted(removed) == sorted([str(dead_folder), str(reused_pid)])
        assert live_folder.exists() and other.exists() and not dead_folder.exists() and not reused_pid.exists()
    finally:
        live.kill()
        live.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs and making cgroups need root")
def test_a_dead_run_s_mounted_workdir_and_cgroups_are_swept(tmp_path: Path):
    dead = _dead_pid()
    folder = tmp_path / f"{leftovers.PREFIX}{dead}_7_run"
    (folder / "work").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "rp_sandbox", str(folder / "work")], check=True)
    (folder / "work" / "left.txt").write_text("x")
    parents = [p for p in (cgroups.pids_cgroup_parent(),) if p is not None]
    made = []
    for parent in parents:
        for owner in (f"{dead}_7", leftovers.owner_tag()):
            group = parent / f"{leftovers.PREFIX}{owner}_0_{time.monotonic_ns()}"
            group.mkdir()
            made.append(group)
    try:
        removed = leftovers.sweep(tmp_path, cgroup_parents=parents)
        assert str(folder) in removed and not folder.exists()
        assert not [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(folder) in line]
        for group in made:
            assert group.exists() == (leftovers.owner_tag() in group.name), group  # only the dead owner's
    finally:
        for group in made:
            if group.exists():
                group.rmdir()
        subprocess.run(["umount", "-l", str(folder / "work")], check=False, capture_output=True)
