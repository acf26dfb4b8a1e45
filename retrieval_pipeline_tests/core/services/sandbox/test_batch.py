"""All proofs of a question in one sandbox: the same outcome per option as one sandbox each, and no way across.

:func:`~retrieval_pipeline.core.services.sandbox.bubblewrap.run_pytest_batch` forks each proof from one warmed-up
pytest runner. Each option must come back exactly as :func:`run_pytest` gives it; a crash, a timeout or
a hostile proof may cost only its own option (or send the others back to a sandbox each), never change
another option's result.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import threading
from pathlib import Path

import pytest

from retrieval_pipeline.core.services.sandbox import cgroups
from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest, run_pytest_batch
from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier import verify as verify_module
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.proof_source import EVIDENCE_FILE
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver, Proof, parse_evidence
from retrieval_pipeline.core.verifier.verdicts.verdict import option_evidence
from retrieval_pipeline.core.verifier.verify import verify_question

QUESTION = "Which is the correct import statement for `dumps`?"

#: A proof that records the option true, then passes.
TRUE_PROOF = f"""import json


def test_option():
    with open({EVIDENCE_FILE!r}, "w") as handle:
        json.dump({{"option_true": True, "reason": "it works"}}, handle)
"""

#: Fails without recording anything: undecided, unless something else wrote an evidence file for it.
SILENT_FAILURE = """import os


def test_option():
    print("LISTING", sorted(os.listdir(".")))
    assert False, "failed without a record"
"""


class FixedProver:
    """Proves each option with the pytest source given for its letter (no source: no proof)."""

    name = "fixed"

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources

    def prove(self, claim):
        source = self.sources.get(claim.letter)
        if source is None:
            return Proof(claim, None, "unverifiable_offline", None, "no source")
        return Proof(claim, source, "proof", f"test_option_{claim.letter}.py")


def _summary(execution: Execution) -> tuple[str, int | None, str | None, dict | None]:
    return execution.outcome, execution.exit_code, execution.limit, parse_evidence(execution.artifacts)


# --------------------------------------------------------------------------------------------------
# The same result per option as one sandbox each


OFFLINE = [
    ("Which is the correct import statement for `OrderedDict`?", "from collections import OrderedDict"),
    ("Which is the correct import statement for `Mapping`?", "from collections import Mapping"),
    ("Which keyword argument makes `json.dumps` sort keys?", "sort_keys"),
    ("What does `bisect.bisect_left([1, 2, 2, 3], 2)` return?", "3"),
    ("What exception does `json.loads('{bad')` raise?", "json.JSONDecodeError"),
    ("Which expression creates a `collections.deque` of at most 3 items?", "deque(maxlen=3)"),
]


def test_a_batch_gives_each_proof_the_result_it_gets_alone(sandbox):
    proofs = []
    for number, (question, option) in enumerate(OFFLINE):
        claim = decompose("c", question, {chr(ord("A") + number): option})[0]
        proofs.append(OfflineProver().prove(claim))
    tests = [(p.test_source, p.filename) for p in proofs]
    batch = run_pytest_batch(tests, sandbox)
    alone = [run_pytest(source, filename, sandbox) for source, filename in tests]
    assert all(b is not None for b in batch)
    assert [_summary(b) for b in batch] == [_summary(a) for a in alone]
    for proof, b, a in zip(proofs, batch, alone):
        assert option_evidence(proof, b).state == option_evidence(proof, a).state
        assert b.stdout.splitlines()[:-1] == a.stdout.splitlines()[:-1]  # pytest's own report; the last line is the time


#: Passes when pytest loaded no plugin from the environment's entry points (anyio, xdist: installed here).
NO_PLUGINS = """import os


def test_option(request):
    assert os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") == "1"
    loaded = [name for name in ("anyio", "xdist.plugin") if request.config.pluginmanager.has_plugin(name)]
    assert loaded == [], loaded
"""


@pytest.mark.skipif(importlib.util.find_spec("anyio") is None, reason="anyio (a pytest plugin by entry point) is not installed")
def test_proofs_run_without_the_environment_s_pytest_plugins(sandbox):
    """A proof is a plain pytest file: plugins the environment registers by entry point are not loaded, alone or in a batch."""
    alone = run_pytest(NO_PLUGINS, "test_option_A.py", sandbox)
    batch = run_pytest_batch([(NO_PLUGINS, "test_option_A.py"), (NO_PLUGINS, "test_option_B.py")], sandbox)
    assert alone.outcome == "passed", alone.stdout
    assert [b.outcome if b else None for b in batch] == ["passed", "passed"], [b.stdout if b else None for b in batch]


def test_crashes_and_timeouts_cost_only_their_own_option(sandbox):
    settings = dataclasses.replace(sandbox, timeout_s=2.0)
    tests = [
        ("import os, signal\n\n\ndef test_option():\n    os.kill(os.getpid(), signal.SIGSEGV)\n", "test_option_A.py"),
        ("def test_option():\n    while True:\n        pass\n", "test_option_B.py"),
        ("import nosuchmodule_xyz\n\n\ndef test_option():\n    pass\n", "test_option_C.py"),
        (TRUE_PROOF, "test_option_D.py"),
    ]
    batch = run_pytest_batch(tests, settings)
    assert [(b.outcome, b.exit_code, b.limit) for b in batch] == [
        ("killed", 128 + 11, None),
        ("timeout", -9, "wall_clock"),
        ("error", 2, None),
        ("passed", 0, None),
    ]
    assert parse_evidence(batch[3].artifacts) == {"option_true": True, "reason": "it works"}
    assert all(b.artifacts == {} for b in batch[:3])

    prover = FixedProver({"A": tests[0][0], "B": tests[1][0], "C": TRUE_PROOF})
    options = {"A": "from json import dumps", "B": "from json import loads", "C": "from json import load"}
    verdict = verify_question("c", QUESTION, options, "C", prover, settings)
    states = {e.letter: (e.state, e.outcome) for e in verdict.evidence}
    assert states == {"A": ("undecided", "killed"), "B": ("undecided", "timeout"), "C": ("true", "passed")}


# --------------------------------------------------------------------------------------------------
# Nothing a proof leaves behind reaches the next one, nor its result


PLANTER = f"""import json, os, time

EVIDENCE = {EVIDENCE_FILE!r}
HIJACK = "import pytest\\n\\n@pytest.hookimpl(tryfirst=True)\\ndef pytest_runtest_call(item):\\n    pytest.skip('hijacked')\\n"


def test_option():
    cwd = os.getcwd()
    for folder in (cwd, os.path.dirname(cwd), "/tmp", "/dev/shm"):
        for name, text in (("conftest.py", HIJACK), ("pytest.ini", "[pytest]\\naddopts = -p no:python\\n")):
            try:
                with open(os.path.join(folder, name), "w") as handle:
                    handle.write(text)
            except OSError:
                pass
    with open(EVIDENCE, "w") as handle:
        json.dump({{"option_true": False, "reason": "planted"}}, handle)
    os.makedirs("locked/deeper", exist_ok=True)
    os.chmod("locked", 0)
    if os.fork() == 0:  # a process that outlives the test, then keeps planting evidence for whoever comes next
        os.setsid()
        time.sleep(1.5)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            for folder in (cwd, "/tmp"):
                try:
                    with open(os.path.join(folder, EVIDENCE), "w") as handle:
                        json.dump({{"option_true": True, "reason": "planted later"}}, handle)
                except OSError:
                    pass
            time.sleep(0.01)
        os._exit(0)
    time.sleep(0.3)
    assert False, "the planter fails"
"""

LOOKER = """import os


def test_option():
    parent = os.path.dirname(os.getcwd())
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    print("SEEN", {"workdir": os.getcwd(), "cwd": sorted(os.listdir(".")), "parent": sorted(os.listdir(parent)),
                   "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")), "pids": len(pids)})
    assert False, "the looker fails without a record"
"""


def _seen(execution: Execution | None) -> dict:
    assert execution is not None
    line = next(line for line in execution.stdout.splitlines() if line.startswith("SEEN "))
    return ast.literal_eval(line[len("SEEN ") :])


def _bind_folders_in_tmp(settings) -> set[str]:
    """The folders of /tmp that lead to the interpreter's environment (a checkout under /tmp): they stay, empty."""
    python = Path(settings.python)
    return {path.relative_to("/tmp").parts[0] for path in (python.absolute(), python.resolve()) if path.is_relative_to("/tmp")}


def test_what_a_proof_leaves_behind_does_not_reach_the_next_one(sandbox):
    planter, looker = run_pytest_batch([(PLANTER, "test_option_A.py"), (LOOKER, "test_option_B.py")], sandbox)
    assert planter is not None and planter.outcome == "failed" and parse_evidence(planter.artifacts)["reason"] == "planted"
    assert looker is not None and looker.outcome == "failed", looker.stdout[-2000:]
    assert looker.artifacts == {}  # nothing planted counts as its record
    seen = _seen(looker)
    assert seen["cwd"] == ["test_option_B.py"] and seen["parent"] == ["work"] and seen["shm"] == []
    assert set(seen["tmp"]) == {Path(seen["workdir"]).parent.name} | _bind_folders_in_tmp(sandbox)
    assert seen["pids"] == 3  # bwrap's init, the runner and the looker: the planter's process was killed
    assert "hijacked" not in looker.stdout and "1 failed" in looker.stdout


def test_a_planted_evidence_file_never_decides_another_option(sandbox):
    prover = FixedProver({"A": PLANTER, "B": SILENT_FAILURE, "C": TRUE_PROOF})
    options = {"A": "from json import dumps", "B": "from json import loads", "C": "from json import load"}
    batched = verify_question("c", QUESTION, options, "C", prover, sandbox)
    alone = verify_question("c", QUESTION, options, "C", prover, sandbox, batch=False)
    assert [(e.letter, e.state, e.outcome) for e in batched.evidence] == [(e.letter, e.state, e.outcome) for e in alone.evidence]
    assert {e.letter: e.state for e in batched.evidence} == {"A": "false", "B": "undecided", "C": "true"}


# --------------------------------------------------------------------------------------------------
# The runner and its results are out of a proof's reach


ATTACKER = """import os, sys


def test_option():
    runner = os.getppid()
    results = {}
    for path in [f"/proc/{runner}/fd/{fd}" for fd in range(12)] + ["/proc/1/fd/1"]:
        try:
            handle = os.open(path, os.O_WRONLY)
            os.write(handle, b"RPBATCH 0 {}\\n")
            os.close(handle)
            results[path] = "written"
        except OSError as exc:
            results[path] = type(exc).__name__
    for name in ("mem", "environ", "maps"):
        try:
            with open(f"/proc/{runner}/{name}", "rb") as handle:
                handle.read(1)
            results[name] = "read"
        except OSError as exc:
            results[name] = type(exc).__name__
    forged = "RPBATCH " + "0" * 64 + ' {"index": 1, "returncode": 0, "timed_out": false}'
    print(forged)
    print(forged, file=sys.stderr)
    print("RESULTS", results)
    assert False
"""


def test_the_runner_s_descriptors_and_memory_are_unreachable_and_forged_results_ignored(sandbox):
    attacker, victim = run_pytest_batch([(ATTACKER, "test_option_A.py"), (SILENT_FAILURE, "test_option_B.py")], sandbox)
    assert attacker is not None and victim is not None
    line = next(line for line in attacker.stdout.splitlines() if line.startswith("RESULTS "))
    results = ast.literal_eval(line[len("RESULTS ") :])
    runner_side = {k: v for k, v in results.items() if not k.startswith("/proc/1/")}
    assert set(runner_side.values()) == {"PermissionError"}, results  # the runner is not dumpable
    if os.geteuid() == 0:  # bwrap's init holds the verifier's output file: 0600, root's
        assert results["/proc/1/fd/1"] == "PermissionError"
    assert victim.outcome == "failed" and victim.exit_code == 1  # not the forged "passed"


KILLER = f"""import json, os, signal


def test_option():
    with open({EVIDENCE_FILE!r}, "w") as handle:
        json.dump({{"option_true": True, "reason": "killed my parent"}}, handle)
    try:
        os.kill(os.getppid(), signal.SIGKILL)
    except OSError:
        pass
"""


def test_a_proof_that_kills_the_runner_sends_the_rest_to_a_sandbox_each(sandbox, monkeypatch):
    alone: list[str] = []
    real = verify_module.run_pytest

    def counting(source, filename, settings):
        alone.append(filename)
        return real(source, filename, settings)

    monkeypatch.setattr(verify_module, "run_pytest", counting)
    prover = FixedProver({"A": KILLER, "B": TRUE_PROOF})
    verdict = verify_question("c", QUESTION, {"A": "from json import dumps", "B": "from json import loads"}, "A", prover, sandbox)
    assert sorted(alone) == ["test_option_A.py", "test_option_B.py"]  # neither came back from the batch
    assert {e.letter: (e.state, e.outcome) for e in verdict.evidence} == {"A": ("true", "passed"), "B": ("true", "passed")}


@pytest.mark.skipif(cgroups.pids_cgroup_parent() is None, reason="no writable pids cgroup here")
def test_a_batch_where_the_process_limit_bound_reports_nothing(sandbox):
    bomb = """import os, time


def test_option():
    for _ in range(64):
        try:
            if os.fork() == 0:
                time.sleep(2)
                os._exit(0)
        except OSError:
            pass
"""
    settings = dataclasses.replace(sandbox, max_processes=16)
    assert run_pytest_batch([(bomb, "test_option_A.py"), (TRUE_PROOF, "test_option_B.py")], settings) == [None, None]


def test_batches_run_side_by_side_each_in_its_own_sandbox(sandbox):
    own = f"rp_sandbox_{os.getpid()}_"
    results: list[list[Execution | None]] = [[] for _ in range(3)]

    def run(slot: int) -> None:
        results[slot] = run_pytest_batch([(TRUE_PROOF, "test_option_A.py"), (LOOKER, "test_option_B.py")], sandbox)

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert all(r[0] is not None and r[0].passed and r[1] is not None and r[1].outcome == "failed" for r in results)
    workdirs = {_seen(r[1])["workdir"] for r in results}
    assert len(workdirs) == 3 and not any(Path(w).parent.exists() for w in workdirs)  # each its own, each removed
    parent = cgroups.pids_cgroup_parent()
    if parent is not None:
        assert not [p.name for p in parent.iterdir() if p.name.startswith(own)]  # every run's cgroup is gone


def test_batch_file_names_are_checked():
    with pytest.raises(ValueError, match="names other than"):
        run_pytest_batch([("", "rp_batch_runner.py")], SandboxSettings())
    with pytest.raises(ValueError, match="plain names"):
        run_pytest_batch([("", "../test_a.py")], SandboxSettings())
    assert run_pytest_batch([], SandboxSettings()) == []


# --------------------------------------------------------------------------------------------------
# Any checkout path: a project and venv under /tmp, in a folder whose name has spaces


def _venv_under_tmp(root: Path) -> Path:
    """A venv under ``root`` that imports pytest (its packages copied in): the interpreter the sandbox binds."""
    import shutil
    import subprocess
    import sys

    import _pytest
    import iniconfig
    import packaging
    import pluggy
    import pygments

    venv = root / "a checkout with spaces" / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for module in (pytest, _pytest, pluggy, iniconfig, packaging, pygments):
        folder = Path(module.__file__).parent
        shutil.copytree(folder, site / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
    shim = Path(pytest.__file__).parent.parent / "py.py"
    if shim.exists():
        shutil.copy(shim, site / "py.py")
    return venv / "bin" / "python"


def test_a_batch_runs_from_a_venv_under_tmp(sandbox):
    """The venv's bind mount sits inside the sandbox's private /tmp: emptying /tmp between proofs keeps it."""
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp", prefix="rp clone ") as root:
        python = _venv_under_tmp(Path(root))
        settings = dataclasses.replace(sandbox, python=python)
        tests = [(TRUE_PROOF, "test_option_A.py"), (SILENT_FAILURE, "test_option_B.py"), (TRUE_PROOF, "test_option_C.py")]
        batch = run_pytest_batch(tests, settings)
        assert [b is not None and b.outcome for b in batch] == ["passed", "failed", "passed"]
        assert [_summary(b) for b in batch] == [_summary(run_pytest(s, f, settings)) for s, f in tests]


#: Forges "passed" for itself (index 0) and the next proof (index 1) by every route a forked proof has:
#: the runner's globals (frames, then the garbage collector's objects: a key, the channel's number, its
#: own ``emit``), its own descriptors, descriptors taken from bwrap's pid 1 and from the runner with
#: ``pidfd_getfd`` or through ``/proc/<pid>/fd``, and ptrace / process_vm_readv on both.
FORGER = """import ctypes, gc, hashlib, hmac, json, os, sys

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
PIDFD_GETFD, PTRACE_ATTACH, PTRACE_DETACH = 438, 16, 17


def runner_globals():
    frame = sys._getframe()
    while frame is not None:
        if "emit" in frame.f_globals and "CHANNEL" in frame.f_globals:
            return "frames", frame.f_globals
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict) and "emit" in obj and "CHANNEL" in obj:
            return "gc", obj
    return "none", None


def descriptors(runner, report):
    fds = []
    for fd in range(3, 256):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            pass
    report["own"] = list(fds)
    for pid in (1, runner):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            report[f"pidfd_open {pid}"] = type(exc).__name__
            continue
        for target in range(64):
            got = LIBC.syscall(PIDFD_GETFD, pidfd, target, 0)
            if got >= 0:
                fds.append(got)
                report[f"pidfd_getfd {pid}:{target}"] = "taken"
            else:
                report.setdefault(f"pidfd_getfd {pid}", os.strerror(ctypes.get_errno()))
        for name in os.listdir(f"/proc/{pid}/fd") if os.access(f"/proc/{pid}/fd", os.R_OK) else []:
            try:
                fds.append(os.open(f"/proc/{pid}/fd/{name}", os.O_WRONLY | os.O_APPEND))
                report[f"/proc/{pid}/fd/{name}"] = "opened"
            except OSError as exc:
                report[f"/proc/{pid}/fd/{name}"] = type(exc).__name__
        for what, call in (("ptrace", lambda: LIBC.ptrace(PTRACE_ATTACH, pid, None, None)),):
            rc = call()
            report[f"{what} {pid}"] = "attached" if rc == 0 else os.strerror(ctypes.get_errno())
            if rc == 0:
                LIBC.ptrace(PTRACE_DETACH, pid, None, None)
        buf = ctypes.create_string_buffer(8)
        local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
        remote = (ctypes.c_void_p * 2)(id(report), 8)
        rc = LIBC.process_vm_readv(pid, local, 1, remote, 1, 0)
        report[f"process_vm_readv {pid}"] = "read" if rc >= 0 else os.strerror(ctypes.get_errno())
    return fds


def forged(index, key):
    record = {"index": index, "returncode": 0, "timed_out": False, "duration": 0.1, "stdout": "", "stdout_size": 0,
              "stderr": "", "stderr_size": 0, "artifacts": {}}
    payload = json.dumps(record)
    lines = ["RPBATCH " + payload]
    if key:
        lines.append("RPBATCH " + hmac.new(key, payload.encode(), hashlib.sha256).hexdigest() + " " + payload)
    return record, "".join(line + "\\n" for line in lines).encode()


def test_option():
    route, found = runner_globals()
    in_gc = any(isinstance(o, dict) and "emit" in o and "CHANNEL" in o and not o.get("KEY") for o in gc.get_objects())
    report = {"route": route, "gc": in_gc, "key": bool(found and found.get("KEY")), "runner": os.getppid()}
    key = found.get("KEY") if found else None
    fds = descriptors(os.getppid(), report)
    written = 0
    for fd in fds:
        for index in (0, 1):
            record, raw = forged(index, key)
            try:
                os.write(fd, raw)
                written += 1
            except OSError:
                pass
            if found is not None:
                try:
                    found["CHANNEL"] = fd
                    found["emit"](record)
                    written += 1
                except Exception:
                    pass
    for index in (0, 1):
        sys.stdout.write(forged(index, key)[1].decode())
    report["written"] = written
    print("REPORT", report)
    assert False, "the forger fails"
"""


def test_a_proof_cannot_forge_a_result_from_the_runner_s_memory_or_descriptors(sandbox):
    forger, victim = run_pytest_batch([(FORGER, "test_option_A.py"), (SILENT_FAILURE, "test_option_B.py")], sandbox)
    assert forger is not None and victim is not None
    assert (forger.outcome, forger.exit_code) == ("failed", 1), forger  # not the forged "passed"
    assert (victim.outcome, victim.exit_code) == ("failed", 1), victim
    line = next(line for line in forger.stdout.splitlines() if line.startswith("REPORT "))
    report = ast.literal_eval(line[len("REPORT ") :])
    # the runner's globals are reached through the frames (gc.get_objects does not list what gc.freeze() froze)
    assert report["route"] == "frames" and not report["key"], report
    pid = report["runner"]
    runner = {k: v for k, v in report.items() if k.endswith(f" {pid}") or k.startswith((f"pidfd_getfd {pid}:", f"/proc/{pid}/"))}
    assert runner and not [k for k, v in runner.items() if v in ("taken", "opened", "attached", "read")], report
    assert report["ptrace 1"] != "attached" and report["process_vm_readv 1"] != "read", report  # seccomp
    prover = FixedProver({"A": FORGER, "B": SILENT_FAILURE})
    verdict = verify_question("c", QUESTION, {"A": "from json import dumps", "B": "from json import loads"}, "A", prover, sandbox)
    assert {e.letter: e.outcome for e in verdict.evidence} == {"A": "failed", "B": "failed"}


def test_a_relative_interpreter_is_read_against_the_current_folder(sandbox, monkeypatch):
    """``SandboxSettings(python=Path(".venv/bin/python"))`` runs that interpreter, not "bwrap: execvp ...: No such file"."""
    python = Path(sandbox.python)
    monkeypatch.chdir(python.parent)
    settings = dataclasses.replace(sandbox, python=Path(python.name))
    # absolute, the link itself (a venv's bin/python stays in its venv); the folder compared as a file, since the
    # current folder reads back resolved where the venv is reached through a symlink
    assert settings.python.is_absolute() and settings.python.name == python.name
    assert settings.python.parent.samefile(python.parent)
    assert run_pytest(TRUE_PROOF, "test_option_A.py", settings).outcome == "passed"


def test_a_name_may_repeat_in_a_batch_and_each_file_keeps_its_own_result(sandbox):
    """Two questions' ``test_option_A.py`` in one batch (``SharedBatches``): each runs alone, matched by position."""
    failing = "def test_option():\n    assert False, 'the second question'\n"
    first, second = run_pytest_batch([(TRUE_PROOF, "test_option_A.py"), (failing, "test_option_A.py")], sandbox)
    assert first is not None and first.passed and EVIDENCE_FILE in first.artifacts
    assert second is not None and second.outcome == "failed" and "the second question" in second.stdout
    assert EVIDENCE_FILE not in second.artifacts  # the first file's evidence did not stay behind for the second
