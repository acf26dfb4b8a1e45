"""Code snippets for the 'diagnose_fresh4_mc' questions.

Each snippet holds a setup mistake. Sections hold only the code under test; the imports and the helpers that the
questions name (a custom agent, a toolset) sit outside them, as in the upstream suites. The tests below pin down the
behaviour on google-adk 2.13 (see ../../../truth.yaml for both library versions).
"""

import asyncio

import pytest
from google.adk.agents import BaseAgent, LlmAgent, SequentialAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.plugins.logging_plugin import LoggingPlugin
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool, google_search
from google.adk.tools.base_toolset import BaseToolset
from google.genai import types
from pydantic import ValidationError


class FrontDesk(BaseAgent):
    """A custom agent that answers "Welcome!" without calling a model."""

    async def _run_async_impl(self, ctx):
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text="Welcome!")]),
        )


def get_weather(city: str) -> dict:
    """Returns today's weather in a city."""
    return {"city": city, "weather": "sunny"}


def get_forecast(city: str, days: int = 3) -> dict:
    """Returns the weather forecast for a city."""
    return {"city": city, "days": days}


class WeatherToolset(BaseToolset):
    """Offers ``get_weather`` and ``get_forecast``, keeping those the base class's ``tool_filter`` selects."""

    async def get_tools(self, readonly_context=None):
        tools = [FunctionTool(get_weather), FunctionTool(get_forecast)]
        return [tool for tool in tools if self._is_tool_selected(tool, readonly_context)]


def snippet_duplicate_plugin_names():
    # --8<-- [start:duplicate_plugin_names]
    root_agent = LlmAgent(name="shop_assistant", model="gemini-2.5-flash", instruction="Help customers of the shop.")
    app = App(
        name="shop",
        root_agent=root_agent,
        plugins=[LoggingPlugin(), LoggingPlugin()],  # one for the console, one for the audit trail
    )
    runner = Runner(app=app, session_service=InMemorySessionService())
    # --8<-- [end:duplicate_plugin_names]
    return runner


def test_duplicate_plugin_names():
    with pytest.raises(ValueError, match=r"^Plugin with name 'logging_plugin' already registered\.$"):
        snippet_duplicate_plugin_names()


# --8<-- [start:plugin_without_super_init]
class AuditPlugin(BasePlugin):
    """Counts the runs of the app."""

    def __init__(self):
        self.runs = 0

    async def before_run_callback(self, *, invocation_context):
        self.runs += 1
        return None


def build_runner(root_agent):
    app = App(name="shop", root_agent=root_agent, plugins=[AuditPlugin()])
    return Runner(app=app, session_service=InMemorySessionService())


# --8<-- [end:plugin_without_super_init]


def test_plugin_without_super_init():
    with pytest.raises(AttributeError, match=r"'AuditPlugin' object has no attribute 'name'"):
        build_runner(FrontDesk(name="desk"))


def snippet_sequential_max_iterations():
    # --8<-- [start:sequential_max_iterations]
    drafter = LlmAgent(name="drafter", model="gemini-2.5-flash", instruction="Write or improve the draft.", output_key="draft")
    reviewer = LlmAgent(name="reviewer", model="gemini-2.5-flash", instruction="Review the draft.")
    pipeline = SequentialAgent(name="pipeline", sub_agents=[drafter, reviewer], max_iterations=3)
    # --8<-- [end:sequential_max_iterations]
    return pipeline


def test_sequential_max_iterations():
    with pytest.raises(ValidationError, match=r"max_iterations\s+Extra inputs are not permitted"):
        snippet_sequential_max_iterations()


def snippet_tool_filter_string():
    # --8<-- [start:tool_filter_string]
    weather_agent = LlmAgent(
        name="weather_agent",
        model="gemini-2.5-flash",
        instruction="Give the forecast for the city the user names.",
        tools=[WeatherToolset(tool_filter="get_forecast")],
    )
    # --8<-- [end:tool_filter_string]
    return weather_agent


def test_tool_filter_string():
    agent = snippet_tool_filter_string()
    assert asyncio.run(agent.tools[0].get_tools_with_prefix()) == []


# --8<-- [start:custom_llm_not_registered]
class HouseLlm(BaseLlm):
    """The company's own model server."""

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"house-.*"]

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False):
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Hello from house.")]))


assistant = LlmAgent(name="assistant", model="house-chat-1", instruction="Answer briefly.")
# --8<-- [end:custom_llm_not_registered]


def test_custom_llm_not_registered():
    with pytest.raises(ValueError, match=r"^Model house-chat-1 not found\."):
        _ = assistant.canonical_model


# --8<-- [start:search_tool_other_model]
async def prepare_request(tool_context):
    llm_request = LlmRequest(model="claude-3-5-sonnet")
    await google_search.process_llm_request(tool_context=tool_context, llm_request=llm_request)
    return llm_request


# --8<-- [end:search_tool_other_model]


async def _tool_context(agent):
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.tools import ToolContext

    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42")
    ctx = InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)
    return ToolContext(ctx)


def test_search_tool_other_model():
    async def go():
        await prepare_request(await _tool_context(FrontDesk(name="desk")))

    with pytest.raises(ValueError, match=r"^Google search tool is not supported for model claude-3-5-sonnet$"):
        asyncio.run(go())


# --8<-- [start:message_as_string]
async def ask(runner: InMemoryRunner, session_id: str, text: str) -> list[str]:
    replies = []
    async for event in runner.run_async(user_id="user_42", session_id=session_id, new_message=text):
        if event.content and event.content.parts:
            replies.append(event.content.parts[0].text)
    return replies


# --8<-- [end:message_as_string]


async def _ask_hello():
    runner = InMemoryRunner(agent=FrontDesk(name="desk"), app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="user_42")
    return await ask(runner, session.id, "Hello")


def test_message_as_string():
    with pytest.raises(AttributeError, match=r"^'str' object has no attribute 'role'$"):
        asyncio.run(_ask_hello())
