import asyncio

from google.adk.agents import BaseAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types


# --8<-- [start:event_without_author]
class Greeter(BaseAgent):
    async def _run_async_impl(self, ctx):
        yield Event(
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text="Welcome!")]),
        )


async def code_under_test():
    runner = InMemoryRunner(agent=Greeter(name="greeter"), app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="Hi")])
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        print(repr(event.author), event.content.parts[0].text)


# --8<-- [end:event_without_author]


def test_event_without_author(capsys):
    """Expected on 2.13: the event is accepted with an empty author (1.20 refuses it: author is required there)."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.strip() == "'' Welcome!"
