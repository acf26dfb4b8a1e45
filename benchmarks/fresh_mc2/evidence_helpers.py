"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

The first set's helpers (``benchmarks/fresh_mc/evidence_helpers.py``: ``norm``, ``run``, ``attr_doc``, ``doc``,
``has``, ``defined_anywhere``), re-exported, plus what this set's evidence needs besides: an invocation context
built without a model, and a runner loop that prints each event on one line.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "fresh_mc_evidence_helpers", Path(__file__).resolve().parent.parent / "fresh_mc" / "evidence_helpers.py"
)
assert _spec is not None and _spec.loader is not None
_first = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_first)

norm = _first.norm
run = _first.run
attr_doc = _first.attr_doc
doc = _first.doc
has = _first.has
defined_anywhere = _first.defined_anywhere


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
    import asyncio
    import inspect

    def call():
        result = fn(*args)
        if inspect.iscoroutine(result):
            asyncio.run(result)

    run(label, call)
