"""Code snippets for the 'diagnose_fresh7_mc' questions.

Each snippet holds a setup mistake. Sections hold only the code under test; the imports and the helpers (an invocation
context built as the runner builds it, a custom agent `Greeter` that answers "Welcome!" without calling a model, `ask`
that runs one message through a runner, and a `root_agent`) sit outside them, as in the upstream suites. The tests
below pin down the behaviour on google-adk 2.13 (see ../../../truth.yaml for both library versions).
"""

import asyncio

import pytest
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.artifacts import InMemoryArtifactService
from google.adk.code_executors import BaseCodeExecutor, UnsafeLocalCodeExecutor
from google.adk.code_executors.code_execution_utils import CodeExecutionResult
from google.adk.evaluation.eval_set import EvalSet
from google.adk.events import Event
from google.adk.memory import InMemoryMemoryService
from google.adk.planners import BuiltInPlanner
from google.adk.plugins import BasePlugin, ReflectAndRetryToolPlugin
from google.adk.runners import InMemoryRunner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from pydantic import ValidationError


async def make_invocation_context():
    """An InvocationContext on a new in-memory session, as the runner builds it."""
    agent = LlmAgent(name="analyst", model="gemini-2.0-flash")
    service = InMemorySessionService()
    session = await service.create_session(app_name="lab", user_id="user_42")
    return InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)


class Greeter(BaseAgent):
    """Answers "Welcome!" without calling a model."""

    async def _run_async_impl(self, ctx):
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text="Welcome!")]),
        )


async def ask(runner, text):
    """Runs ``text`` on a new session of ``runner``; one ``author: text`` line per reply."""
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text=text)])
    replies = []
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        if event.content and event.content.parts:
            replies.append(f"{event.author}: {event.content.parts[0].text}")
    return replies


root_agent = LlmAgent(name="support", model="gemini-2.0-flash", instruction="Help with orders.")


# --8<-- [start:stateful_local_executor]
def snippet_stateful_local_executor():
    return LlmAgent(
        name="analyst",
        model="gemini-2.0-flash",
        instruction="Use variables from earlier code runs.",
        code_executor=UnsafeLocalCodeExecutor(stateful=True),
    )


# --8<-- [end:stateful_local_executor]


# --8<-- [start:execute_code_string]
async def snippet_execute_code_string():
    ctx = await make_invocation_context()
    result = UnsafeLocalCodeExecutor().execute_code(ctx, "print(sum(range(5)))")
    return result.stdout


# --8<-- [end:execute_code_string]


# --8<-- [start:planner_positional]
def snippet_planner_positional():
    planner = BuiltInPlanner(types.ThinkingConfig(thinking_budget=1024))
    return LlmAgent(name="thinker", model="gemini-2.5-flash", planner=planner)


# --8<-- [end:planner_positional]


# --8<-- [start:plugin_sync_callback]
class AuditPlugin(BasePlugin):
    def before_agent_callback(self, *, agent, callback_context):
        print("audit", agent.name)


async def snippet_plugin_sync_callback():
    app = App(name="shop", root_agent=Greeter(name="greeter"), plugins=[AuditPlugin(name="audit")])
    runner = InMemoryRunner(app=app)
    return await ask(runner, "Hi")


# --8<-- [end:plugin_sync_callback]


# --8<-- [start:artifact_without_session]
async def snippet_artifact_without_session():
    service = InMemoryArtifactService()
    report = types.Part.from_text(text="Q3 revenue: 1.2M")
    await service.save_artifact(app_name="shop", user_id="ana", session_id="s1", filename="report.txt", artifact=report)
    return await service.load_artifact(app_name="shop", user_id="ana", filename="report.txt")


# --8<-- [end:artifact_without_session]


# --8<-- [start:custom_executor_method]
class SandboxExecutor(BaseCodeExecutor):
    def run_code(self, invocation_context, code_execution_input):
        return CodeExecutionResult(stdout="", stderr="sandbox not configured")


def snippet_custom_executor_method():
    return LlmAgent(name="analyst", model="gemini-2.0-flash", code_executor=SandboxExecutor())


# --8<-- [end:custom_executor_method]


# --8<-- [start:eval_set_without_cases]
def snippet_eval_set_without_cases():
    return EvalSet(eval_set_id="smoke_tests", name="Smoke tests")


# --8<-- [end:eval_set_without_cases]


# --8<-- [start:retry_without_limit]
def snippet_retry_without_limit():
    return App(name="shop", root_agent=root_agent, plugins=[ReflectAndRetryToolPlugin(max_retries=-1)])


# --8<-- [end:retry_without_limit]


# --8<-- [start:live_resumption_flag]
def snippet_live_resumption_flag():
    return RunConfig(streaming_mode=StreamingMode.BIDI, session_resumption=True)


# --8<-- [end:live_resumption_flag]


# --8<-- [start:memory_search_positional]
async def snippet_memory_search_positional():
    memory = InMemoryMemoryService()
    response = await memory.search_memory("shop", "user_42", "vegetarian")
    return [entry.content for entry in response.memories]


# --8<-- [end:memory_search_positional]


def test_stateful_local_executor():
    with pytest.raises(ValueError, match=r"^Cannot set `stateful=True` in UnsafeLocalCodeExecutor\.$"):
        snippet_stateful_local_executor()


def test_execute_code_string():
    with pytest.raises(AttributeError, match="^'str' object has no attribute 'code'$"):
        asyncio.run(snippet_execute_code_string())


def test_planner_positional():
    with pytest.raises(TypeError, match=r"takes 1 positional argument but 2 were given"):
        snippet_planner_positional()


def test_plugin_sync_callback(capsys):
    with pytest.raises(RuntimeError) as caught:
        asyncio.run(snippet_plugin_sync_callback())
    assert str(caught.value) == (
        "Error in plugin 'audit' during 'before_agent_callback' callback: object NoneType can't be used in 'await' expression"
    )
    assert capsys.readouterr().out == "audit greeter\n"


def test_artifact_without_session():
    with pytest.raises(ValueError, match=r"^Session ID must be provided for session-scoped artifacts\.$"):
        asyncio.run(snippet_artifact_without_session())


def test_custom_executor_method():
    with pytest.raises(TypeError, match="Can't instantiate abstract class SandboxExecutor"):
        snippet_custom_executor_method()


def test_eval_set_without_cases():
    with pytest.raises(ValidationError, match="eval_cases\n  Field required"):
        snippet_eval_set_without_cases()


def test_retry_without_limit():
    with pytest.raises(ValueError, match=r"^max_retries must be a non-negative integer\.$"):
        snippet_retry_without_limit()


def test_live_resumption_flag():
    with pytest.raises(ValidationError, match="session_resumption\n  Input should be a valid dictionary"):
        snippet_live_resumption_flag()


def test_memory_search_positional():
    with pytest.raises(TypeError, match=r"search_memory\(\) takes 1 positional argument but 4 were given"):
        asyncio.run(snippet_memory_search_positional())
