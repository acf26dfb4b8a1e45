import asyncio

from google.adk.agents import BaseAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types


class FrontDesk(BaseAgent):
    """A custom agent that answers "Welcome!" without calling a model."""

    async def _run_async_impl(self, ctx):
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text="Welcome!")]),
        )


# --8<-- [start:after_agent_callbacks]
calls = []


def check_hours(callback_context):
    calls.append("hours")
    return None


def check_holiday(callback_context):
    calls.append("holiday")
    return types.Content(role="model", parts=[types.Part(text="Closed today.")])


def check_staff(callback_context):
    calls.append("staff")
    return types.Content(role="model", parts=[types.Part(text="No staff.")])


async def code_under_test():
    desk = FrontDesk(name="desk", after_agent_callback=[check_hours, check_holiday, check_staff])
    runner = InMemoryRunner(agent=desk, app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="Hi")])
    texts = []
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        texts.append(event.content.parts[0].text)
    print(texts, calls)


# --8<-- [end:after_agent_callbacks]


def test_after_agent_callbacks(capsys):
    """Expected: the agent runs; the first callback that returns content ends the chain and adds an event."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.strip() == "['Welcome!', 'Closed today.'] ['hours', 'holiday']"
