"""Helpers the evidence snippets of every fresh set's ``truth.yaml`` import (``check_truth.py`` puts this folder on
the path of every set's evidence). Each set added the helpers its evidence needed here: the first ``norm`` to
``defined_anywhere``; the second ``invocation_context``, ``events_of`` and ``outcome``; the third ``members``; the
seventh ``cli_options``; the ninth ``read_anywhere``.

Everything printed is normalised so that it is the same from run to run: object addresses, pydantic's
documentation links and runs of whitespace are folded.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


def norm(text: str) -> str:
    """One line: whitespace runs folded, ``0x7f..`` addresses and pydantic's versioned doc links made stable."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x_", text)
    text = re.sub(r"https://errors\.pydantic\.dev/[^/\s]+/", "https://errors.pydantic.dev/_/", text)
    return " ".join(text.split())


def run(label: str, fn, *args, **kwargs):
    """Call ``fn`` (awaited when it returns a coroutine) and print ``label: no error -> repr`` or ``label: raised Type: message``."""
    try:
        result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
    except Exception as exc:  # the evidence is the exception itself
        print(f"{label}: raised {type(exc).__module__}.{type(exc).__name__}: {norm(str(exc))}")
        return None
    print(f"{label}: no error -> {norm(repr(result))}")
    return result


def attr_doc(cls: type, name: str) -> str:
    """The docstring written under attribute ``name`` in the source of ``cls`` or a base class (pydantic keeps none)."""
    for klass in cls.__mro__:
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        match = re.search(rf"^\s+{re.escape(name)}\s*:[^\n]*\n\s+(?:\"\"\"|''')(.*?)(?:\"\"\"|''')", source, re.S | re.M)
        if match:
            return norm(match.group(1))
    return "<no attribute docstring>"


def doc(obj, words: int = 40) -> str:
    """The first ``words`` words of an object's docstring, normalised."""
    return " ".join(norm(inspect.getdoc(obj) or "<no docstring>").split()[:words])


def has(module: str, *names: str) -> None:
    """Print, for each name, whether ``module`` has it."""
    mod = importlib.import_module(module)
    print(module, {name: hasattr(mod, name) for name in names})


def _adk_sources() -> list[str]:
    """The text of every module of the installed google.adk."""
    import google.adk

    root = Path(google.adk.__file__).parent
    return [path.read_text(encoding="utf-8", errors="replace") for path in sorted(root.rglob("*.py"))]


def defined_anywhere(*names: str) -> None:
    """Print, for each name, whether any module of google.adk defines a class or function of that name."""
    texts = _adk_sources()
    found = {name: any(re.search(rf"^\s*(?:class|def|async def)\s+{re.escape(name)}\b", text, re.M) for text in texts) for name in names}
    print("defined in google.adk:", found)


def read_anywhere(*names: str) -> None:
    """Print, for each name, whether it occurs as a whole identifier in any module of the installed google.adk."""
    texts = _adk_sources()
    found = {name: any(re.search(rf"\b{re.escape(name)}\b", text) for text in texts) for name in names}
    print("occurs in google.adk:", found)


async def invocation_context(agent, state: dict | None = None):
    """An ``InvocationContext`` for ``agent`` on a new in-memory session holding ``state``."""
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.sessions import InMemorySessionService

    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42", state=state or {})
    return InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)


async def events_of(runner, text: str = "Hi", session_id: str | None = None) -> list[str]:
    """Run ``text`` through ``runner`` on a new session (or ``session_id``); one ``author: text`` line per event."""
    from google.genai import types

    if session_id is None:
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="user_42")
        session_id = session.id
    message = types.Content(role="user", parts=[types.Part(text=text)])
    lines = []
    async for event in runner.run_async(user_id="user_42", session_id=session_id, new_message=message):
        parts = event.content.parts if event.content and event.content.parts else []
        lines.append(f"{event.author}: {' '.join(part.text or '' for part in parts) or '<no text>'}")
    return lines


def outcome(label: str, fn, *args) -> None:
    """Like ``run``, but without the return value's repr (for code that returns objects holding fresh ids or times)."""

    def call():
        result = fn(*args)
        if inspect.iscoroutine(result):
            asyncio.run(result)

    run(label, call)


def members(cls: type, *names: str) -> None:
    """Print, for each name, whether ``cls`` has it as an attribute or as a pydantic field."""
    fields = getattr(cls, "model_fields", {})
    print(cls.__name__, {name: hasattr(cls, name) or name in fields for name in names})


def cli_options(command: list[str], *options: str) -> str:
    """Print, for each option, whether ``adk <command> --help`` lists it; return that help text."""
    from click.testing import CliRunner
    from google.adk.cli.cli_tools_click import main

    out = CliRunner().invoke(main, [*command, "--help"]).output
    listed = set(re.findall(r"--[a-zA-Z0-9_-]+", out))
    print("adk", " ".join(command), {option: option in listed for option in options})
    return out
