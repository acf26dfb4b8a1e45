"""Code snippets for the 'diagnose_fresh2_mc' questions.

Each snippet holds a setup mistake. Sections hold only the code under test; the imports, the shared
`root_agent` and the custom `FrontDesk` agent sit outside them, as in the upstream suites. The tests below pin
down the behaviour on google-adk 2.13 (see ../../../truth.yaml for both library versions).
"""

import asyncio
from collections.abc import AsyncGenerator

import pytest
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.genai import types
from pydantic import ValidationError

root_agent = LlmAgent(
    name="assistant",
    model="gemini-2.5-flash",
    instruction="Answer customer questions politely.",
)


class FrontDesk(BaseAgent):
    """A custom agent that answers every message with a fixed greeting, without calling a model."""

    async def _run_async_impl(self, ctx) -> AsyncGenerator[Event, None]:
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text="Welcome!")]),
        )


# --8<-- [start:instruction_provider_writes_state]
def greeting_instruction(ctx: ReadonlyContext) -> str:
    ctx.state["greeted"] = True
    name = ctx.state.get("user_name", "the user")
    return f"Greet {name} once, then help with their order."


greeter = LlmAgent(
    name="greeter",
    model="gemini-2.5-flash",
    instruction=greeting_instruction,
)


async def build_instruction(invocation_context):
    # what the LLM flow does when it prepares the model request
    return await greeter.canonical_instruction(ReadonlyContext(invocation_context))


# --8<-- [end:instruction_provider_writes_state]


async def _invocation_context(state: dict) -> InvocationContext:
    service = InMemorySessionService()
    session = await service.create_session(app_name="shop", user_id="user_42", state=state)
    return InvocationContext(session_service=service, invocation_id="inv-1", agent=greeter, session=session)


def test_instruction_provider_writes_state():
    async def go():
        return await build_instruction(await _invocation_context({"user_name": "Ana"}))

    with pytest.raises(TypeError, match="does not support item assignment"):
        asyncio.run(go())


# --8<-- [start:confirmation_flag_positional]
def delete_customer(customer_id: str) -> dict:
    """Deletes a customer record."""
    return {"deleted": customer_id}


def snippet_confirmation_flag_positional():
    delete_tool = FunctionTool(delete_customer, True)  # ask the user before deleting
    return delete_tool


# --8<-- [end:confirmation_flag_positional]


def test_confirmation_flag_positional():
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        snippet_confirmation_flag_positional()


# --8<-- [start:append_event_with_session_id]
async def record_note(session_service, session):
    event = Event(
        author="user",
        invocation_id="inv-1",
        content=types.Content(role="user", parts=[types.Part(text="Customer prefers email.")]),
    )
    await session_service.append_event(session.id, event)


# --8<-- [end:append_event_with_session_id]


def test_append_event_with_session_id():
    async def go():
        service = InMemorySessionService()
        session = await service.create_session(app_name="crm", user_id="user_42")
        await record_note(service, session)

    with pytest.raises(AttributeError, match="'str' object has no attribute 'app_name'"):
        asyncio.run(go())


# --8<-- [start:recent_events_as_dict]
async def load_recent(session_service):
    session = await session_service.get_session(
        app_name="crm",
        user_id="user_42",
        session_id="call-9",
        config={"num_recent_events": 2},
    )
    return session.events


# --8<-- [end:recent_events_as_dict]


def test_recent_events_as_dict():
    async def go():
        service = InMemorySessionService()
        await service.create_session(app_name="crm", user_id="user_42", session_id="call-9")
        return await load_recent(service)

    with pytest.raises(AttributeError, match="'dict' object has no attribute 'num_recent_events'"):
        asyncio.run(go())


# --8<-- [start:state_changed_on_fetched_session]
async def count_visit(session_service):
    session = await session_service.get_session(app_name="shop", user_id="user_42", session_id="visit-1")
    session.state["visits"] = session.state.get("visits", 0) + 1

    # later, e.g. on the next request
    session = await session_service.get_session(app_name="shop", user_id="user_42", session_id="visit-1")
    print(session.state.get("visits"))


# --8<-- [end:state_changed_on_fetched_session]


def test_state_changed_on_fetched_session(capsys):
    async def go():
        service = InMemorySessionService()
        await service.create_session(app_name="shop", user_id="user_42", session_id="visit-1")
        await count_visit(service)

    asyncio.run(go())
    assert capsys.readouterr().out.strip() == "None"


# --8<-- [start:run_without_creating_session]
session_service = InMemorySessionService()


async def ask(question: str):
    runner = Runner(app_name="support_app", agent=root_agent, session_service=session_service)
    message = types.Content(role="user", parts=[types.Part(text=question)])
    async for event in runner.run_async(user_id="user_42", session_id="ticket-7", new_message=message):
        if event.is_final_response():
            print(event.content.parts[0].text)


# --8<-- [end:run_without_creating_session]


def test_run_without_creating_session():
    with pytest.raises(ValueError, match="Session not found: ticket-7"):
        asyncio.run(ask("Where is my order?"))


# --8<-- [start:tool_called_in_list]
def get_store_hours() -> dict:
    """Returns the store's opening hours."""
    return {"open": "09:00", "close": "18:00"}


def snippet_tool_called_in_list():
    store_agent = LlmAgent(
        name="store_agent",
        model="gemini-2.5-flash",
        instruction="Answer questions about the store.",
        tools=[get_store_hours()],
    )
    return store_agent


# --8<-- [end:tool_called_in_list]


def test_tool_called_in_list():
    with pytest.raises(ValidationError, match="tools.0"):
        snippet_tool_called_in_list()


# --8<-- [start:callback_saves_artifact_without_service]
async def save_transcript(callback_context):
    transcript = types.Part(text=f"Session {callback_context.session.id} started")
    await callback_context.save_artifact("transcript.txt", transcript)


async def snippet_callback_saves_artifact_without_service():
    agent = FrontDesk(name="front_desk", before_agent_callback=save_transcript)
    runner = Runner(app_name="desk", agent=agent, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="desk", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="Hello")])
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        print(event.author, event.content.parts[0].text)


# --8<-- [end:callback_saves_artifact_without_service]


def test_callback_saves_artifact_without_service():
    with pytest.raises(ValueError, match="Artifact service is not initialized"):
        asyncio.run(snippet_callback_saves_artifact_without_service())
