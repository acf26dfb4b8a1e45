from __future__ import annotations

import json
import os
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from retrieval_pipeline.core.services.llm.local_server import (
    PORTABLE_CMAKE_ARGS,
    LocalLlamaServer,
    LocalServerError,
    _group_has_live_process,
    check_loopback_host,
    exit_description,
    find_packaged_gguf,
    llama_server_available,
    llama_server_unavailable_reason,
    server_environment,
)

# A stand-in for llama.cpp's server: answers GET /v1/models and POST /v1/completions (mode "sigill": dies of
# SIGILL on its first completion, as a llama.cpp built for instructions the CPU lacks does), and starts a child in its process group
# (writing the child's pid to a file) so the test can prove the whole group is stopped.
FAKE_SERVER = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    host, port, mode, pid_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    print("fake server starting", mode, flush=True)
    if mode == "crash":
        print("error: failed to load model from 'nowhere.gguf'", flush=True)
        sys.exit(3)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open(pid_file, "w") as f:
        f.write(str(child.pid))
    if mode == "silent":
        time.sleep(300)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with open(pid_file + ".posts", "a") as f:
                f.write(self.path + "\\n")
            if mode == "sigill":
                print("llama_perf_context_print: load time", flush=True)
                os.kill(os.getpid(), signal.SIGILL)
            body = json.dumps({"choices": [{"text": "ok", "index": 0}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    HTTPServer((host, port), Handler).serve_forever()
    """
)


@pytest.fixture()
def fake(tmp_path: Path):
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    pid_file = tmp_path / "child.pid"

    def make(mode: str = "ok", **kwargs) -> LocalLlamaServer:
        return LocalLlamaServer(
            tmp_path / "unused.gguf",
            command=lambda host, port: [sys.executable, str(script), host, str(port), mode, str(pid_file)],
            **kwargs,
        )

    make.pid_file = pid_file  # type: ignore[attr-defined]
    return make


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def _alive(pid: int) -> bool:
    """Alive and not a zombie (an orphan may wait for a reaper a little)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "10.0.0.1", "::", "2001:db8::1", "localhost", "example.com"])
def test_refuses_non_loopback_hosts(host):
    with pytest.raises(LocalServerError, match="refused"):
        LocalLlamaServer("m.gguf", host=host)


def test_accepts_loopback_hosts():
    assert check_loopback_host("127.0.0.1") == "127.0.0.1"
    assert check_loopback_host("127.8.9.10") == "127.8.9.10"
    assert check_loopback_host("::1") == "::1"
    assert LocalLlamaServer("m.gguf", host="::1", port=8123).base_url == "http://[::1]:8123/v1"


def test_missing_package_names_what_to_install():
    with pytest.raises(LocalServerError, match=r"'no_such_gguf_pkg' is not installed.*pip install no-such-gguf-pkg"):
        find_packaged_gguf("no_such_gguf_pkg")
    assert not llama_server_available("no_such_gguf_pkg")


def test_missing_model_file_is_reported_before_launch(tmp_path):
    with pytest.raises(LocalServerError, match="GGUF model file not found"):
        LocalLlamaServer(tmp_path / "absent.gguf").start()


def test_fake_server_start_ready_stop_and_group_gone(fake):
    server = fake("ok", startup_timeout_s=20)
    with server:
        port, pgid, pid = server.port, server.pgid, server.pid
        assert pgid == pid == os.getpgid(pid) and pgid != os.getpgrp()
        assert os.getsid(pid) == pid  # its own session, not ours
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        assert server.model == "fake-model"
        assert _port_open("127.0.0.1", port)
        child = int(fake.pid_file.read_text())
        assert os.getpgid(child) == pgid and _alive(child)
        log_path = server.log_path
        assert "fake server starting ok" in log_path.read_text()
    assert not _group_has_live_process(pgid)
    assert not _port_open("127.0.0.1", port)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert server.pid is None and not log_path.exists()
    server.stop()  # idempotent


def test_sigterm_ignored_escalates_to_sigkill(fake):
    server = fake("stubborn", startup_timeout_s=20, stop_grace_s=0.5)
    server.start()
    pgid = server.pgid
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 5
    assert not _group_has_live_process(pgid)


def test_startup_crash_surfaces_log_tail(fake):
    server = fake("crash", startup_timeout_s=20)
    with pytest.raises(LocalServerError) as info:
        server.start()
    msg = str(info.value)
    assert "exited with status 3 during startup" in msg
    assert "failed to load model from 'nowhere.gguf'" in msg
    assert server.pid is None
    assert server.log_path is not None and server.log_path.exists()  # kept for reading; named in the error
    assert str(server.log_path) in msg
    server.log_path.unlink()


def test_startup_asks_for_one_token_before_the_server_is_used(fake):
    with fake("ok", startup_timeout_s=20):
        posts = Path(str(fake.pid_file) + ".posts").read_text().split()
    assert posts == ["/v1/completions"]


def test_a_server_killed_by_sigill_on_its_first_token_names_the_cause_and_the_portable_build(fake):
    server = fake("sigill", startup_timeout_s=20, stop_grace_s=1.0)
    with pytest.raises(LocalServerError) as info:
        with server:
            pytest.fail("the body must not run when the server cannot generate")
    msg = str(info.value)
    assert "was killed by SIGILL (illegal instruction)" in msg and "on its first completion" in msg
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in msg and "--no-cache-dir" in msg
    assert "llama_perf_context_print" in msg  # the log's tail
    child = int(fake.pid_file.read_text())  # the group is gone: its surviving child too
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    server.log_path.unlink()


def test_exit_descriptions():
    assert exit_description(3) == "exited with status 3"
    assert exit_description(-signal.SIGKILL) == "was killed by SIGKILL"
    assert exit_description(-signal.SIGILL).startswith("was killed by SIGILL (illegal instruction)")


def test_the_makefile_builds_llama_cpp_with_the_portable_flags():
    makefile = (Path(__file__).resolve().parents[4] / "Makefile").read_text()
    assert f"LLAMA_CMAKE_ARGS ?= {PORTABLE_CMAKE_ARGS}\n" in makefile
    installs = [line for line in makefile.splitlines() if "local-llm" in line and "pip install" in line]
    assert len(installs) == 2 and all('CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)"' in line and "--no-cache-dir" in line for line in installs)


def test_startup_timeout_stops_the_group_and_surfaces_log_tail(fake):
    server = fake("silent", startup_timeout_s=1.0, stop_grace_s=1.0)
    with pytest.raises(LocalServerError, match=r"did not answer GET .*/v1/models within 1 s[\s\S]*fake server starting silent"):
        with server:
            pytest.fail("the body must not run when startup fails")
    child = int(fake.pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    server.log_path.unlink()


@pytest.mark.integration
@pytest.mark.local_llm
@pytest.mark.skipif(not llama_server_available(), reason=f"local LLM server unavailable: {llama_server_unavailable_reason()}")
def test_real_smollm2_server_answers_json():
    openai = pytest.importorskip("openai")
    with LocalLlamaServer(find_packaged_gguf(), startup_timeout_s=120) as server:
        port, pgid = server.port, server.pgid
        client = openai.OpenAI(base_url=server.base_url, api_key="local", timeout=120, max_retries=0)
        resp = client.chat.completions.create(
            model=server.model,
            messages=[
                {"role": "system", "content": "You answer only with a JSON object."},
                {"role": "user", "content": 'Is Paris the capital of France? Reply as {"answer": "yes"} or {"answer": "no"}.'},
            ],
            response_format={"type": "json_object"},
            max_tokens=64,
            temperature=0,
        )
        content = resp.choices[0].message.content
        assert isinstance(json.loads(content), dict), content
    assert not _port_open("127.0.0.1", port)
    assert not _group_has_live_process(pgid)


def test_the_server_waits_passively_at_openmp_barriers_unless_told_otherwise():
    assert server_environment({"PATH": "/usr/bin"}) == {"PATH": "/usr/bin", "OMP_WAIT_POLICY": "passive"}
    assert server_environment({"OMP_WAIT_POLICY": "active"})["OMP_WAIT_POLICY"] == "active"
