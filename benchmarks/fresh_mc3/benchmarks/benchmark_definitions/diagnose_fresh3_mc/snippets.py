"""Code snippets for the 'diagnose_fresh3_mc' questions.

Each snippet holds a setup mistake. Sections hold only the code under test; the imports sit outside them, as in
the upstream suites. The tests below pin down the behaviour on google-adk 2.13 (see ../../../truth.yaml for both
library versions).
"""

import asyncio

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.memory import BaseMemoryService
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models import Gemini
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import BaseTool, ToolContext, VertexAiSearchTool
from google.genai import types
from pydantic import ValidationError


def snippet_tool_without_name():
    # --8<-- [start:tool_without_name]
    class WeatherTool(BaseTool):
        """Looks up the weather forecast for a city."""

        async def run_async(self, *, args, tool_context):
            return {"city": args["city"], "forecast": "sunny"}

    weather_agent = LlmAgent(
        name="weather_agent",
        model="gemini-2.5-flash",
        instruction="Answer weather questions with the weather tool.",
        tools=[WeatherTool()],
    )
    # --8<-- [end:tool_without_name]
    return weather_agent


def test_tool_without_name():
    with pytest.raises(TypeError, match=r"missing 2 required keyword-only arguments: 'name' and 'description'"):
        snippet_tool_without_name()


# --8<-- [start:function_calls_not_called]
async def print_tool_calls(runner, session_id: str, message: types.Content):
    async for event in runner.run_async(user_id="user_42", session_id=session_id, new_message=message):
        for call in event.get_function_calls:
            print("model calls", call.name, call.args)


# --8<-- [end:function_calls_not_called]


class ScriptedRunner:
    """Stands in for a runner: yields one event in which the model calls a tool."""

    async def run_async(self, **_):
        call = types.FunctionCall(name="get_weather", args={"city": "Oslo"})
        yield Event(author="assistant", content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def test_function_calls_not_called():
    message = types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")])
    with pytest.raises(TypeError, match="'method' object is not iterable"):
        asyncio.run(print_tool_calls(ScriptedRunner(), "s1", message))


# --8<-- [start:search_memory_without_service]
async def recall_preferences(topic: str, tool_context: ToolContext) -> dict:
    """Looks up what the user told us earlier about a topic."""
    found = await tool_context.search_memory(topic)
    return {"memories": [memory.content.parts[0].text for memory in found.memories]}


concierge = LlmAgent(
    name="concierge",
    model="gemini-2.5-flash",
    instruction="Use recall_preferences before suggesting a restaurant.",
    tools=[recall_preferences],
)
runner = Runner(agent=concierge, app_name="concierge", session_service=InMemorySessionService())
# --8<-- [end:search_memory_without_service]


async def call_tool_as_runner_would(a_runner: Runner, topic: str) -> dict:
    """Calls the tool with a ToolContext built from the runner's services, as the runner does for a tool call."""
    session = await a_runner.session_service.create_session(app_name=a_runner.app_name, user_id="user_42")
    context = InvocationContext(
        session_service=a_runner.session_service,
        memory_service=a_runner.memory_service,
        artifact_service=a_runner.artifact_service,
        invocation_id="inv-1",
        agent=a_runner.agent,
        session=session,
    )
    return await recall_preferences(topic, ToolContext(context))


def test_search_memory_without_service():
    assert runner.memory_service is None
    with pytest.raises(ValueError, match="Memory service is not available"):
        asyncio.run(call_tool_as_runner_would(runner, "food"))


def snippet_code_executor_as_string():
    # --8<-- [start:code_executor_as_string]
    analyst = LlmAgent(
        name="analyst",
        model="gemini-2.5-flash",
        instruction="Compute the statistics the user asks for by writing and running Python code.",
        code_executor="built_in",
    )
    # --8<-- [end:code_executor_as_string]
    return analyst


def test_code_executor_as_string():
    with pytest.raises(ValidationError, match="code_executor"):
        snippet_code_executor_as_string()


def snippet_gemini_model_name():
    # --8<-- [start:gemini_model_name]
    support_agent = LlmAgent(
        name="support_agent",
        model=Gemini(model_name="gemini-2.0-flash"),
        instruction="Help customers with their orders.",
    )
    # --8<-- [end:gemini_model_name]
    return support_agent


def test_gemini_model_name():
    assert snippet_gemini_model_name().canonical_model.model == "gemini-2.5-flash"


# --8<-- [start:assign_tool_context_state]
def reset_cart(tool_context: ToolContext) -> dict:
    """Empties the shopping cart."""
    tool_context.state = {"cart": [], "cart_total": 0}
    return {"status": "emptied"}


# --8<-- [end:assign_tool_context_state]


async def _tool_context() -> ToolContext:
    service = InMemorySessionService()
    session = await service.create_session(app_name="shop", user_id="user_42", state={"cart": ["mug"], "cart_total": 12})
    agent = LlmAgent(name="shop_agent", model="gemini-2.5-flash", tools=[reset_cart])
    return ToolContext(InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session))


def test_assign_tool_context_state():
    with pytest.raises(AttributeError, match="property 'state' of 'Context' object has no setter"):
        reset_cart(asyncio.run(_tool_context()))


# --8<-- [start:memory_entry_from_string]
class NotesMemoryService(BaseMemoryService):
    """Keeps the user's plain-text messages and returns those that mention the query."""

    def __init__(self, notes: dict[str, list[str]]):
        self.notes = notes

    async def add_session_to_memory(self, session):
        for event in session.events:
            if event.content and event.content.parts and event.content.parts[0].text:
                self.notes.setdefault(session.user_id, []).append(event.content.parts[0].text)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        hits = [note for note in self.notes.get(user_id, []) if query.lower() in note.lower()]
        return SearchMemoryResponse(memories=[MemoryEntry(content=note, author="user") for note in hits])


# --8<-- [end:memory_entry_from_string]


def test_memory_entry_from_string():
    service = NotesMemoryService({"user_42": ["I am vegetarian."]})
    with pytest.raises(ValidationError, match="Input should be a valid dictionary or object to extract fields from"):
        asyncio.run(service.search_memory(app_name="diner", user_id="user_42", query="vegetarian"))


def snippet_search_tool_without_source():
    # --8<-- [start:search_tool_without_source]
    search_tool = VertexAiSearchTool(filter='category: "returns"', max_results=5)
    policy_agent = LlmAgent(
        name="policy_agent",
        model="gemini-2.5-flash",
        instruction="Answer questions from the company's policy documents.",
        tools=[search_tool],
    )
    # --8<-- [end:search_tool_without_source]
    return policy_agent


def test_search_tool_without_source():
    with pytest.raises(ValueError, match="^Either data_store_id or search_engine_id must be specified.$"):
        snippet_search_tool_without_source()
