import asyncio
from collections.abc import AsyncGenerator

from google.adk.agents import BaseAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types


class FrontDesk(BaseAgent):
    """Answers every message with "Welcome!", without calling a model."""

    async def _run_async_impl(self, ctx) -> AsyncGenerator[Event, None]:
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text="Welcome!")]),
        )


# --8<-- [start:callback_param_named_context]
def log_done(context):
    print("done:", context.agent_name)


async def code_under_test():
    agent = FrontDesk(name="front_desk", after_agent_callback=log_done)
    runner = InMemoryRunner(agent=agent, app_name="desk")
    session = await runner.session_service.create_session(app_name="desk", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="Hi")])
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        print(event.author, event.content.parts[0].text)


# --8<-- [end:callback_param_named_context]


def test_callback_param_named_context(capsys):
    """Expected on google-adk 2.13: the callback is called with its context whatever the parameter's name."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.splitlines() == ["front_desk Welcome!", "done: front_desk"]
