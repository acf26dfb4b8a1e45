"""Hostile proof files: each must be contained, reported as a failed proof, and leave the host unchanged."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from retrieval_pipeline.core.verifier import sandbox as sandbox_module
from retrieval_pipeline.core.verifier.sandbox import SandboxError, SandboxSettings, run_pytest


def test_missing_bwrap_is_a_clear_error_not_a_fallback(monkeypatch):
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="apt-get install -y bubblewrap"):
        run_pytest("def test_x():\n    pass\n", "test_x.py")


def test_network_is_unreachable(sandbox):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept_loop() -> None:
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    hostile = f"""
import socket

def test_reach_the_host():
    s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    s.sendall(b"leak")
    s.close()
"""
    try:
        execution = run_pytest(hostile, "test_net.py", sandbox)
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass  # the listener itself works from the host
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
    assert execution.outcome == "failed" and not execution.passed
    assert "ConnectionRefusedError" in execution.stdout or "Network is unreachable" in execution.stdout
    assert len(accepted) == 1  # only the host's own check connected


def test_writes_outside_the_workdir_do_not_reach_the_host(sandbox, project_root):
    host_dir = Path(tempfile.mkdtemp(prefix="rp_hostile_"))
    marker = f"rp_hostile_{os.getpid()}_{time.monotonic_ns()}"
    targets = [host_dir / marker, project_root / marker, Path("/root") / marker, Path("/etc") / marker]
    hostile = f"""
import ctypes, os, subprocess

TARGETS = {[str(t) for t in targets]!r}

def test_escape():
    # try to get write access back: remount the read-only root, as bwrap-as-root without --cap-drop allows
    subprocess.run(["mount", "-o", "remount,bind,rw", "/"], capture_output=True)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount(b"none", b"/", None, 32 | 4096 | 16384, None)  # MS_REMOUNT|MS_BIND|MS_REC
    wrote = []
    for path in TARGETS:
        try:
            with open(path, "w") as handle:
                handle.write("escaped")
            wrote.append(path)
        except OSError:
            pass
    assert wrote == TARGETS
"""
    try:
        execution = run_pytest(hostile, "test_write.py", sandbox)
        assert execution.outcome == "failed" and not execution.passed
        for target in targets:
            assert not target.exists(), f"the sandbox wrote {target}"
    finally:
        for target in targets:
            if target.exists():
                target.unlink()
        host_dir.rmdir()


def test_environment_secrets_are_not_visible(sandbox, monkeypatch):
    secret = f"s3cr3t-{time.monotonic_ns()}"
    monkeypatch.setenv("RP_SANDBOX_TEST_SECRET", secret)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    hostile = """
import os

def test_read_secrets():
    leaked = {k: v for k, v in os.environ.items() if "SECRET" in k or "API_KEY" in k}
    parent = open("/proc/1/environ", "rb").read().decode(errors="replace")
    print("ENV", sorted(os.environ))
    assert leaked or "s3cr3t" in parent
"""
    execution = run_pytest(hostile, "test_env.py", sandbox)
    assert execution.outcome == "failed"
    assert secret not in execution.stdout and secret not in execution.stderr


def test_fork_bomb_is_contained_by_the_process_limit(sandbox):
    settings = SandboxSettings(max_processes=32, timeout_s=20)
    hostile = """
import os, time

def test_bomb():
    deadline = time.monotonic() + 4
    refused = 0
    child = False
    for _ in range(3000):  # bounded, but every child keeps forking too
        if time.monotonic() > deadline:
            break
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            continue
        if pid == 0:
            child = True
    if child:
        time.sleep(0.5)
        os._exit(0)
    assert refused == 0, f"fork refused {refused} times"
"""
    started = time.monotonic()
    execution = run_pytest(hostile, "test_bomb.py", settings)
    assert not execution.passed and execution.outcome in ("failed", "timeout", "killed")
    assert execution.limit == "processes" or "fork refused" in execution.stdout
    assert time.monotonic() - started < 30
    # the host is fine: it can still start processes, and nothing of the run is left
    assert subprocess.run(["true"], check=False).returncode == 0
    leftovers = subprocess.run(["pgrep", "-f", "test_bomb.py"], capture_output=True, text=True).stdout.split()
    assert leftovers == []


def test_infinite_loop_is_killed_by_the_timeout(sandbox):
    settings = SandboxSettings(timeout_s=3, cpu_s=60)
    started = time.monotonic()
    execution = run_pytest("def test_loop():\n    while True:\n        pass\n", "test_loop.py", settings)
    assert execution.outcome == "timeout" and execution.limit == "wall_clock" and not execution.passed
    assert time.monotonic() - started < 15


def test_cpu_limit_kills_a_busy_loop(sandbox):
    settings = SandboxSettings(timeout_s=20, cpu_s=2)
    execution = run_pytest("def test_loop():\n    while True:\n        pass\n", "test_cpu.py", settings)
    assert execution.outcome == "killed" and execution.limit == "cpu"


def test_memory_hog_is_stopped_by_the_memory_limit(sandbox):
    settings = SandboxSettings(memory_mb=512, timeout_s=20)
    hostile = """
def test_hog():
    blocks = []
    for _ in range(64):  # up to 8 GiB, far over the limit
        blocks.append(bytearray(128 * 2**20))
"""
    execution = run_pytest(hostile, "test_hog.py", settings)
    assert not execution.passed and execution.outcome in ("failed", "killed")
    assert execution.limit == "memory"


def test_huge_output_is_truncated(sandbox):
    settings = SandboxSettings(max_output_chars=2000)
    execution = run_pytest("def test_out():\n    print('x' * 10**6)\n    assert False\n", "test_out.py", settings)
    assert execution.outcome == "failed"
    assert len(execution.stdout) < 2100 and "truncated" in execution.stdout


def test_each_run_has_a_fresh_workdir_removed_afterwards(sandbox):
    source = "import os\n\ndef test_cwd():\n    open('left.txt', 'w').write(os.getcwd())\n    print('CWD', os.getcwd())\n    assert False\n"
    first = run_pytest(source, "test_cwd.py", sandbox)
    second = run_pytest(source, "test_cwd.py", sandbox)
    cwd1 = first.stdout.split("CWD ")[1].split()[0]
    cwd2 = second.stdout.split("CWD ")[1].split()[0]
    assert cwd1 != cwd2
    assert not Path(cwd1).exists() and not Path(cwd2).exists()
