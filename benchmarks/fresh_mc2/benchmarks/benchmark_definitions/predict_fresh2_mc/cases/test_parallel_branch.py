import asyncio
from collections.abc import AsyncGenerator

from google.adk.agents import BaseAgent, ParallelAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types


class Lookup(BaseAgent):
    """Answers with a fixed text, without calling a model."""

    async def _run_async_impl(self, ctx) -> AsyncGenerator[Event, None]:
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            branch=ctx.branch,
            content=types.Content(role="model", parts=[types.Part(text=f"{self.name} done")]),
        )


# --8<-- [start:parallel_branch]
async def code_under_test():
    fanout = ParallelAgent(name="fanout", sub_agents=[Lookup(name="flights"), Lookup(name="hotels")])
    runner = InMemoryRunner(agent=fanout, app_name="trips")
    session = await runner.session_service.create_session(app_name="trips", user_id="user_42")
    message = types.Content(role="user", parts=[types.Part(text="Plan my trip")])
    seen = []
    async for event in runner.run_async(user_id="user_42", session_id=session.id, new_message=message):
        seen.append((event.author, event.branch))
    for author, branch in sorted(seen):
        print(author, branch)


# --8<-- [end:parallel_branch]


def test_parallel_branch(capsys):
    """Expected: each parallel sub-agent runs on its own branch, `<parent>.<child>`."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.splitlines() == ["flights fanout.flights", "hotels fanout.hotels"]
