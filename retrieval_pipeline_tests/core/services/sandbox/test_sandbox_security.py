"""Hostile proof files: each must be contained, reported as a failed proof, and leave the host unchanged."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from retrieval_pipeline.core.services.sandbox import bubblewrap as sandbox_module
from retrieval_pipeline.core.services.sandbox import cgroups
from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest
from retrieval_pipeline.core.services.sandbox.layout import environment_paths
from retrieval_pipeline.core.services.sandbox.redaction import cap_text, redact_secrets, safe_text
from retrieval_pipeline.core.services.sandbox.settings import SandboxError, SandboxSettings
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report
from retrieval_pipeline.core.verifier.verdicts.verdict import OUTPUT_TAIL_CHARS
from retrieval_pipeline.core.verifier.verify import verify_question
from retrieval_pipeline_tests.fakes.listener import listener


def test_missing_bwrap_is_a_clear_error_not_a_fallback(monkeypatch):
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="apt-get install -y bubblewrap"):
        run_pytest("def test_x():\n    pass\n", "test_x.py")


def test_network_is_unreachable(sandbox):
    with listener(30) as (port, accepted):
        hostile = f"""
import socket

def test_reach_the_host():
    s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    s.sendall(b"leak")
    s.close()
"""
        execution = run_pytest(hostile, "test_net.py", sandbox)
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass  # the listener itself works from the host
        time.sleep(0.3)
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


# --------------------------------------------------------------------------------------------------
# The proof runs as an unprivileged host user and sees none of the host's secrets

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: checks files the sandbox user does not own")


def _results(stdout: str) -> dict[str, object]:
    """The ``RESULTS {...}`` line a proof printed, parsed."""
    line = next(line for line in stdout.splitlines() if line.startswith("RESULTS "))
    return ast.literal_eval(line[len("RESULTS ") :])


def _everything(execution) -> str:
    return execution.stdout + execution.stderr + json.dumps(execution.artifacts)


def _snapshot(folder: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every path under ``folder`` (itself included): mode, owner and, for files, the content."""
    found = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        info = path.lstat()
        found[str(path)] = (info.st_mode, info.st_uid, path.read_bytes() if path.is_file() else None)
    return found


@needs_root
def test_the_sandbox_user_is_not_host_root(sandbox, monkeypatch):
    """A file the proof creates is owned, on the host, by the sandbox user (65534), not by root."""
    owners: list[tuple[int, int]] = []
    real_rmtree = shutil.rmtree

    def inspect_then_remove(path, *args, **kwargs):
        made = Path(path) / "work" / "made_by_proof.txt"
        if made.exists():
            owners.append((made.stat().st_uid, made.stat().st_gid))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(sandbox_module.shutil, "rmtree", inspect_then_remove)
    hostile = """
import os

def test_become_root():
    open("made_by_proof.txt", "w").write("x")
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    results = {"uid": os.getuid(), "cap_eff": status["CapEff"].strip(), "groups": os.getgroups()}
    try:
        os.setuid(0)
        results["setuid0"] = "done"
    except OSError as exc:
        results["setuid0"] = type(exc).__name__
    print("RESULTS", results)
    assert results["setuid0"] == "done"
"""
    execution = run_pytest(hostile, "test_root.py", sandbox)
    assert execution.outcome == "failed", f"the proof became root ({execution.outcome})"
    # uid 0 is not even mapped in the proof's user namespace (EINVAL); without capabilities it would be EPERM
    assert _results(execution.stdout) == {"uid": 65534, "cap_eff": "0000000000000000", "groups": [], "setuid0": "OSError"}
    assert owners == [(65534, 65534)]


@needs_root
@pytest.mark.parametrize("top_mode", [0o755, 0o700], ids=["shown-directly", "staged-0700-folder"])
def test_a_root_only_file_stays_unreadable_where_it_is_shown(sandbox, top_mode):
    """A 0600 file, and a 0600 file in a 0700 folder, shown to the proof: the kernel refuses both."""
    secret = f"rp-secret-{uuid.uuid4().hex}"
    top = Path(tempfile.mkdtemp(prefix="rp_private_"))
    try:
        (top / "private").mkdir(mode=0o700)
        for path in (top / "private" / "secret.txt", top / "loose.txt"):
            path.write_text(secret)
            path.chmod(0o600)
        (top / "public.txt").write_text("public-ok")
        (top / "public.txt").chmod(0o644)
        top.chmod(top_mode)
        before = _snapshot(top)
        hostile = f"""
import os

TOP = {str(top)!r}

def test_read_root_files():
    results = {{"exists": os.path.isdir(TOP)}}
    for name in ["public.txt", "loose.txt", "private/secret.txt", "private"]:
        path = os.path.join(TOP, name)
        try:
            results[name] = os.listdir(path) if name == "private" else open(path).read()
        except OSError as exc:
            results[name] = type(exc).__name__
    print("RESULTS", results)
    assert all(value != "PermissionError" for value in results.values())
"""
        settings = replace(sandbox, extra_ro_binds=(top,))
        execution = run_pytest(hostile, "test_root_files.py", settings)
        assert execution.outcome == "failed", f"the proof read root's 0600 files ({execution.outcome})"
        results = _results(execution.stdout)
        assert secret not in _everything(execution)
        assert results["exists"] is True  # shown, so the refusals below are permission checks
        assert results["loose.txt"] == results["private/secret.txt"] == results["private"] == "PermissionError"
        assert results["public.txt"] == ("public-ok" if top_mode == 0o755 else "PermissionError")
        assert _snapshot(top) == before  # the host is unchanged
    finally:
        shutil.rmtree(top)


#: Host files a hostile proof goes after; each is compared before and after it ran.
HOST_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/passwd")


def _host_files(paths) -> dict[str, tuple[int, int, int, str] | None]:
    """Mode, owner, size and sha256 of each host file (None when absent or unreadable here)."""
    found = {}
    for name in paths:
        path = Path(name)
        try:
            info, data = path.stat(), path.read_bytes()
        except OSError:
            found[name] = None
            continue
        found[name] = (info.st_mode, info.st_uid, info.st_size, hashlib.sha256(data).hexdigest())
    return found


def test_etc_shows_no_secret_of_the_host(sandbox):
    """/etc/shadow, gshadow, sudoers, ssh: absent; /etc holds only what Python needs."""
    hostile = """
import os

def test_read_etc():
    results = {"etc": sorted(os.listdir("/etc")), "passwd": open("/etc/passwd").read().splitlines()}
    for path in ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/ssl/private"]:
        try:
            results[path] = os.listdir(path) if os.path.isdir(path) else open(path).read()
        except OSError as exc:
            results[path] = type(exc).__name__
    print("RESULTS", results)
    assert isinstance(results["/etc/shadow"], str) and results["/etc/shadow"] != "FileNotFoundError"
"""
    host_before = _host_files(HOST_SECRETS)
    execution = run_pytest(hostile, "test_etc.py", sandbox)
    assert _host_files(HOST_SECRETS) == host_before  # the host's files are unchanged (mode, owner, content)
    assert execution.outcome == "failed", f"the proof read /etc/shadow ({execution.outcome})"
    results = _results(execution.stdout)
    assert results["etc"] == ["group", "hosts", "ld.so.cache", "localtime", "nsswitch.conf", "passwd"]
    assert [line.split(":")[0] for line in results["passwd"]] == ["root", "nobody"]
    for path in ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/ssl/private"]:
        assert results[path] == "FileNotFoundError"
    if os.access("/etc/shadow", os.R_OK):  # no line of the host's shadow appears anywhere
        for line in Path("/etc/shadow").read_text().splitlines():
            assert line.strip() == "" or line not in _everything(execution)


def test_root_home_work_and_the_project_are_not_visible(sandbox, project_root):
    """/root (listing, a file in it), /home, the project's files and package: none of them is there."""
    root_secret = Path("/root") / f"rp_secret_{uuid.uuid4().hex}.txt"
    secret = f"rp-root-secret-{uuid.uuid4().hex}"
    made = False
    if os.geteuid() == 0:
        root_secret.write_text(secret)
        root_secret.chmod(0o600)
        made = True
    root_before = sorted(os.listdir("/root")) if os.access("/root", os.R_OK) else None
    hostile = f"""
import importlib, os

def test_look_around():
    results = {{}}
    for path in ["/root", "/home", {str(project_root)!r}]:
        try:
            results[path] = sorted(os.listdir(path))
        except OSError as exc:
            results[path] = type(exc).__name__
    for path in [{str(root_secret)!r}, {str(project_root / "pyproject.toml")!r}, "/root/.bashrc", "/root/.ssh/id_rsa"]:
        try:
            results[path] = open(path).read()
        except OSError as exc:
            results[path] = type(exc).__name__
    try:
        importlib.import_module("retrieval_pipeline")
        results["project_package"] = "imported"
    except ImportError as exc:
        results["project_package"] = type(exc).__name__
    print("RESULTS", results)
    assert "imported" in results.values()
"""
    try:
        execution = run_pytest(hostile, "test_look.py", sandbox)
        assert execution.outcome == "failed", f"the proof imported the project ({execution.outcome})"
        results = _results(execution.stdout)
        assert secret not in _everything(execution)
        # /root holds at most the folders leading to the interpreter's installation
        shown = {p.relative_to("/root").parts[0] for p in environment_paths(sandbox.python)
                 if p.is_relative_to("/root")}  # fmt: skip
        assert results["/root"] in ("FileNotFoundError", sorted(shown))
        assert root_secret.name not in str(results["/root"])
        assert results["/home"] == "FileNotFoundError"
        assert results[str(project_root)] in ("FileNotFoundError", [".venv"])  # only the venv, when it lives there
        for path in [str(root_secret), str(project_root / "pyproject.toml"), "/root/.bashrc", "/root/.ssh/id_rsa"]:
            assert results[path] == "FileNotFoundError", path
        assert results["project_package"] == "ModuleNotFoundError"
        if made:
            assert root_secret.read_text() == secret and root_secret.stat().st_mode & 0o777 == 0o600
        if root_before is not None:
            assert sorted(os.listdir("/root")) == root_before  # nothing written there
    finally:
        if made:
            root_secret.unlink()


def test_fork_bomb_is_contained_without_a_pids_cgroup(sandbox, monkeypatch):
    """No writable pids cgroup: RLIMIT_NPROC of the (unprivileged) run's user holds the bomb."""
    monkeypatch.setattr(cgroups, "pids_cgroup_parent", lambda: None)
    hostile = """
import os, time

def test_bomb():
    refused = 0
    for _ in range(400):
        try:
            if os.fork() == 0:
                time.sleep(1)
                os._exit(0)
        except OSError:
            refused += 1
    assert refused == 0, f"fork refused {refused} times"
"""
    execution = run_pytest(hostile, "test_bomb_nproc.py", replace(sandbox, max_processes=32))
    assert execution.outcome == "failed" and "fork refused" in execution.stdout


def test_sandbox_uid_zero_is_refused():
    with pytest.raises(SandboxError, match="sandbox_uid 0"):
        run_pytest("def test_x():\n    pass\n", "test_x.py", SandboxSettings(sandbox_uid=0))


def test_in_ci_a_sandbox_test_fails_instead_of_skipping(monkeypatch):
    """CI=true and no bubblewrap: the sandbox fixture fails the test; elsewhere it skips it."""
    from retrieval_pipeline_tests.core.conftest import require_sandbox, sandbox_problem  # noqa: PLC0415

    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    sandbox_problem.cache_clear()
    try:
        monkeypatch.setenv("CI", "true")
        with pytest.raises(pytest.fail.Exception, match="bubblewrap"):
            require_sandbox()
        monkeypatch.setenv("CI", "false")
        with pytest.raises(pytest.skip.Exception, match="bubblewrap"):
            require_sandbox()
        monkeypatch.delenv("CI")
        with pytest.raises(pytest.skip.Exception):
            require_sandbox()
    finally:
        sandbox_problem.cache_clear()
    require_sandbox("", ci=True)  # no problem: nothing happens


def test_in_ci_a_security_or_sandbox_skip_is_a_failure_and_other_skips_stand():
    """The conftest hook's rule: in CI, a skip in a security module, or one whose reason names the sandbox, fails."""
    from retrieval_pipeline_tests.core.conftest import ci_failure  # noqa: PLC0415

    security = "retrieval_pipeline_tests/core/services/sandbox/test_sandbox_security.py::test_x[a]"
    other = "retrieval_pipeline_tests/core/services/sandbox/test_batch.py::test_y"
    assert "needs root" in ci_failure(security, "needs root: checks files the sandbox user does not own", ci=True)
    assert "bubblewrap" in ci_failure(other, "bubblewrap is not installed (apt-get install bubblewrap)", ci=True)
    assert ci_failure(other, "the sandbox cannot start here: ...", ci=True) is not None
    assert ci_failure(other, "no writable pids cgroup here", ci=True) is None  # not a sandbox failure: it may skip
    assert ci_failure(security, "needs root", ci=False) is None and ci_failure(other, "bwrap missing", ci=False) is None


HOOKED_TESTS = """
import pytest

needs_bwrap = pytest.mark.skipif(True, reason="bubblewrap is not installed (apt-get install bubblewrap)")


@needs_bwrap
def test_marked():
    pass


def test_skips_itself():
    pytest.skip("needs root: checks files the sandbox user does not own")


def test_runs():
    assert True
"""


@pytest.mark.parametrize("ci, outcome", [("true", "1 failed, 1 passed, 1 error"), ("", "1 passed, 2 skipped")])
def test_the_hook_turns_sandbox_skips_into_failures_only_in_ci(tmp_path, project_root, ci, outcome):
    """End to end: a pytest run of a folder with this folder's hook; in CI the two skips fail the run."""
    (tmp_path / "conftest.py").write_text("from retrieval_pipeline_tests.core.conftest import pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_sandbox_security.py").write_text(HOOKED_TESTS)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(project_root)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert outcome in done.stdout, done.stdout[-2000:]  # in CI: the skipif (setup) errors, the skip (call) fails
    assert done.returncode == (1 if ci else 0), done.stdout[-2000:]
    if ci:
        assert "CI=true, and a sandbox security test was skipped instead of run: bubblewrap is not installed" in done.stdout
        assert "skipped instead of run: needs root" in done.stdout


# --------------------------------------------------------------------------------------------------
# Output hygiene: what a proof read never reaches the evidence or the report as it was


def test_redaction_masks_secrets_and_keeps_ordinary_evidence():
    hashed = "root:$6$Zq1x2y3z$AbCdEf0123456789./xyzXYZ:19700:0:99999:7:::"
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----"
    secrets = {
        hashed: "AbCdEf0123456789",
        "bob:abJnggxhB/yWI:19000:0:99999:7:::": "abJnggxhB/yWI",
        key: "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
        repr(key + "\n"): "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",  # as a repr prints it, with \\n
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7cut here": "MIIEowIBAAKCAQEA7",  # cut before END
        "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx PATH=/usr/bin": "sk-proj-abcdefghijklmnopqrstuvwx",
        "{'AWS_SECRET_ACCESS_KEY': 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'}": "wJalrXUtnFEMI",
        '{"password": "hunter2hunter2"}': "hunter2hunter2",
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345": "abcdefghijklmnopqrstuvwxyz012345",
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAIOSFODNN7EXAMPLE": "AKIAIOSFODNN7EXAMPLE",
    }
    for text, fragment in secrets.items():
        masked = redact_secrets(text)
        assert fragment not in masked and "[redacted" in masked, text
        assert redact_secrets(masked) == masked
    assert redact_secrets(hashed).startswith("root:[redacted: password hash]:19700:")
    assert "PATH=/usr/bin" in redact_secrets("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx PATH=/usr/bin")
    ordinary = [
        "json.dumps accepts sort_keys: a named parameter; parameters: obj, skipkeys, ensure_ascii, sort_keys",
        "KeyError: 'x'",
        "tokenize.generate_tokens exists",
        "password: a named parameter; parameters: prompt, stream",
        "hashlib.sha256(b'').hexdigest() returns 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'",
        "daemon:*:19700:0:99999:7:::",
        "$HOME costs $5 and $6",
    ]
    for text in ordinary:
        assert redact_secrets(text) == text


def test_capping_is_bounded_and_idempotent():
    text = "x" * 5000
    for keep in ("head", "tail"):
        capped = cap_text(text, 300, keep=keep)
        assert len(capped) <= 300 and "chars cut]" in capped
        assert cap_text(capped, 300, keep=keep) == capped
    assert cap_text("short", 300) == "short"
    assert safe_text("A_TOKEN=" + "y" * 50 + " " + "z" * 1000, 100).startswith("A_TOKEN=[redacted]")


def test_a_question_that_reads_a_secret_file_leaks_nothing_into_the_report(sandbox, tmp_path):
    """End to end: a proof that *can* read a file full of secrets; the report gets none of them."""
    tail, body, token = uuid.uuid4().hex, uuid.uuid4().hex, uuid.uuid4().hex
    content = (
        f"root:$6$saltsalt${tail}:19700:0:99999:7:::\n"
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n"
        f"OPENAI_API_KEY=sk-{token}\n"
    )
    top = Path(tempfile.mkdtemp(prefix="rp_leak_"))
    try:
        top.chmod(0o755)
        leak = top / "leak.txt"
        leak.write_text(content)
        leak.chmod(0o644)  # readable by the sandbox user: only the redaction stands between it and the report
        question = f"What does `open({str(leak)!r}).read()` return?"
        options = {"A": "''", "B": "It raises FileNotFoundError", "C": "It raises PermissionError"}
        settings = replace(sandbox, extra_ro_binds=(top,))
        verdict = verify_question("leak", question, options, "A", OfflineProver(), settings)
        report = quality_report([verdict], {"suite": "leak"})
        text = json.dumps(report) + markdown_report(report) + json.dumps(verdict.reasons)
        text += json.dumps([[e.note, e.stdout, e.stderr, e.fingerprint, e.record] for e in verdict.evidence], default=str)
        assert verdict.evidence[0].state == "false"  # A was decided: the proof did read the file
        assert "[redacted: password hash]" in verdict.evidence[0].note
        for fragment in (tail, body, token):
            assert fragment not in text
        assert all(len(e.note) <= 600 and len(e.stdout) <= OUTPUT_TAIL_CHARS for e in verdict.evidence)
        assert leak.read_text() == content
    finally:
        shutil.rmtree(top)


#: Reads what the sandbox's other processes and its mount table show: pid 1 is bwrap itself.
PROC_READER = """import glob, json


def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().replace(b"\\\\0", b" ").decode(errors="replace")
    except OSError as exc:
        return type(exc).__name__


def test_read_proc():
    seen = {path: read(path) for path in ["/proc/1/environ", "/proc/1/cmdline", "/proc/self/mountinfo"]
            + glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline")}
    print("SEEN", seen)
    with open("option.evidence.json", "w") as handle:
        json.dump(seen, handle)
    assert False
"""


def test_no_process_of_the_sandbox_shows_the_pipeline_s_environment(sandbox, monkeypatch):
    """bwrap itself (pid 1 of the sandbox) starts with a cleared environment, not only its child."""
    secret = f"sk-fake-{time.monotonic_ns()}abcdefghijklmnop"
    host_path = f"/nonexistent/rp-host-path-{time.monotonic_ns()}"
    monkeypatch.setenv("RETRIEVAL_LLM_API_KEY", secret)
    monkeypatch.setenv("PATH", f"{os.environ.get('PATH', '/usr/bin:/bin')}:{host_path}")
    alone = run_pytest(PROC_READER, "test_proc.py", sandbox)
    batch = sandbox_module.run_pytest_batch([(PROC_READER, "test_proc_a.py"), (PROC_READER, "test_proc_b.py")], sandbox)
    for execution in [alone, *batch]:
        assert execution is not None and execution.outcome == "failed", execution
        assert "/proc/1/environ" in execution.stdout  # it did read
        texts = [execution.stdout, execution.stderr, *execution.artifacts.values()]
        for text in texts:
            assert secret not in text, text[:3000]
            assert host_path not in text, text[:3000]


#: Takes a look at pid 1 of the sandbox (bwrap), whose memory a proof of the same user can write through
#: /proc/1/mem: what would code that took it over hold?
PID1_STATUS = """def test_pid1():
    fields = dict(line.split(":", 1) for line in open("/proc/1/status").read().splitlines() if ":" in line)
    print("PID1", {key: fields[key].strip() for key in ("Name", "Uid", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Seccomp", "NoNewPrivs")})
    assert False
"""


def test_pid1_holds_no_capability_and_runs_under_the_same_seccomp_filter(sandbox):
    """bwrap stays in the sandbox as pid 1 and is dumpable, so a proof can read and write its memory
    (/proc/1/mem needs no system call the filter refuses). Taking it over gains nothing: it runs as the
    sandbox user with no capability at all, with no_new_privs and the same seccomp filter as the proof."""
    for execution in [
        run_pytest(PID1_STATUS, "test_pid1.py", sandbox),
        *sandbox_module.run_pytest_batch([(PID1_STATUS, "test_pid1.py")], sandbox),
    ]:
        assert execution is not None and execution.outcome == "failed", execution
        line = next(line for line in execution.stdout.splitlines() if line.startswith("PID1 "))
        status = ast.literal_eval(line.removeprefix("PID1 "))
        assert status["Name"] == "bwrap" and set(status["Uid"].split()) == {"65534"}, status
        assert {status[key] for key in ("CapPrm", "CapEff", "CapBnd", "CapAmb")} == {"0000000000000000"}, status
        assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1", status


#: Six forked children, 150 MB each: RLIMIT_AS (per process) lets every one of them hold it.
CHILD_HOGS = """import os, select, time


def test_children_hog():
    reader, writer = os.pipe()
    children = []
    for index in range(6):
        pid = os.fork()
        if pid == 0:
            os.close(reader)
            data = b"x" * (150 * 2**20)  # written, so the pages are really there
            os.write(writer, bytes([index]))
            time.sleep(60)
            os._exit(len(data) and 0)
        children.append(pid)
    os.close(writer)
    reported, dead = set(), set()
    deadline = time.monotonic() + 25
    while len(reported | dead) < 6 and time.monotonic() < deadline:  # each child: holds its 150 MB, or ended
        if select.select([reader], [], [], 0.2)[0]:
            reported.update(os.read(reader, 64))
        dead.update(index for index, pid in enumerate(children) if index not in dead and os.waitpid(pid, os.WNOHANG)[0])
    print("HELD", len(reported - dead), "ENDED", len(dead), "WAITING", 6 - len(reported | dead))
    for pid in children:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert False
"""


@pytest.mark.skipif(cgroups.memory_cgroup_parent() is None, reason="no writable memory cgroup here: RLIMIT_AS binds per process only")
def test_memory_limit_binds_all_processes_of_a_run_together(sandbox):
    settings = replace(sandbox, memory_mb=512, timeout_s=30)
    execution = run_pytest(CHILD_HOGS, "test_hogs.py", settings)
    line = next(line for line in execution.stdout.splitlines() if line.startswith("HELD "))
    held, waiting = int(line.split()[1]), int(line.split()[5])
    assert waiting == 0 and held * 150 < 512, line  # six would be 900 MB: the kernel ended the ones past the run's 512 MB
    assert execution.memory_limit_hit and execution.limit == "memory", execution
    batch = sandbox_module.run_pytest_batch([(CHILD_HOGS, "test_hogs_a.py"), ("def test_ok():\n    pass\n", "test_ok_b.py")], settings)
    assert batch == [None, None]  # whose it was cannot be told: each runs alone
    own = f"rp_sandbox_{os.getpid()}_"
    found = cgroups.memory_cgroup_parent()
    assert found is not None and not [p.name for p in found[0].iterdir() if p.name.startswith(own)]  # removed after each run
