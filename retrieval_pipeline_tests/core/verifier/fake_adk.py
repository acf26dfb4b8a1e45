"""An ADK-shaped library in a throwaway environment: what the verifier's library tests run against.

Shaped like google-adk where it matters: the distribution ``acme-adk`` installs the import name
``acme.adk`` (``acme`` is a namespace package, and there is no ``top_level.txt``, only ``RECORD``);
some subpackages fail to import because an optional dependency is missing, and a class they define
(``RemoteA2aAgent``, ``OpenAPIToolset``) or only mention (``SaveFilesAsArtifactsPlugin``) is not
exposed by any importable module. A second distribution, ``acme-multi``, installs two top-level
modules, so its import name cannot be derived.

The environment is a venv without pip; pytest comes from the host's site-packages through a ``.pth``
file, shown read-only in the sandbox via ``extra_ro_binds``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.proofs.library_index import probe_environment
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver

DISTRIBUTION = "acme-adk"
IMPORT_NAME = "acme.adk"
VERSION = "1.2.3"

FILES: dict[str, str] = {
    "acme/adk/__init__.py": """
        from .agents import BaseAgent, LlmAgent, ParallelAgent, SequentialAgent
        from .models import types
        from .runners import Runner

        __version__ = "1.2.3"
    """,
    "acme/adk/runners.py": """
        from .models import types


        class Runner:
            def __init__(self, *, app_name: str, agent, session_service=None):
                self.app_name, self.agent, self.session_service = app_name, agent, session_service

            async def run_async(self, *, user_id: str, session_id: str, new_message: types.Content):
                yield new_message
    """,
    "acme/adk/models/__init__.py": "",
    "acme/adk/models/types.py": """
        class Part:
            def __init__(self, *, text: str = ""):
                self.text = text


        class Content:
            def __init__(self, *, role: str = "user", parts=None):
                self.role, self.parts = role, list(parts or [])
    """,
    "acme/adk/agents/__init__.py": """
        from .base_agent import BaseAgent
        from .llm_agent import LlmAgent
        from .parallel_agent import ParallelAgent
        from .sequential_agent import SequentialAgent
    """,
    "acme/adk/agents/base_agent.py": """
        class BaseAgent:
            def __init__(self, *, name: str, sub_agents: list | None = None):
                self.name, self.sub_agents = name, list(sub_agents or [])
    """,
    "acme/adk/agents/llm_agent.py": """
        from .base_agent import BaseAgent


        class LlmAgent(BaseAgent):
            def __init__(self, *, name: str, model: str = "", instruction: str = "", tools=None):
                super().__init__(name=name)
    """,
    "acme/adk/agents/parallel_agent.py": """
        from .base_agent import BaseAgent


        class ParallelAgent(BaseAgent):
            \"\"\"Runs its sub-agents concurrently.\"\"\"
    """,
    "acme/adk/agents/sequential_agent.py": """
        from .base_agent import BaseAgent


        class SequentialAgent(BaseAgent):
            \"\"\"Runs its sub-agents one after the other.\"\"\"
    """,
    # an optional dependency that is not installed: the module fails to import
    "acme/adk/agents/remote_a2a_agent.py": """
        import a2a_sdk_not_installed

        from .base_agent import BaseAgent


        class RemoteA2aAgent(BaseAgent):
            \"\"\"Talks to a remote agent over A2A.\"\"\"
    """,
    "acme/adk/tools/__init__.py": """
        from .function_tool import FunctionTool
    """,
    "acme/adk/tools/function_tool.py": """
        class FunctionTool:
            def __init__(self, func):
                self.func = func
    """,
    # a subpackage whose __init__ fails: its modules are never imported
    "acme/adk/tools/openapi_tool/__init__.py": """
        import yaml_parser_not_installed

        from .openapi_toolset import OpenAPIToolset
    """,
    "acme/adk/tools/openapi_tool/openapi_toolset.py": """
        class OpenAPIToolset:
            def __init__(self, *, spec_str: str, spec_str_type: str = "json"):
                self.spec = spec_str
    """,
    # a name only mentioned (made at run time) by a module that fails to import
    "acme/adk/plugins/__init__.py": """
        import plugin_extra_not_installed

        _LAZY = {"SaveFilesAsArtifactsPlugin": "._save_files"}


        def __getattr__(name):
            module = __import__(_LAZY[name], globals(), level=1)
            return getattr(module, "PLUGIN")
    """,
}

MULTI_FILES: dict[str, str] = {"acme_one.py": "ONE = 1\n", "acme_two.py": "TWO = 2\n"}


def _dist_info(site: Path, name: str, version: str, files: list[str]) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir()
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (folder / "INSTALLER").write_text("test\n")
    listed = [*files, f"{folder.name}/METADATA", f"{folder.name}/INSTALLER", f"{folder.name}/RECORD"]
    (folder / "RECORD").write_text("".join(f"{path},,\n" for path in listed))


def make_env(where: Path) -> Path:
    """Create the environment under ``where``; returns its interpreter."""
    import pytest as host_pytest  # noqa: PLC0415

    venv = where / "acme_env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "_host_pytest.pth").write_text(str(pytest_site()) + "\n")
    for rel, text in {**FILES, **MULTI_FILES}.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    _dist_info(site, DISTRIBUTION, VERSION, list(FILES))
    _dist_info(site, "acme-multi", "0.1", list(MULTI_FILES))
    assert host_pytest  # the host's pytest is what the proofs run under
    return venv / "bin" / "python"


def pytest_site() -> Path:
    """The host folder that holds pytest (shown read-only in the sandbox)."""
    return Path(pytest.__file__).resolve().parent.parent


def sandbox_settings(python: Path, timeout_s: float = 60.0) -> SandboxSettings:
    return SandboxSettings(python=python, timeout_s=timeout_s, extra_ro_binds=(pytest_site(),))


def offline_prover(where: Path) -> tuple[SandboxSettings, OfflineProver]:
    """The sandbox settings of a fresh environment under ``where``, and an offline prover on its probed library."""
    settings = sandbox_settings(make_env(where))
    return settings, OfflineProver(probe_environment(settings, DISTRIBUTION, import_name=IMPORT_NAME))


def mc(slug: str, question: str, options: dict[str, str], answer: str) -> Case:
    return Case(f"acme_mc:{slug}", "acme_mc", "multiple_choice", "acme_mc.yaml", 0, question, options=options, correct_answer=answer)


E = {"E": "None of the above"}

#: The ADK-shaped suite, with the verdict each question must get (on an idle or a busy machine).
SUITE: list[tuple[Case, str]] = [
    (
        mc(
            "import_runner",
            "Which is the correct import statement for the `Runner` class?",
            {
                "A": "from acme.adk.runners import Runner",
                "B": "from acme.adk.agent_runner import Runner",
                "C": "from acme.adk.core import Runner",
                **E,
            },
            "A",
        ),
        "Valid",
    ),
    (
        mc(
            "types_part",
            "Which type represents the fundamental unit of content within a message?",
            {"A": "types.Element", "B": "types.Part", "C": "types.Chunk", **E},
            "B",
        ),
        "Unverifiable",  # the key only exists (a necessary check): "None of the above" stays open
    ),
    (
        mc(
            "parallel_agent",
            "Which agent class runs its sub-agents concurrently?",
            {"A": "ConcurrentAgent", "B": "ParallelAgent", "C": "ThreadedAgent", **E},
            "B",
        ),
        "Valid",
    ),
    (
        mc(
            "runner_new_message",
            "When calling `runner.run_async()`, which parameter is used to pass the user's input message?",
            {"A": "message", "B": "input", "C": "new_message", "D": "content", **E},
            "C",
        ),
        "Unverifiable",  # the key only exists (a necessary check): "None of the above" stays open
    ),
    # defined only in a module that fails to import: undecided, never "not defined anywhere"
    (
        mc(
            "remote_a2a",
            "Which agent class talks to a remote agent over A2A?",
            {"A": "RemoteA2aAgent", "B": "A2aProxyAgent", "C": "RemoteAgentClient", **E},
            "A",
        ),
        "Unverifiable",
    ),
    # the marked answer moved to "None of the above": it must not come out Valid
    (
        mc(
            "openapi_moved",
            "Which class turns an OpenAPI spec into tools?",
            {"A": "OpenAPIToolset", "B": "SwaggerToolset", "C": "RestApiToolset", **E},
            "E",
        ),
        "Unverifiable",
    ),
    (
        mc(
            "save_files_moved",
            "Which plugin class saves uploaded files as artifacts?",
            {"A": "SaveFilesAsArtifactsPlugin", "B": "FileArtifactPlugin", **E},
            "E",
        ),
        "Unverifiable",
    ),
]


@dataclass
class CpuHog:
    """Busy-loop processes, one per core left idle by the other test workers, each bounded in time; killed by PID when the block ends."""

    processes: list[subprocess.Popen]

    def all_running(self) -> bool:
        return all(p.poll() is None for p in self.processes)


def idle_cores() -> int:
    """The cores that the other workers of a parallel test run do not keep busy (at least one)."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    others = int(workers) - 1 if workers.isdigit() else 0
    return max(1, (os.cpu_count() or 2) - others)


@contextmanager
def cpu_hog(max_seconds: float, workers: int | None = None) -> Iterator[CpuHog]:
    """Keep every core busy for at most ``max_seconds`` (each loop ends by itself then); killed on exit.

    ``workers`` defaults to a loop per core that the test run's other workers leave: under pytest-xdist
    (``PYTEST_XDIST_WORKER_COUNT``) those keep their own cores busy, and a loop on every core besides cost the
    suite the CPU time of a whole core while the test ran (about 40 s on 2 cores).
    """
    code = f"import time\nend = time.monotonic() + {float(max_seconds)!r}\nwhile time.monotonic() < end:\n    pass\n"
    processes = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(workers or idle_cores())]
    try:
        yield CpuHog(processes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        for process in processes:
            process.wait(timeout=30)
