"""Code snippets for the 'diagnose_fresh5_mc' questions.

Each snippet holds a setup mistake. Sections hold only the code under test; the imports and the helpers that the
questions name (a custom agent, a pet-store spec, a folder of agent configs) sit outside them, as in the upstream
suites. The tests below pin down the behaviour on google-adk 2.13 (see ../../../truth.yaml for both library versions).
"""

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from google.adk.agents import BaseAgent, LlmAgent, config_agent_utils
from google.adk.events import Event
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.adk.tools.openapi_tool import OpenAPIToolset
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


PET_SPEC = {
    "openapi": "3.0.0",
    "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "https://pets.example.com"}],
    "paths": {"/pets": {"get": {"operationId": "listPets", "summary": "List all pets", "responses": {"200": {"description": "ok"}}}}},
}
SPEC_DIR = Path(tempfile.mkdtemp(prefix="fresh5_"))
(SPEC_DIR / "pets.yaml").write_text(yaml.safe_dump(PET_SPEC), encoding="utf-8")
CONFIG_DIR = SPEC_DIR
(CONFIG_DIR / "step.yaml").write_text(
    "agent_class: LlmAgent\nname: step\nmodel: gemini-2.0-flash\ninstruction: Summarise the text.\n", encoding="utf-8"
)


# --8<-- [start:runner_positional]
def snippet_runner_positional():
    root_agent = LlmAgent(name="support", model="gemini-2.0-flash", instruction="Help the customer.")
    runner = Runner(root_agent, "support_app", InMemorySessionService())
    return runner


# --8<-- [end:runner_positional]


# --8<-- [start:openapi_yaml_as_json]
def snippet_openapi_yaml_as_json():
    spec_text = (SPEC_DIR / "pets.yaml").read_text()
    toolset = OpenAPIToolset(spec_str=spec_text)
    return LlmAgent(name="pet_clerk", model="gemini-2.0-flash", tools=[toolset])


# --8<-- [end:openapi_yaml_as_json]


# --8<-- [start:config_instructions_typo]
ROOT_AGENT_YAML = """\
agent_class: LlmAgent
name: helper
model: gemini-2.0-flash
instructions: Answer in one sentence.
"""


def snippet_config_instructions_typo():
    path = CONFIG_DIR / "root_agent.yaml"
    path.write_text(ROOT_AGENT_YAML)
    return config_agent_utils.from_config(str(path))


# --8<-- [end:config_instructions_typo]


# --8<-- [start:function_tool_description]
def get_weather(city: str) -> dict:
    return {"city": city, "forecast": "sunny"}


def snippet_function_tool_description():
    weather_tool = FunctionTool(get_weather, description="Returns today's forecast for a city.")
    return LlmAgent(name="forecaster", model="gemini-2.0-flash", tools=[weather_tool])


# --8<-- [end:function_tool_description]


# --8<-- [start:callback_user_content_assign]
def polite_prefix(callback_context):
    text = callback_context.user_content.parts[0].text
    callback_context.user_content = types.Content(role="user", parts=[types.Part(text="Please: " + text)])
    return None


async def snippet_callback_user_content_assign():
    desk = FrontDesk(name="desk", before_agent_callback=polite_prefix)
    runner = InMemoryRunner(agent=desk, app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="open the door")])
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        print(event.content.parts[0].text)


# --8<-- [end:callback_user_content_assign]


# --8<-- [start:config_sub_agent_path]
PIPELINE_YAML = """\
agent_class: SequentialAgent
name: pipeline
sub_agents:
  - path: step.yaml
"""


def snippet_config_sub_agent_path():
    path = CONFIG_DIR / "pipeline.yaml"
    path.write_text(PIPELINE_YAML)
    return config_agent_utils.from_config(str(path))


# --8<-- [end:config_sub_agent_path]


def test_runner_positional():
    with pytest.raises(TypeError, match="takes 1 positional argument but 4 were given"):
        snippet_runner_positional()


def test_openapi_yaml_as_json():
    with pytest.raises(json.JSONDecodeError, match="Expecting value: line 1 column 1"):
        snippet_openapi_yaml_as_json()


def test_config_instructions_typo():
    with pytest.raises(ValidationError, match="instructions\n  Extra inputs are not permitted"):
        snippet_config_instructions_typo()


def test_function_tool_description():
    with pytest.raises(TypeError, match="unexpected keyword argument 'description'"):
        snippet_function_tool_description()


def test_callback_user_content_assign():
    with pytest.raises(AttributeError, match="property 'user_content' of 'Context' object has no setter"):
        asyncio.run(snippet_callback_user_content_assign())


def test_config_sub_agent_path():
    with pytest.raises(ValidationError, match="sub_agents.0.path\n  Extra inputs are not permitted"):
        snippet_config_sub_agent_path()
