import asyncio
from collections.abc import AsyncGenerator

from google.adk.agents import BaseAgent, SequentialAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types


class Step(BaseAgent):
    """Answers '<name> done' without calling a model; with stop=True it first sets ctx.end_invocation."""

    stop: bool = False

    async def _run_async_impl(self, ctx) -> AsyncGenerator[Event, None]:
        if self.stop:
            ctx.end_invocation = True
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text=f"{self.name} done")]),
        )


# --8<-- [start:sequential_end_invocation]
async def code_under_test():
    pipeline = SequentialAgent(name="pipeline", sub_agents=[Step(name="validate", stop=True), Step(name="publish")])
    runner = InMemoryRunner(agent=pipeline, app_name="release")
    session = await runner.session_service.create_session(app_name="release", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="Ship it")])
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        print(event.content.parts[0].text)


# --8<-- [end:sequential_end_invocation]


def test_sequential_end_invocation(capsys):
    """Expected: the flag is set on the sub-agent's own copy of the context, so the sequence goes on."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.splitlines() == ["validate done", "publish done"]
