"""Code snippets for the 'diagnose_fresh6_mc' questions.

Each snippet holds a setup mistake. Sections hold only the code under test; the imports and the helper that builds a
read-only context (as the runner builds it, without an artifact service) sit outside them, as in the upstream suites.
The tests below pin down the behaviour on google-adk 2.13 (see ../../../truth.yaml for both library versions).
"""

import asyncio

import pytest
from google.adk.agents import LlmAgent, SequentialAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.sessions import InMemorySessionService
from google.adk.utils.instructions_utils import inject_session_state
from pydantic import ValidationError


async def make_context(agent, state):
    """A ReadonlyContext on a new session holding ``state``; no artifact service is configured."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42", state=state)
    ctx = InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)
    return ReadonlyContext(ctx)


# --8<-- [start:sequential_with_model]
def snippet_sequential_with_model():
    writer = LlmAgent(name="writer", instruction="Write a draft.")
    editor = LlmAgent(name="editor", instruction="Edit the draft.")
    return SequentialAgent(name="pipeline", model="gemini-2.0-flash", sub_agents=[writer, editor])


# --8<-- [end:sequential_with_model]


# --8<-- [start:artifact_placeholder]
async def snippet_artifact_placeholder():
    agent = LlmAgent(name="summariser", model="gemini-2.0-flash", instruction="Summarise: {artifact.notes.txt}")
    context = await make_context(agent, {})
    return await inject_session_state(agent.instruction, context)


# --8<-- [end:artifact_placeholder]


# --8<-- [start:user_prefix_placeholder]
async def snippet_user_prefix_placeholder():
    agent = LlmAgent(name="concierge", model="gemini-2.0-flash", instruction="Greet {user:name} warmly.")
    context = await make_context(agent, {"name": "Ana"})
    return await inject_session_state(agent.instruction, context)


# --8<-- [end:user_prefix_placeholder]


def lookup_order(order_id: str) -> dict:
    """Looks up an order by its id."""
    return {"order_id": order_id, "status": "shipped"}


# --8<-- [start:tools_not_a_list]
def snippet_tools_not_a_list():
    return LlmAgent(name="support", model="gemini-2.0-flash", tools=lookup_order)


# --8<-- [end:tools_not_a_list]


# --8<-- [start:tool_called_in_list]
def snippet_tool_called_in_list():
    return LlmAgent(name="support", model="gemini-2.0-flash", tools=[lookup_order("A-1001")])


# --8<-- [end:tool_called_in_list]


def test_tools_not_a_list():
    with pytest.raises(TypeError, match="^'function' object is not iterable$"):
        snippet_tools_not_a_list()


def test_tool_called_in_list():
    with pytest.raises(ValidationError, match="Input should be callable"):
        snippet_tool_called_in_list()


def test_sequential_with_model():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        snippet_sequential_with_model()


def test_artifact_placeholder():
    with pytest.raises(ValueError, match="^Artifact service is not initialized.$"):
        asyncio.run(snippet_artifact_placeholder())


def test_user_prefix_placeholder():
    with pytest.raises(KeyError) as caught:
        asyncio.run(snippet_user_prefix_placeholder())
    assert caught.value.args[0] == "Context variable not found: `user:name` in agent 'concierge'."
