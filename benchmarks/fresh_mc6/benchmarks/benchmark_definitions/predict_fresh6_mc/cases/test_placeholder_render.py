import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.sessions import InMemorySessionService
from google.adk.utils.instructions_utils import inject_session_state


async def make_context(agent, state):
    """A ReadonlyContext on a new session holding ``state``, built as the runner builds it."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42", state=state)
    ctx = InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)
    return ReadonlyContext(ctx)


# --8<-- [start:placeholder_render]
async def code_under_test():
    agent = LlmAgent(name="host", model="gemini-2.0-flash")
    context = await make_context(agent, {"name": "Ana", "app:team": "Blue", "n": 3})
    print(repr(await inject_session_state("Hi {name}, team {app:team}, {not valid}, n={n}", context)))


# --8<-- [end:placeholder_render]


def test_placeholder_render(capsys):
    asyncio.run(code_under_test())
    assert capsys.readouterr().out == "'Hi Ana, team Blue, {not valid}, n=3'\n"
