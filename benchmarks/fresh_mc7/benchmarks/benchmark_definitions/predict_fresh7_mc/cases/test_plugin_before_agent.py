import asyncio

from google.adk.agents import BaseAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.plugins import BasePlugin
from google.adk.runners import InMemoryRunner
from google.genai import types


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


# --8<-- [start:plugin_before_agent]
calls = []


def note_call(callback_context):
    calls.append("agent callback")


class MaintenancePlugin(BasePlugin):
    async def before_agent_callback(self, *, agent, callback_context):
        calls.append("plugin")
        return types.Content(role="model", parts=[types.Part(text="Closed for maintenance.")])


async def code_under_test():
    agent = Greeter(name="greeter", before_agent_callback=note_call)
    app = App(name="shop", root_agent=agent, plugins=[MaintenancePlugin(name="maintenance")])
    print(await ask(InMemoryRunner(app=app), "Hi"), calls)


# --8<-- [end:plugin_before_agent]


def test_plugin_before_agent(capsys):
    asyncio.run(code_under_test())
    assert capsys.readouterr().out == "['greeter: Closed for maintenance.'] ['plugin']\n"
