import asyncio
from collections.abc import AsyncGenerator

import pytest
from google.adk.agents import BaseAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import ValidationError


class FrontDesk(BaseAgent):
    """Answers every message with "Welcome!", without calling a model."""

    async def _run_async_impl(self, ctx) -> AsyncGenerator[Event, None]:
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text="Welcome!")]),
        )


# --8<-- [start:callback_returns_string]
def closed_on_sundays(callback_context):
    return "We are closed today, please come back tomorrow."


async def code_under_test():
    agent = FrontDesk(name="front_desk", before_agent_callback=closed_on_sundays)
    runner = InMemoryRunner(agent=agent, app_name="desk")
    session = await runner.session_service.create_session(app_name="desk", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="Hi")])
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        print(event.author, event.content.parts[0].text)


# --8<-- [end:callback_returns_string]


def test_callback_returns_string():
    """Expected: the returned str becomes an Event's content, which must be a types.Content."""
    with pytest.raises(ValidationError, match="1 validation error for Event\ncontent\n  Input should be a valid dictionary"):
        asyncio.run(code_under_test())
