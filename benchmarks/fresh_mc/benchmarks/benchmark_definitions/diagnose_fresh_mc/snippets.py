"""Code snippets for the 'diagnose_fresh_mc' questions.

Each snippet holds a setup mistake. Sections hold only the code under test; the imports and the shared
`root_agent` sit outside them, as in the upstream suites. The tests below pin down the behaviour on
google-adk 2.13 (see ../../../truth.yaml for both library versions).
"""

import asyncio

import pytest
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.apps import App
from google.adk.artifacts import InMemoryArtifactService
from google.adk.events import Event
from google.adk.plugins.logging_plugin import LoggingPlugin
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import AgentTool
from google.genai import types
from pydantic import ValidationError

root_agent = LlmAgent(
    name="assistant",
    model="gemini-2.5-flash",
    instruction="Answer customer questions politely.",
)


# --8<-- [start:runner_without_session_service]
def snippet_runner_without_session_service():
    runner = Runner(app_name="support_app", agent=root_agent)
    return runner


# --8<-- [end:runner_without_session_service]


def test_runner_without_session_service():
    with pytest.raises(TypeError, match="session_service"):
        snippet_runner_without_session_service()


# --8<-- [start:create_session_positional]
async def snippet_create_session_positional():
    session_service = InMemorySessionService()
    session = await session_service.create_session("support_app", "user_42")
    return session.id


# --8<-- [end:create_session_positional]


def test_create_session_positional():
    with pytest.raises(TypeError, match="positional argument"):
        asyncio.run(snippet_create_session_positional())


# --8<-- [start:create_session_not_awaited]
def snippet_create_session_not_awaited():
    session_service = InMemorySessionService()
    session = session_service.create_session(app_name="support_app", user_id="user_42")
    print(f"Started session {session.id}")


# --8<-- [end:create_session_not_awaited]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_create_session_not_awaited():
    with pytest.raises(AttributeError, match="'coroutine' object has no attribute 'id'"):
        snippet_create_session_not_awaited()


# --8<-- [start:artifact_as_string]
async def snippet_artifact_as_string():
    artifact_service = InMemoryArtifactService()
    report = ...  # the rendered quarterly report, a str
    version = await artifact_service.save_artifact(
        app_name="reports",
        user_id="user_42",
        session_id="session_1",
        filename="q3_report.txt",
        artifact=report,
    )
    return version


# --8<-- [end:artifact_as_string]


def test_artifact_as_string():
    with pytest.raises(AttributeError):
        asyncio.run(snippet_artifact_as_string())


# --8<-- [start:agent_tool_in_sub_agents]
def snippet_agent_tool_in_sub_agents():
    researcher = LlmAgent(
        name="researcher",
        model="gemini-2.5-flash",
        description="Finds facts about a topic.",
    )
    coordinator = LlmAgent(
        name="coordinator",
        model="gemini-2.5-flash",
        instruction="Use the researcher to answer questions.",
        sub_agents=[AgentTool(agent=researcher)],
    )
    return coordinator


# --8<-- [end:agent_tool_in_sub_agents]


def test_agent_tool_in_sub_agents():
    with pytest.raises(ValidationError, match="sub_agents.0"):
        snippet_agent_tool_in_sub_agents()


# --8<-- [start:plugin_class_not_instance]
def snippet_plugin_class_not_instance():
    app = App(
        name="support_app",
        root_agent=root_agent,
        plugins=[LoggingPlugin],
    )
    return app


# --8<-- [end:plugin_class_not_instance]


def test_plugin_class_not_instance():
    with pytest.raises(ValidationError, match="instance of BasePlugin"):
        snippet_plugin_class_not_instance()


# --8<-- [start:custom_agent_missing_impl]
class TicketRouter(BaseAgent):
    """Routes support tickets by keyword, without calling a model."""

    async def handle(self, ctx):
        text = ctx.user_content.parts[0].text
        queue = "hardware" if "printer" in text.lower() else "general"
        yield Event(
            author=self.name,
            content=types.Content(role="model", parts=[types.Part(text=f"Routed to {queue}")]),
        )


async def snippet_custom_agent_missing_impl():
    runner = InMemoryRunner(agent=TicketRouter(name="router"))
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="The printer is jammed")])
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        print(event.author, event.content)


# --8<-- [end:custom_agent_missing_impl]


def test_custom_agent_missing_impl():
    with pytest.raises(NotImplementedError, match="_run_async_impl"):
        asyncio.run(snippet_custom_agent_missing_impl())


# --8<-- [start:part_from_text_positional]
def snippet_part_from_text_positional():
    message = types.Content(
        role="user",
        parts=[types.Part.from_text("What's the weather in Paris?")],
    )
    return message


# --8<-- [end:part_from_text_positional]


def test_part_from_text_positional():
    with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
        snippet_part_from_text_positional()
